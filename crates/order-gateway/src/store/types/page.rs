//! How lists are asked for and paged: the order list's filter, and the keyset pages of the
//! console's lists with their capped counts.

use rakuten_types::{TaskStatus, Timestamp};

/// Filter and page of `GET /api/orders`.
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    /// Only this status.
    pub status: Option<TaskStatus>,
    /// Only this site.
    pub site: Option<String>,
    /// Page size (already clamped to 1..=200).
    pub limit: i64,
    /// Offset (≥ 0).
    pub offset: i64,
}

/// Rows a console count counts up to: past it a page shows "10,000+" instead of scanning on
/// (a count of the whole table is most of a page's time at volume).
pub const COUNT_CAP: i64 = 10_000;

/// A position in a console list's oldest-first order `(created_at, insertion order)` — the order
/// of the indexes `idx_tasks_pending`, `idx_tasks_created` and their account-query twins, so a
/// page starts with an index seek instead of scanning past an offset. Its text form
/// (`<created_at>_<n>`) is what the page's Newer/Older links carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeekCursor {
    created_at: String,
    ord: i64,
}

impl SeekCursor {
    /// The cursor of a row: its `created_at` text as stored and its insertion order.
    pub(crate) fn new(created_at: String, ord: i64) -> Self {
        Self { created_at, ord }
    }

    /// Parses a cursor from a link; `None` when it is not one (the page answers 400).
    pub fn parse(s: &str) -> Option<Self> {
        let (created_at, ord) = s.rsplit_once('_')?;
        Timestamp::parse(created_at).ok()?;
        Some(Self {
            created_at: created_at.to_owned(),
            ord: ord.parse().ok()?,
        })
    }

    /// The text form [`SeekCursor::parse`] reads.
    pub fn encode(&self) -> String {
        format!("{}_{}", self.created_at, self.ord)
    }

    pub(crate) fn created_at(&self) -> &str {
        &self.created_at
    }

    pub(crate) fn ord(&self) -> i64 {
        self.ord
    }
}

/// Where a console list page starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seek {
    /// The oldest rows.
    Oldest,
    /// The rows just after this position (the "newer" link).
    After(SeekCursor),
    /// The rows just before this position (the "older" link).
    Before(SeekCursor),
    /// The newest rows.
    Newest,
}

/// One keyset page of a console list, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct SeekPage<T> {
    /// This page's rows, oldest first, at most the page size.
    pub items: Vec<T>,
    /// The first and last row's positions (the Older and Newer links start there).
    pub edges: Option<(SeekCursor, SeekCursor)>,
    /// Whether a row precedes this page.
    pub older: bool,
    /// Whether a row follows this page.
    pub newer: bool,
    /// Rows matching the filter, counted up to [`COUNT_CAP`] + 1 (more than the cap: "10,000+").
    pub total: i64,
}
