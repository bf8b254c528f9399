//! What the order task transitions take and answer (§4.2–§5): the submit, lease, renew, report
//! and reclaim requests, a lease attempt's outcome, and what the sweeper ended.

use std::time::Duration;

use rakuten_types::order::LeaseGrant;
use rakuten_types::{OrderState, Outcome, TaskId, Timestamp, WorkerId};

use crate::settings::LeaseScope;

/// A task to insert (§4.2). Already validated by the HTTP layer.
#[derive(Debug, Clone)]
pub struct NewTask {
    /// The idempotency key.
    pub task_id: TaskId,
    /// The site (`rakuten`).
    pub site: String,
    /// The intent's JSON text exactly as received: stored and handed out byte for byte
    /// (D-intent-verbatim-text).
    pub intent_json: String,
    /// The upstream's deadline for a lease, if any (D-task-not-after-expired). A new task is
    /// created only while it lies ahead of `now` ([`StoreError::DeadlinePassed`] otherwise).
    pub not_after: Option<Timestamp>,
}

/// A lease attempt by a worker (§4.3).
#[derive(Debug, Clone)]
pub struct LeaseRequest {
    /// The polling worker; its heartbeat is refreshed.
    pub worker_id: WorkerId,
    /// Only tasks of this site (re-grants of the worker's own task ignore the filter).
    pub site: Option<String>,
    /// Lease length.
    pub ttl: Duration,
    /// Gate scope.
    pub scope: LeaseScope,
}

/// What one lease attempt found.
#[derive(Debug, Clone, PartialEq)]
pub enum LeaseAttempt {
    /// A grant: a queued task claimed, or the worker's own active task re-granted.
    Granted(LeaseGrant),
    /// Nothing queued (for this site).
    Empty,
    /// Tasks are queued but another task holds the gate (6004 diagnostic).
    GateBusy,
}

/// A renewal (§4.4).
#[derive(Debug, Clone)]
pub struct RenewRequest {
    /// The task.
    pub task_id: TaskId,
    /// The claimed holder.
    pub worker_id: WorkerId,
    /// The grant's fencing token, when the client sent one.
    pub lease_token: Option<String>,
    /// New lease length from now.
    pub ttl: Duration,
}

/// A report (§4.5), validated: `outcome` is set exactly when the report is terminal.
#[derive(Debug, Clone)]
pub struct NewReport {
    /// The task.
    pub task_id: TaskId,
    /// The claimed holder.
    pub worker_id: WorkerId,
    /// The grant's fencing token, when the client sent one.
    pub lease_token: Option<String>,
    /// The order state.
    pub state: OrderState,
    /// Payable, yen.
    pub payable_yen: Option<i64>,
    /// Payment deadline.
    pub pay_deadline: Option<Timestamp>,
    /// Site order number.
    pub site_order_id: Option<String>,
    /// Local evidence path.
    pub evidence_ref: Option<String>,
    /// Free text.
    pub detail: Option<String>,
    /// Error code carried by the report.
    pub error_code: Option<i32>,
    /// `Some` ends the task with this outcome.
    pub outcome: Option<Outcome>,
}

/// A reclaim of a stale task for a named worker (§5).
#[derive(Debug, Clone)]
pub struct ReclaimRequest {
    /// The stale task.
    pub task_id: TaskId,
    /// The worker that gets the new lease.
    pub worker_id: WorkerId,
    /// Lease length.
    pub ttl: Duration,
    /// Gate scope.
    pub scope: LeaseScope,
    /// Why (recorded in `operator_actions`).
    pub reason: String,
    /// Who (the token's name).
    pub actor: String,
}

/// A task the sweeper turned stale.
#[derive(Debug, Clone, PartialEq)]
pub struct StaleTask {
    /// The task.
    pub task_id: TaskId,
    /// Its last holder.
    pub lease_owner: Option<String>,
    /// When the lease lapsed.
    pub lease_expires_at: Option<Timestamp>,
    /// Grants so far.
    pub lease_count: i64,
}

/// A queued task the sweeper ended `expired`: its `not_after` passed before any lease
/// (D-task-not-after-expired).
#[derive(Debug, Clone, PartialEq)]
pub struct ExpiredTask {
    /// The task.
    pub task_id: TaskId,
    /// Its deadline.
    pub not_after: Timestamp,
    /// When it was submitted.
    pub created_at: Timestamp,
}
