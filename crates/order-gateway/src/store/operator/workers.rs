//! The worker list's row.

use rakuten_types::{TaskId, Timestamp};

/// A worker row.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerRow {
    /// The worker.
    pub worker_id: String,
    /// Its last poll (or valid renew/report).
    pub last_seen_at: Timestamp,
    /// When an operator retired it (cleared by its next poll).
    pub retired_at: Option<Timestamp>,
    /// The task it holds, if any.
    pub active_task: Option<TaskId>,
}
