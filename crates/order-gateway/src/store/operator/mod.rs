//! Storage of the operator's loop: alert records and their webhook outbox, audited
//! operator actions (resolve, cancel, retire; reclaim records its action through the order
//! store), the worker list and the lease history. The trait is [`OperatorStore`] (here); its
//! types live one file per concept — [`alerts`], [`outbox`], [`actions`], [`workers`],
//! [`grants`] — and are re-exported here. Its one implementation, SQL written once for both
//! engines, is `store/sql/operator.rs` over the concept files beside it.
//!
//! Contract:
//! - at most one open alert per `(kind, subject)`: the partial unique index `one_open_alert`;
//!   [`OperatorStore::alert_sync`] raises, clears and enqueues the webhook events of one tick in ONE
//!   transaction, so a raise is never committed without its outbox rows (a gateway killed with -9
//!   after the commit delivers after restart);
//! - resolve and cancel are conditional updates (`WHERE status = …`) decided by
//!   `TaskStatus::transition`; any other status is a typed 6003 conflict; each writes its
//!   `operator_actions` row in the same transaction;
//! - `now` is the caller's.

pub mod actions;
pub mod alerts;
pub mod grants;
pub mod outbox;
pub mod workers;

use async_trait::async_trait;
use rakuten_types::alert::{AlertKind, AlertView, OperatorActionAck, OperatorActionView};
use rakuten_types::order::Page;
use rakuten_types::{QueryId, TaskId, Timestamp, WorkerId};

pub use actions::{CancelRequest, ResolveRequest, RetireRequest};
pub use alerts::{
    AlertFilter, AlertSyncOutcome, AlertSyncRequest, StaleEvidence, TASK_EXPIRED_SHOWN,
    stale_advice,
};
pub(crate) use alerts::{Cause, LOGGED_OUT, WATCHED_SITE, needs_human_summary};
pub use grants::{GrantEnd, GrantVia, LeaseGrantRecord, token_fingerprint};
pub use outbox::{DeliveryAttempt, OutboxItem};
pub(crate) use outbox::{event_id, notice, webhook_host};
pub use workers::WorkerRow;

use super::StoreError;

/// The operator's-loop store.
#[async_trait]
pub trait OperatorStore: Send + Sync + std::fmt::Debug + 'static {
    /// Computes every alert cause at `now`, raises the new ones, clears those whose cause is gone,
    /// and enqueues one outbox row per event and receiver; one transaction.
    async fn alert_sync(
        &self,
        req: AlertSyncRequest,
        now: Timestamp,
    ) -> Result<AlertSyncOutcome, StoreError>;

    /// A page of alerts, newest first.
    async fn alert_list(&self, filter: AlertFilter) -> Result<Page<AlertView>, StoreError>;

    /// The console's alert list: one keyset page in `(raised_at, insertion order)`
    /// order, oldest first within the page, of the open alerts (`open_only`) or every alert, of
    /// `kind` when set, with a total capped at [`super::COUNT_CAP`] + 1. An index seek plus at
    /// most `limit + 1` rows at any depth (migration 0009).
    async fn alert_seek(
        &self,
        open_only: bool,
        kind: Option<AlertKind>,
        seek: super::Seek,
        limit: i64,
    ) -> Result<super::SeekPage<AlertView>, StoreError>;

    /// Open `task_stale` alerts whose evidence query is not yet submitted (at most 100).
    async fn alert_stale_without_evidence(&self) -> Result<Vec<StaleEvidence>, StoreError>;

    /// Links an alert to the account query submitted as its evidence.
    async fn alert_set_evidence(
        &self,
        alert_id: &str,
        query_id: &QueryId,
    ) -> Result<(), StoreError>;

    /// The receivers with a pending delivery due at `now` (at most `limit`): each is delivered to
    /// as a queue of its own (D-webhook-per-receiver-queues).
    async fn outbox_receivers_due(
        &self,
        now: Timestamp,
        limit: i64,
    ) -> Result<Vec<String>, StoreError>;

    /// One receiver's pending deliveries due at `now`, in `sequence` order (at most `limit`),
    /// without those whose alert has an earlier event still pending to that receiver: the events
    /// of one alert reach a receiver in the order they happened (D-webhook-per-alert-order).
    async fn outbox_due(
        &self,
        url: &str,
        now: Timestamp,
        limit: i64,
    ) -> Result<Vec<OutboxItem>, StoreError>;

    /// Deletes the pending deliveries of every receiver not in `configured` (one removed from
    /// `RAKUTEN_ALERT_WEBHOOK_URLS`, D-webhook-removed-receiver-dropped); returns each such
    /// receiver's URL with the number of rows deleted.
    async fn outbox_drop_unconfigured(
        &self,
        configured: Vec<String>,
    ) -> Result<Vec<(String, u64)>, StoreError>;

    /// Records one delivery attempt (a guarded update of a pending row).
    async fn outbox_record(
        &self,
        attempt: DeliveryAttempt,
        now: Timestamp,
    ) -> Result<(), StoreError>;

    /// `stale|needs_human → succeeded|failed`, audited, or the correction of a `succeeded|failed`
    /// task whose latest reported state contradicts it; 6003 from any other status.
    async fn task_resolve(
        &self,
        req: ResolveRequest,
        now: Timestamp,
    ) -> Result<OperatorActionAck, StoreError>;

    /// `queued → failed`, audited; 6003 from any other status (a lease that won the race).
    async fn task_cancel(
        &self,
        req: CancelRequest,
        now: Timestamp,
    ) -> Result<OperatorActionAck, StoreError>;

    /// The operator actions on a task, oldest first.
    async fn task_operator_actions(
        &self,
        task_id: &TaskId,
    ) -> Result<Vec<OperatorActionView>, StoreError>;

    /// The newest `limit` lease grants of a task, newest first (the console's lease history,
    /// D-lease-grant-history). Empty for a task leased only before migration 0006.
    async fn task_lease_grants(
        &self,
        task_id: &TaskId,
        limit: i64,
    ) -> Result<Vec<LeaseGrantRecord>, StoreError>;

    /// The evidence queries submitted for a task, oldest first.
    async fn task_evidence_queries(&self, task_id: &TaskId) -> Result<Vec<QueryId>, StoreError>;

    /// One page of the known workers (retired ones included) with their total: lease holders
    /// first, then serving ones, then retired ones, each most recently seen first
    /// (D-worker-list-pages). `limit` is already clamped to 1..=200, `offset` ≥ 0.
    async fn worker_list(&self, limit: i64, offset: i64) -> Result<Page<WorkerRow>, StoreError>;

    /// Hides a worker from `/health` and `worker_offline` until it polls again, audited.
    async fn worker_retire(
        &self,
        req: RetireRequest,
        now: Timestamp,
    ) -> Result<OperatorActionView, StoreError>;

    /// Binds `worker_id` to the worker token `token_name` unless it is bound already, and
    /// answers the token name it is bound to: `token_name` itself, or the other token that acted
    /// for it first (D-worker-id-bound-to-token). A retire drops the binding.
    async fn worker_bind(
        &self,
        worker_id: &WorkerId,
        token_name: &str,
        now: Timestamp,
    ) -> Result<String, StoreError>;

    /// The worker token name `worker_id` is bound to, if any (D-worker-id-bound-to-token).
    async fn worker_binding(&self, worker_id: &str) -> Result<Option<String>, StoreError>;
}
