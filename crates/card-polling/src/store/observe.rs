//! What `/metrics`, `/readyz` and `/health` read from the database; the reads
//! themselves are written once for both engines in `store/sql/observe.rs`.

/// Item statuses counted at scrape time.
pub const OPEN_ITEM_STATUSES: [&str; 2] = ["pending", "running"];

/// What `/health` reads from the database: the open items by status and the
/// oldest pending item's enqueue instant. Finished items are not counted (D-metrics, D-poll-health-reads-items).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueHealth {
    /// Items `pending`.
    pub pending: i64,
    /// Items `running`.
    pub running: i64,
    /// `enqueued_at` of the oldest `pending` item; `None` when none is pending.
    pub oldest_pending_enqueued_at: Option<rakuten_types::Timestamp>,
}
