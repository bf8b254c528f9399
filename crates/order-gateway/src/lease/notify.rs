//! In-process wake-up of waiting long-polls. Called after a commit that may make something
//! leasable: a new task, a terminal report (gate freed), a sweep that staled a task (gate freed).
//! Waiters also re-check the database periodically, so a missed wake-up only delays, never loses.
//!
//! One wake per leasable thing: a new task wakes ONE waiting long-poll, not all
//! of them; with 100 polls waiting, one submit used to make all 100 run a lease transaction for a
//! single grant. A waiter that is woken but whose future is dropped before it ran passes the wake
//! on (tokio's `Notify` forwards an unconsumed `notify_one`). A woken waiter whose attempt finds
//! nothing for it (another site, the gate taken) does not pass it on: the others find the task at
//! their periodic check, at most [`FALLBACK_CHECK`](super::long_poll::FALLBACK_CHECK) later.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

/// A cheap, cloneable handle on the wake-up signal, with the count of lease attempts the
/// long-polls waiting on it ran, by what started each (see [`LeaseAttempts`]).
#[derive(Debug, Clone, Default)]
pub struct LeaseNotifier(Arc<Notify>, Arc<AttemptCounters>);

#[derive(Debug, Default)]
struct AttemptCounters {
    first: AtomicU64,
    woken: AtomicU64,
    rechecked: AtomicU64,
}

/// What started a long-poll's lease attempt (one database transaction each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptCause {
    /// The poll's first attempt, as the request arrives.
    First,
    /// A wake-up from this notifier (a submit, a freed gate, a `NOTIFY` from another instance).
    Woken,
    /// The periodic database check ([`FALLBACK_CHECK`](super::long_poll::FALLBACK_CHECK)) saw
    /// something leasable.
    Rechecked,
}

/// Completed lease attempts of the long-polls on one notifier since start, by cause: how many
/// lease transactions one submit cost (one woken attempt per leasable task).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeaseAttempts {
    /// First attempts (one per long-poll request).
    pub first: u64,
    /// Attempts after a wake-up.
    pub woken: u64,
    /// Attempts after a periodic check found something leasable.
    pub rechecked: u64,
}

impl LeaseNotifier {
    /// A new signal.
    pub fn new() -> Self {
        Self::default()
    }

    /// One thing became leasable: wakes one waiting long-poll (or the next one to wait).
    pub fn notify_leasable(&self) {
        self.0.notify_one();
    }

    /// `n` things became leasable (a sweep freed `n` gates, another instance coalesced `n`
    /// submits into one `NOTIFY`): wakes up to `n` waiting long-polls.
    pub fn notify_leasable_n(&self, n: usize) {
        for _ in 0..n {
            self.0.notify_one();
        }
    }

    /// Wakes every waiting long-poll: for a wake-up meant for one particular worker (a reclaim
    /// names it) or when wake-ups may have been lost (a `LISTEN` connection dropped).
    pub fn notify_everyone(&self) {
        self.0.notify_waiters();
    }

    /// A future that completes at the next wake-up meant for it. Call `enable()` on it (pinned)
    /// before checking the database, so a wake-up between the check and the wait is not missed.
    pub fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.0.notified()
    }

    /// Counts one completed lease attempt started by `cause`.
    pub fn count_attempt(&self, cause: AttemptCause) {
        let c = match cause {
            AttemptCause::First => &self.1.first,
            AttemptCause::Woken => &self.1.woken,
            AttemptCause::Rechecked => &self.1.rechecked,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Lease attempts counted so far, by cause.
    pub fn attempts(&self) -> LeaseAttempts {
        LeaseAttempts {
            first: self.1.first.load(Ordering::Relaxed),
            woken: self.1.woken.load(Ordering::Relaxed),
            rechecked: self.1.rechecked.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    use super::*;

    /// Enables 100 waiters, sends `events` wake-ups, and counts the waiters that completed.
    fn woken_of_a_hundred(events: usize) -> usize {
        let n = LeaseNotifier::new();
        let mut waiters: Vec<_> = (0..100).map(|_| Box::pin(n.notified())).collect();
        for w in &mut waiters {
            w.as_mut().enable();
        }
        n.notify_leasable_n(events);
        let mut cx = Context::from_waker(Waker::noop());
        waiters
            .iter_mut()
            .filter_map(|w| match w.as_mut().poll(&mut cx) {
                Poll::Ready(()) => Some(()),
                Poll::Pending => None,
            })
            .count()
    }

    #[test]
    fn one_leasable_task_wakes_exactly_one_of_a_hundred_waiting_polls() {
        assert_eq!(woken_of_a_hundred(1), 1);
    }

    #[test]
    fn three_leasable_tasks_wake_three_waiting_polls() {
        assert_eq!(woken_of_a_hundred(3), 3);
    }

    #[test]
    fn a_reclaim_wakes_every_waiting_poll_since_it_names_one_worker() {
        let n = LeaseNotifier::new();
        let mut waiters: Vec<_> = (0..10).map(|_| Box::pin(n.notified())).collect();
        for w in &mut waiters {
            w.as_mut().enable();
        }
        n.notify_everyone();
        let mut cx = Context::from_waker(Waker::noop());
        for w in &mut waiters {
            assert!(w.as_mut().poll(&mut cx).is_ready());
        }
    }
}
