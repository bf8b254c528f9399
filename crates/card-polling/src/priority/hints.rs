//! The execution-hint plug (spec "优先调度与执行提示通道"; built in issue #6).
//!
//! Every enqueue path calls [`HintSink::push`] after its transaction committed, with the items it
//! created or merged. Hints are advisory: the persisted items decide activity, permission and
//! attempts, and a lost hint only delays an item until the executor's next round. Issue #6
//! replaces [`NoHints`] with per-task-type channels (in-process and Redis).

use crate::store::EnqueuedItem;

/// Receives the items touched by a committed enqueue.
pub trait HintSink: Send + Sync + 'static {
    /// Called after commit; must not block.
    fn push(&self, items: &[EnqueuedItem]);
}

/// No hint channel: the executor's periodic round finds every due item.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHints;

impl HintSink for NoHints {
    fn push(&self, _items: &[EnqueuedItem]) {}
}
