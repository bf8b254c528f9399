//! The console's read pages, one file per page (as the API's routes are): [`overview`],
//! [`attention`], [`tasks`], [`task`], [`alerts`], [`queries`], [`query`]; here the pieces
//! several pages share (the list page size, the notice after an action, links, pagers). Each page
//! reads a bounded amount through the store (indexed counts, one page of rows) so it stays fast
//! with a large table (docs/BENCHMARKS.md).

pub mod alerts;
pub mod attention;
pub mod overview;
pub mod queries;
pub mod query;
pub mod task;
pub mod tasks;

pub use alerts::{AlertListQuery, alerts};
pub use attention::{ATTENTION_LIMIT, FAILED_WINDOW, attention, reason};
pub use overview::overview;
pub use queries::{QueryListQuery, queries};
pub use query::{query, query_result};
pub use task::task;
pub use tasks::{TaskListQuery, tasks};

use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use rakuten_types::TaskId;
use rakuten_types::intent::IntentSummary;
use serde::Deserialize;
use web_console::layout::{Notice, enc, seek_pager, shown};

use crate::console::Signed;
use crate::store::{COUNT_CAP, Seek, SeekCursor, SeekPage};

/// Rows per list page.
pub const PAGE: i64 = 50;

/// `?done=…` after an action: which notice to show.
#[derive(Debug, Default, Deserialize)]
pub struct Done {
    done: Option<String>,
}

impl Done {
    fn notice(&self) -> Option<Notice> {
        let text = match self.done.as_deref()? {
            "reclaimed" => "Reclaimed: the worker's next poll receives the lease.",
            "resolved" => "Resolved: the task is terminal and the action is in its audit.",
            "cancelled" => "Cancelled: the task is failed and the action is in its audit.",
            "retired" => "Retired: the worker is hidden until it polls again.",
            _ => return None,
        };
        Some(Notice::Ok(text.to_owned()))
    }
}

fn store_error(signed: &Signed, e: crate::store::StoreError) -> Response {
    tracing::error!(error = %e, "console read failed");
    signed.error(
        StatusCode::SERVICE_UNAVAILABLE,
        "The database could not be read; try again.",
    )
}

fn task_link(id: &TaskId) -> Markup {
    html! { a.mono href={ "/console/tasks/" (enc(id.as_str())) } { (id.as_str()) } }
}

/// `item × quantity (≤ limit)` from an intent.
/// A list line's intent: its summary (D-list-pages-bounded), `?` when the stored intent cannot be
/// read.
fn intent_line(intent: &Option<IntentSummary>) -> Markup {
    let Some(intent) = intent else {
        return html! { span.muted { "?" } };
    };
    let url = shown(&intent.item_url);
    html! {
        span.mono { (short_url(&url)) } " × " (intent.quantity)
        @if let Some(max) = intent.max_total_yen { " (≤ ¥" (max) ")" }
    }
}

fn short_url(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    if rest.len() > 60 {
        rest.get(..60).unwrap_or(rest)
    } else {
        rest
    }
}

/// The page position of a list's `?after=` / `?before=` (`before=newest`: the last page); `None`
/// when a cursor is malformed.
fn seek_of(after: Option<&str>, before: Option<&str>) -> Option<Seek> {
    let after = after.filter(|s| !s.is_empty());
    let before = before.filter(|s| !s.is_empty());
    Some(match (after, before) {
        (_, Some("newest")) => Seek::Newest,
        (_, Some(c)) => Seek::Before(SeekCursor::parse(c)?),
        (Some(c), None) => Seek::After(SeekCursor::parse(c)?),
        (None, None) => Seek::Oldest,
    })
}

/// The Older/Newer links of a keyset page.
fn pager_of<T>(base: &str, page: &SeekPage<T>) -> Markup {
    let (first, last) = page
        .edges
        .as_ref()
        .map(|(f, l)| (f.encode(), l.encode()))
        .unzip();
    seek_pager(
        base,
        page.items.len(),
        page.total,
        COUNT_CAP,
        first.as_deref().filter(|_| page.older),
        last.as_deref().filter(|_| page.newer),
    )
}
