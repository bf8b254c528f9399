//! The operator actions' requests: resolve, cancel, and a worker's retirement, each with the
//! reason and the actor its audit row records.

use rakuten_types::{OrderState, Outcome, TaskId, WorkerId};

/// An operator's resolve of a `stale` or `needs_human` task.
#[derive(Debug, Clone)]
pub struct ResolveRequest {
    /// The task.
    pub task_id: TaskId,
    /// `succeeded` or `failed`.
    pub outcome: Outcome,
    /// Why.
    pub reason: String,
    /// Who (the token's name).
    pub actor: String,
    /// The site order number the person saw.
    pub site_order_id: Option<String>,
    /// The order state the person saw; recorded in `history` marked with the operator.
    pub state: Option<OrderState>,
}

/// An operator's cancel of a queued task.
#[derive(Debug, Clone)]
pub struct CancelRequest {
    /// The task.
    pub task_id: TaskId,
    /// Why.
    pub reason: String,
    /// Who.
    pub actor: String,
}

/// An operator's retirement of a worker.
#[derive(Debug, Clone)]
pub struct RetireRequest {
    /// The worker.
    pub worker_id: WorkerId,
    /// Why.
    pub reason: String,
    /// Who.
    pub actor: String,
}
