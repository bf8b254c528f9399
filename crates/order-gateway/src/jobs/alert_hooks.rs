//! Hooks for alerts raised from inside a transition, where the alert sweeper (`jobs::alerts`)
//! cannot see them. Each one logs at WARN with a stable `alert_kind` field today; the alert
//! storage of issue #10 plugs in here (one call per event, so nothing is raised twice).

/// `alert_kind = "undecodable_row"`: a task's stored row could not be decoded and the task was
/// set aside as `needs_human` (issue #12 item 7). `cause` is the decoding error, never row content.
pub fn raise_undecodable_row(task_id: &str, cause: &str) {
    tracing::warn!(
        alert_kind = "undecodable_row",
        task_id,
        cause,
        "a task's stored row cannot be decoded; set aside as needs_human, the queue keeps flowing"
    );
}
