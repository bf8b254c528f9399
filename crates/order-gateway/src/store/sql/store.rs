//! [`OrderStore`] and [`QueryStore`] for the engine's store, once: every write runs one
//! transition through the engine's `write` (SQLite: the group-commit writer; PostgreSQL: one
//! transaction), reads go to its read pool, and a commit that may make something leasable asks
//! for a cross-instance wake-up (`notify_*`: PostgreSQL `NOTIFY`, nothing on SQLite, whose
//! long-polls all live in this process). Every operation is [`bounded`]: a locked or stalled
//! database answers `Busy` (503) instead of holding the request.

use async_trait::async_trait;
use rakuten_types::order::{
    LeaseGrant, Page, RenewAck, ReportAck, SubmitOrderAck, TaskDetail, TaskSummary,
};
use rakuten_types::query::{
    QueryGrant, QueryKind, QueryResultAck, QueryStatus, QuerySummary, QueryView, SubmitQueryAck,
};
use rakuten_types::{QueryId, TaskId, TaskStatus, Timestamp, WorkerId};

use super::{Store, clocks, observe, queries, reads, tasks};
use crate::settings::LeaseScope;
use crate::store::postgres::WAKE_EVERYONE;
use crate::store::queries::{
    LapsedQuery, NewQuery, QueryFilter, QueryLeaseRequest, QueryResultRecord, QueryStore,
};
use crate::store::observe::StoreCounts;
use crate::store::{
    bounded,
    AttentionTask, ClockSignal, ExpiredTask, HealthSnapshot, StatusCounts, LeaseAttempt, LeaseRequest, NewReport, NewTask, OrderStore, ReclaimRequest,
    RenewRequest, Seek, SeekPage, StaleTask, StoreError, TaskFilter,
};

#[async_trait]
impl OrderStore for Store {
    async fn task_insert(
        &self,
        task: NewTask,
        now: Timestamp,
    ) -> Result<SubmitOrderAck, StoreError> {
        let ack = super::insert(self, task, now).await?;
        if ack.created {
            self.notify_tasks(1);
        }
        Ok(ack)
    }

    async fn task_insert_handing(
        &self,
        task: NewTask,
        waiter: LeaseRequest,
        now: Timestamp,
    ) -> Result<(SubmitOrderAck, Option<LeaseAttempt>), StoreError> {
        let (ack, attempt) = super::insert_handing(self, task, waiter, now).await?;
        // Another instance's poll may take what the local one did not.
        if ack.created && !matches!(attempt, Some(LeaseAttempt::Granted(_))) {
            self.notify_tasks(1);
        }
        Ok((ack, attempt))
    }

    async fn task_lease(
        &self,
        req: LeaseRequest,
        now: Timestamp,
    ) -> Result<LeaseAttempt, StoreError> {
        super::lease(self, req, now).await
    }

    async fn task_leasable_exists(
        &self,
        worker_id: &WorkerId,
        site: Option<&str>,
        scope: LeaseScope,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        bounded(reads::task_leasable_exists(self.read_pool(), worker_id, site, scope, now)).await
    }

    async fn task_renew(&self, req: RenewRequest, now: Timestamp) -> Result<RenewAck, StoreError> {
        super::renew(self, req, now).await
    }

    async fn task_report(
        &self,
        report: NewReport,
        now: Timestamp,
    ) -> Result<ReportAck, StoreError> {
        let ack = super::report(self, report, now).await?;
        if ack.status.is_terminal() {
            // The gate may be free again.
            self.notify_tasks(1);
        }
        Ok(ack)
    }

    async fn task_reclaim(
        &self,
        req: ReclaimRequest,
        now: Timestamp,
    ) -> Result<LeaseGrant, StoreError> {
        let grant = self
            .write(Box::new(move |c| Box::pin(tasks::task_reclaim(c, req, now))))
            .await?;
        // The named worker may be long-polling on another instance, as any of its waiters.
        self.notify_tasks(WAKE_EVERYONE);
        Ok(grant)
    }

    async fn task_mark_stale_expired(&self, now: Timestamp) -> Result<Vec<StaleTask>, StoreError> {
        let staled = self
            .write(Box::new(move |c| Box::pin(tasks::task_mark_stale_expired(c, now))))
            .await?;
        // Each staled task may have freed a gate.
        self.notify_tasks(staled.len());
        Ok(staled)
    }

    async fn task_expire_past_not_after(
        &self,
        now: Timestamp,
    ) -> Result<Vec<ExpiredTask>, StoreError> {
        self.write(Box::new(move |c| {
            Box::pin(tasks::task_expire_past_not_after(c, now))
        }))
        .await
    }

