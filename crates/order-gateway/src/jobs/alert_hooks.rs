//! Log lines for alerts raised from inside a transition or a sweep, at WARN with a stable
//! `alert_kind` field. The alert records themselves come from stored causes the alert job reads
//! (`jobs::alerts`): a set-aside task is a `needs_human` row, a clock skew or jump is a
//! `clock_signals` row the sweeper writes.

/// `alert_kind = "undecodable_row"`: a task's stored row could not be decoded and the task was
/// set aside as `needs_human`. `cause` is the decoding error, never row content.
pub fn raise_undecodable_row(task_id: &str, cause: &str) {
    tracing::warn!(
        alert_kind = "undecodable_row",
        task_id,
        cause,
        "a task's stored row cannot be decoded; set aside as needs_human, the queue keeps flowing"
    );
}

/// `alert_kind = "clock_jump"`: leases expiring later than `now + TTL + margin` were clamped (a
/// grant stamped while the clock ran ahead), or the clock stepped between two sweeps. The
/// sweeper also records it in `clock_signals`, which raises the `clock_jump` alert record.
pub fn raise_clock_jump(detail: &str) {
    tracing::warn!(alert_kind = "clock_jump", detail, "the clock jumped");
}

/// `alert_kind = "clock_skew"`: this instance's clock differs from the shared database's by more
/// than the tolerance; it leaves lease sweeps to the other instances until it is fixed. Logged
/// when the skew starts; the `clock_skew` alert record comes from `clock_signals`.
pub fn raise_clock_skew(offset_ms: i64) {
    tracing::warn!(
        alert_kind = "clock_skew",
        offset_ms,
        "this instance's clock is off from the database's; not sweeping leases"
    );
}
