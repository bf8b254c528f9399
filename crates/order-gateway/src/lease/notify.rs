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

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rakuten_types::order::LeaseGrant;
use tokio::sync::{Notify, oneshot};

use crate::store::LeaseRequest;

/// A cheap, cloneable handle on the wake-up signal, with the count of lease attempts the
/// long-polls waiting on it ran, by what started each (see [`LeaseAttempts`]), and the queue of
/// waiting long-polls a submit may hand its task to (D-handoff-in-submit-commit).
#[derive(Debug, Clone, Default)]
pub struct LeaseNotifier(Arc<Notify>, Arc<AttemptCounters>, Arc<Waiters>);

/// The long-polls of this process waiting now, longest waiting first, each with the request its
/// lease attempt would run and where a submit sends what that attempt gave.
#[derive(Debug, Default)]
struct Waiters {
    /// Hand-offs are off ([`LeaseNotifier::set_handoff`]).
    off: std::sync::atomic::AtomicBool,
    next_id: AtomicU64,
    queue: Mutex<VecDeque<(u64, LeaseRequest, oneshot::Sender<LeaseGrant>)>>,
}

/// A waiting long-poll a submit has taken out of the queue ([`LeaseNotifier::take_waiter`]): the
/// submit runs [`Self::request`]'s lease attempt in its own transaction and, after the commit,
/// [`Self::hand`]s the grant over. Dropped without a grant, the poll runs an attempt of its own.
#[derive(Debug)]
pub struct TakenWaiter {
    req: LeaseRequest,
    reply: oneshot::Sender<LeaseGrant>,
}

impl TakenWaiter {
    /// The lease request of the waiting poll.
    pub fn request(&self) -> &LeaseRequest {
        &self.req
    }

    /// Sends the committed grant to the poll. `false` when the poll has gone meanwhile: the grant
    /// stays with its worker, whose next poll gets it back, or it expires to `stale`.
    pub fn hand(self, grant: LeaseGrant) -> bool {
        self.reply.send(grant).is_ok()
    }
}

/// A long-poll's place in the hand-off queue ([`LeaseNotifier::wait_for_handoff`]), left when
/// dropped.
#[derive(Debug)]
pub struct HandoffSlot {
    id: u64,
    waiters: Arc<Waiters>,
    grant: Option<oneshot::Receiver<LeaseGrant>>,
}

impl HandoffSlot {
    /// Completes when a submit that took this poll has committed: `Some` grant, or `None` when
    /// its attempt granted nothing or failed (the poll then runs an attempt of its own).
    pub async fn handed(&mut self) -> Option<LeaseGrant> {
        match self.grant.as_mut() {
            Some(rx) => {
                let r = rx.await.ok();
                self.grant = None;
                r
            }
            None => std::future::pending().await,
        }
    }

    /// Leaves the queue. `None`: the poll was still in it, nobody ran an attempt for it. Else a
    /// submit had taken it: waits for that submit's answer, so that a poll never runs an attempt
    /// of its own while one runs for it (the second would re-grant the task just granted).
    pub async fn leave(&mut self) -> Option<Option<LeaseGrant>> {
        let withdrawn = {
            let mut queue = self.waiters.queue.lock().unwrap_or_else(|e| e.into_inner());
            let before = queue.len();
            queue.retain(|(id, _, _)| *id != self.id);
            queue.len() != before
        };
        if withdrawn || self.grant.is_none() {
            self.grant = None;
            return None;
        }
        Some(self.handed().await)
    }
}

impl Drop for HandoffSlot {
    fn drop(&mut self) {
        // A poll that goes away (its client disconnected) leaves the queue; one a submit already
        // took gets its grant dropped: the lease expires to `stale`, as for any grant that
        // reached no one.
        if self.grant.is_some() {
            self.waiters
                .queue
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|(id, _, _)| *id != self.id);
        }
    }
}

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
    /// A wake-up from this notifier (a submit, a freed gate, a `NOTIFY` from another instance),
    /// or a submit's hand-off (the attempt ran inside the submit's transaction).
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

    /// Queues a waiting long-poll for a submit's hand-off; it leaves the queue with the returned
    /// slot ([`HandoffSlot::leave`], or when the slot is dropped).
    pub fn wait_for_handoff(&self, req: LeaseRequest) -> HandoffSlot {
        let id = self.2.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.2
            .queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back((id, req, tx));
        HandoffSlot {
            id,
            waiters: self.2.clone(),
            grant: Some(rx),
        }
    }

    /// Takes the longest-waiting long-poll still there, for a submit to run its lease attempt in
    /// the submit's own transaction (D-handoff-in-submit-commit); `None` when no poll waits.
    pub fn take_waiter(&self) -> Option<TakenWaiter> {
        if self.2.off.load(Ordering::Relaxed) {
            return None;
        }
        let mut queue = self.2.queue.lock().unwrap_or_else(|e| e.into_inner());
        while let Some((_, req, reply)) = queue.pop_front() {
            if !reply.is_closed() {
                return Some(TakenWaiter { req, reply });
            }
        }
        None
    }

    /// Turns submits' hand-offs on (the default) or off: off, every submit wakes a waiting poll
    /// to run its own attempt after the submit's commit, as for another instance's poll on
    /// PostgreSQL. For tests and benches that measure that path.
    pub fn set_handoff(&self, on: bool) {
        self.2.off.store(!on, Ordering::Relaxed);
    }

    /// Long-polls waiting in the hand-off queue now.
    pub fn handoff_waiters(&self) -> usize {
        self.2.queue.lock().unwrap_or_else(|e| e.into_inner()).len()
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

    fn request(worker: &str) -> LeaseRequest {
        LeaseRequest {
            worker_id: rakuten_types::WorkerId::parse(worker).unwrap(),
            site: None,
            ttl: std::time::Duration::from_secs(60),
            scope: crate::settings::LeaseScope::Global,
        }
    }

    #[test]
    fn a_submit_takes_the_longest_waiting_poll_and_a_poll_that_left_is_never_taken() {
        let n = LeaseNotifier::new();
        let first = n.wait_for_handoff(request("w-1"));
        let _second = n.wait_for_handoff(request("w-2"));
        let gone = n.wait_for_handoff(request("w-3"));
        drop(gone);
        assert_eq!(n.handoff_waiters(), 2);
        let taken = n.take_waiter().unwrap();
        assert_eq!(taken.request().worker_id.as_str(), "w-1");
        drop(first);
        assert_eq!(n.take_waiter().unwrap().request().worker_id.as_str(), "w-2");
        assert!(n.take_waiter().is_none());
    }

    #[test]
    fn with_hand_offs_off_no_submit_takes_a_waiting_poll() {
        let n = LeaseNotifier::new();
        let _slot = n.wait_for_handoff(request("w-1"));
        n.set_handoff(false);
        assert!(n.take_waiter().is_none());
        n.set_handoff(true);
        assert!(n.take_waiter().is_some());
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
