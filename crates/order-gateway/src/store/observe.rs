//! What `/metrics` and `/readyz` read from the database: the snapshot
//! types here, the reads once for both engines in `store/sql/observe.rs`. Each read is bounded:
//! the task and query counts visit only rows of the open statuses through the
//! `(status, created_at)` indexes (finished rows, the bulk of a long-lived queue, are never
//! scanned), the worker list is capped at [`MAX_WORKERS`].

use rakuten_types::Timestamp;

use super::WorkerSeen;

/// Task statuses counted at scrape time (the terminal `succeeded` / `failed` are counted by
/// in-process counters instead: counting them would scan the whole history).
pub const OPEN_TASK_STATUSES: [&str; 5] = ["queued", "leased", "running", "stale", "needs_human"];
/// Account-query statuses counted at scrape time (the channel's depth).
pub const OPEN_QUERY_STATUSES: [&str; 2] = ["queued", "leased"];
/// Most workers listed.
pub const MAX_WORKERS: i64 = 1000;

/// How many tasks have one open status, and the oldest of them.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusCount {
    /// The status.
    pub status: String,
    /// Tasks in it.
    pub count: i64,
    /// The oldest `created_at` among them.
    pub oldest_created: Option<Timestamp>,
    /// The oldest `updated_at` (last change) among them.
    pub oldest_updated: Option<Timestamp>,
}

/// Everything `/metrics` reads from the database, in one snapshot per scrape.
#[derive(Debug, Clone, Default)]
pub struct StoreCounts {
    /// Open task statuses present (absent = 0).
    pub tasks: Vec<StatusCount>,
    /// Open account-query statuses present and their counts (absent = 0).
    pub queries: Vec<(String, i64)>,
    /// Workers, most recently seen first, at most [`MAX_WORKERS`].
    pub workers: Vec<WorkerSeen>,
}
