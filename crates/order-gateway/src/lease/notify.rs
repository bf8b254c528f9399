//! In-process wake-up of waiting long-polls. Called after a commit that may make something
//! leasable: a new task, a terminal report (gate freed), a sweep that staled a task (gate freed).
//! Waiters also re-check the database periodically, so a missed wake-up only delays, never loses.

use std::sync::Arc;

use tokio::sync::Notify;

/// A cheap, cloneable handle on the wake-up signal.
#[derive(Debug, Clone, Default)]
pub struct LeaseNotifier(Arc<Notify>);

impl LeaseNotifier {
    /// A new signal.
    pub fn new() -> Self {
        Self::default()
    }

    /// Wakes every long-poll currently waiting.
    pub fn notify_leasable(&self) {
        self.0.notify_waiters();
    }

    /// A future that completes at the next [`notify_leasable`](Self::notify_leasable). Call
    /// `enable()` on it (pinned) before checking the database, so a wake-up between the check and
    /// the wait is not missed.
    pub fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.0.notified()
    }
}
