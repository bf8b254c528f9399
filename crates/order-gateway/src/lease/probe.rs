//! Timestamps at the steps of a hand-off (submit acknowledged → grant received), for the
//! benchmark's breakdown (issue #12 item 9, `docs/BENCHMARKS.md`). Nothing is recorded unless a
//! hook is installed ([`install`], done only by `benches/gateway.rs`); without one a step costs
//! one atomic load. The hook is process-wide: several applications in one process share it.

use std::sync::OnceLock;

/// A step of the hand-off path, in the order a single hand-off passes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    /// `POST /api/orders`: the insert is committed (the store answered).
    SubmitCommitted,
    /// `POST /api/orders`: the waiting long-poll was notified (right before the answer is sent).
    SubmitNotified,
    /// A waiting long-poll's task ran again after a wake-up, about to start its lease attempt.
    PollWoken,
    /// SQLite writer: a batch starts (`BEGIN IMMEDIATE` next).
    WriterBatchBegin,
    /// SQLite writer: the batch's operations ran, `COMMIT` (the fsync) next.
    WriterCommitStart,
    /// SQLite writer: `COMMIT` returned.
    WriterCommitDone,
    /// The long-poll's lease attempt returned to its handler (the answer is serialized next).
    LeaseReturned,
}

static HOOK: OnceLock<fn(Step)> = OnceLock::new();

/// Installs `hook`, called at every [`Step`] from then on; false when one was installed already.
pub fn install(hook: fn(Step)) -> bool {
    HOOK.set(hook).is_ok()
}

/// Records `step` when a hook is installed.
#[inline]
pub(crate) fn mark(step: Step) {
    if let Some(hook) = HOOK.get() {
        hook(step);
    }
}