    async fn task_clamp_leases(
        &self,
        limit: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<TaskId>, StoreError> {
        self.write(Box::new(move |c| {
            Box::pin(tasks::task_clamp_leases(c, limit, now))
        }))
        .await
    }

    async fn clock_signal_record(
        &self,
        signal: ClockSignal,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        self.write(Box::new(move |c| {
            Box::pin(clocks::clock_signal_record(c, signal, now))
        }))
        .await
    }

    async fn clock_offset_ms(&self, now: Timestamp) -> Result<Option<i64>, StoreError> {
        bounded(self.database_clock_offset_ms(now)).await
    }

    fn wakeups_listening(&self) -> bool {
        self.listening()
    }

    async fn task_get(&self, task_id: &TaskId) -> Result<Option<TaskDetail>, StoreError> {
        bounded(reads::task_get(self.read_pool(), task_id)).await
    }

    async fn task_list(&self, filter: TaskFilter) -> Result<Page<TaskSummary>, StoreError> {
        bounded(reads::task_list(self.read_pool(), filter)).await
    }

    async fn task_seek(
        &self,
        status: Option<TaskStatus>,
        site: Option<String>,
        seek: Seek,
        limit: i64,
    ) -> Result<SeekPage<TaskSummary>, StoreError> {
        bounded(reads::task_seek(self.read_pool(), status, site, seek, limit)).await
    }

    async fn task_active_leases(&self) -> Result<Vec<TaskSummary>, StoreError> {
        bounded(reads::task_active_leases(self.read_pool())).await
    }

    async fn task_status_counts(&self) -> Result<StatusCounts, StoreError> {
        reads::task_status_counts(self.read_pool()).await
    }

    async fn task_attention(
        &self,
        failed_since: Timestamp,
        limit: i64,
    ) -> Result<Vec<AttentionTask>, StoreError> {
        reads::task_attention(self.read_pool(), failed_since, limit).await
    }

    async fn health_snapshot(
        &self,
        queued_before: Timestamp,
    ) -> Result<HealthSnapshot, StoreError> {
        bounded(reads::health_snapshot(self.read_pool(), queued_before)).await
    }

    async fn alerts_leader(&self) -> Result<bool, StoreError> {
        self.elect_alerts_leader().await
    }

    async fn store_counts(&self) -> Result<StoreCounts, StoreError> {
        bounded(observe::store_counts(self.read_pool())).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.ensure_open()?;
        if self.writes_failing() {
            // Reads still answer, but a lease or a report could not be recorded (D-writes-failing-is-503-and-unready);
            // said as such in the readiness log, not as a closed store (D-gateway-health-content).
            return Err(StoreError::Unavailable(
                "writes are failing (a full disk, an I/O error, a read-only file or a lock held past the timeout); reads still answer".into(),
            ));
        }
        bounded(observe::ping(self.read_pool())).await
    }

    async fn close(&self) {
        self.shutdown().await;
    }
}

#[async_trait]
impl QueryStore for Store {
    async fn query_insert(
        &self,
        query: NewQuery,
        now: Timestamp,
    ) -> Result<SubmitQueryAck, StoreError> {
        let ack = self
            .write(Box::new(move |c| Box::pin(queries::query_insert(c, query, now))))
            .await?;
        if ack.created {
            self.notify_queries(1);
        }
        Ok(ack)
    }

    async fn query_lease_next(
        &self,
        req: QueryLeaseRequest,
        now: Timestamp,
    ) -> Result<Option<QueryGrant>, StoreError> {
        self.write_lease(Box::new(move |c| Box::pin(queries::query_lease_next(c, req, now))))
            .await
    }

    async fn query_leasable_exists(
        &self,
        site: Option<&str>,
        created_after: Timestamp,
    ) -> Result<bool, StoreError> {
        bounded(queries::query_leasable_exists(self.read_pool(), site, created_after)).await
    }

    async fn query_record_result(
        &self,
        rec: QueryResultRecord,
        now: Timestamp,
    ) -> Result<QueryResultAck, StoreError> {
        self.write(Box::new(move |c| Box::pin(queries::query_record_result(c, rec, now))))
            .await
    }

    async fn query_requeue_expired_leases(
        &self,
        now: Timestamp,
    ) -> Result<Vec<LapsedQuery>, StoreError> {
        let lapsed = self
            .write(Box::new(move |c| Box::pin(queries::query_requeue_expired_leases(c, now))))
            .await?;
        self.notify_queries(lapsed.iter().filter(|q| q.status == QueryStatus::Queued).count());
        Ok(lapsed)
    }

    async fn query_mark_expired(
        &self,
        created_before: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<QueryId>, StoreError> {
        self.write(Box::new(move |c| Box::pin(queries::query_mark_expired(c, created_before, now))))
            .await
    }

    async fn query_delete_terminal_before(
        &self,
        finished_before: Timestamp,
    ) -> Result<u64, StoreError> {
        self.write(Box::new(move |c| Box::pin(queries::query_delete_terminal_before(c, finished_before))))
            .await
    }

    async fn query_get(&self, query_id: &QueryId) -> Result<Option<QueryView>, StoreError> {
        bounded(queries::query_get(self.read_pool(), query_id)).await
    }

    async fn query_list(&self, filter: QueryFilter) -> Result<Page<QuerySummary>, StoreError> {
        bounded(queries::query_list(self.read_pool(), filter)).await
    }

    async fn query_seek(
        &self,
        status: Option<QueryStatus>,
        kind: Option<QueryKind>,
        seek: Seek,
        limit: i64,
    ) -> Result<SeekPage<QuerySummary>, StoreError> {
        bounded(queries::query_seek(self.read_pool(), status, kind, seek, limit)).await
    }
}
