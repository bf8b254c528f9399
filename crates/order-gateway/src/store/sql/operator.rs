//! The one implementation of [`OperatorStore`], compiled once per engine like the rest of
//! `store/sql` (see its module docs): each method runs one function of the concept's file —
//! [`alerts`](super::alerts) (with [`alert_causes`](super::alert_causes)),
//! [`outbox`](super::outbox), [`actions`](super::actions), [`workers`](super::workers),
//! [`grants`](super::grants) — through the engine's `write` (SQLite: the group-commit writer;
//! PostgreSQL: one transaction) or on its read pool.

use rakuten_types::alert::{AlertKind, AlertView, OperatorActionAck, OperatorActionView};
use rakuten_types::order::Page;
use rakuten_types::{QueryId, TaskId, Timestamp, WorkerId};

use super::{Store, actions, alerts, grants, outbox, paging, workers};
use crate::store::operator::{
    AlertFilter, AlertSyncOutcome, AlertSyncRequest, CancelRequest, DeliveryAttempt,
    LeaseGrantRecord, OperatorStore, OutboxItem, ResolveRequest, RetireRequest, StaleEvidence,
    WorkerRow,
};
use crate::store::{Seek, SeekPage, StoreError};

#[async_trait::async_trait]
impl OperatorStore for Store {
    async fn alert_sync(
        &self,
        req: AlertSyncRequest,
        now: Timestamp,
    ) -> Result<AlertSyncOutcome, StoreError> {
        self.write(Box::new(move |c| Box::pin(alerts::alert_sync(c, req, now))))
            .await
    }

    async fn alert_list(&self, filter: AlertFilter) -> Result<Page<AlertView>, StoreError> {
        let mut c = self.read_pool().acquire().await?;
        alerts::alert_list(&mut c, filter).await
    }

    async fn alert_seek(
        &self,
        open_only: bool,
        kind: Option<AlertKind>,
        seek: Seek,
        limit: i64,
    ) -> Result<SeekPage<AlertView>, StoreError> {
        let filters = [
            ("state", open_only.then_some("open")),
            ("kind", kind.map(|k| k.as_str())),
        ];
        paging::seek_page_by(
            self.read_pool(),
            alerts::ALERT_COLUMNS,
            "alerts",
            "",
            "raised_at",
            filters,
            (&seek, limit),
            alerts::decode_alert,
        )
        .await
    }

    async fn alert_stale_without_evidence(&self) -> Result<Vec<StaleEvidence>, StoreError> {
        let mut c = self.read_pool().acquire().await?;
        alerts::alert_stale_without_evidence(&mut c).await
    }

    async fn alert_set_evidence(
        &self,
        alert_id: &str,
        query_id: &QueryId,
    ) -> Result<(), StoreError> {
        let (a, q) = (alert_id.to_owned(), query_id.clone());
        self.write(Box::new(move |c| {
            Box::pin(alerts::alert_set_evidence(c, a, q))
        }))
        .await
    }

    async fn outbox_receivers_due(
        &self,
        now: Timestamp,
        limit: i64,
    ) -> Result<Vec<String>, StoreError> {
        let mut c = self.read_pool().acquire().await?;
        outbox::outbox_receivers_due(&mut c, now, limit).await
    }

    async fn outbox_due(
        &self,
        url: &str,
        now: Timestamp,
        limit: i64,
    ) -> Result<Vec<OutboxItem>, StoreError> {
        let mut c = self.read_pool().acquire().await?;
        outbox::outbox_due(&mut c, url, now, limit).await
    }

    async fn outbox_drop_unconfigured(
        &self,
        configured: Vec<String>,
    ) -> Result<Vec<(String, u64)>, StoreError> {
        self.write(Box::new(move |c| {
            Box::pin(outbox::outbox_drop_unconfigured(c, configured))
        }))
        .await
    }

    async fn outbox_record(
        &self,
        attempt: DeliveryAttempt,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        self.write(Box::new(move |c| {
            Box::pin(outbox::outbox_record(c, attempt, now))
        }))
        .await
    }

    async fn task_resolve(
        &self,
        req: ResolveRequest,
        now: Timestamp,
    ) -> Result<OperatorActionAck, StoreError> {
        self.write(Box::new(move |c| {
            Box::pin(actions::task_resolve(c, req, now))
        }))
        .await
    }

    async fn task_cancel(
        &self,
        req: CancelRequest,
        now: Timestamp,
    ) -> Result<OperatorActionAck, StoreError> {
        self.write(Box::new(move |c| {
            Box::pin(actions::task_cancel(c, req, now))
        }))
        .await
    }

    async fn task_operator_actions(
        &self,
        task_id: &TaskId,
    ) -> Result<Vec<OperatorActionView>, StoreError> {
        let mut c = self.read_pool().acquire().await?;
        actions::task_operator_actions(&mut c, task_id.clone()).await
    }

    async fn task_lease_grants(
        &self,
        task_id: &TaskId,
        limit: i64,
    ) -> Result<Vec<LeaseGrantRecord>, StoreError> {
        let mut c = self.read_pool().acquire().await?;
        grants::task_lease_grants(&mut c, task_id, limit).await
    }

    async fn task_evidence_queries(&self, task_id: &TaskId) -> Result<Vec<QueryId>, StoreError> {
        let mut c = self.read_pool().acquire().await?;
        alerts::task_evidence_queries(&mut c, task_id.clone()).await
    }

    async fn worker_list(&self, limit: i64, offset: i64) -> Result<Page<WorkerRow>, StoreError> {
        workers::worker_list(self.read_pool(), (limit, offset)).await
    }

    async fn worker_retire(
        &self,
        req: RetireRequest,
        now: Timestamp,
    ) -> Result<OperatorActionView, StoreError> {
        self.write(Box::new(move |c| {
            Box::pin(workers::worker_retire(c, req, now))
        }))
        .await
    }

    async fn worker_bind(
        &self,
        worker_id: &WorkerId,
        token_name: &str,
        now: Timestamp,
    ) -> Result<String, StoreError> {
        // Steady state is a read: only the first call for a worker id goes through the writer.
        let mut c = self.read_pool().acquire().await?;
        if let Some(bound) = workers::worker_binding(&mut c, worker_id.as_str()).await? {
            return Ok(bound);
        }
        drop(c);
        let (worker_id, token_name) = (worker_id.to_string(), token_name.to_owned());
        self.write(Box::new(move |c| {
            Box::pin(workers::worker_bind(c, worker_id, token_name, now))
        }))
        .await
    }

    async fn worker_binding(&self, worker_id: &str) -> Result<Option<String>, StoreError> {
        let mut c = self.read_pool().acquire().await?;
        workers::worker_binding(&mut c, worker_id).await
    }
}
