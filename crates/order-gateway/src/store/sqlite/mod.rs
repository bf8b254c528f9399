//! The SQLite driver of [`OrderStore`]: WAL, `synchronous=FULL`, a busy timeout, one group-commit
//! writer ([`writer`]) and a pool of `query_only` read connections ([`reads`]). Migrations live in
//! `migrations/sqlite` and are embedded in the binary.
//!
//! - [`ops`]: the write transitions (run by the writer, one SAVEPOINT each).
//! - [`reads`]: read queries.
//! - [`rows`]: row decoding.
//! - `queries`: the account-query channel's transitions and reads (`account_queries`, §11);
//!   [`SqliteStore`] implements [`QueryStore`] with them, through the same writer.

mod ops;
mod queries;
mod reads;
pub(crate) mod rows;
pub mod writer;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rakuten_types::order::{
    LeaseGrant, Page, RenewAck, ReportAck, SubmitOrderAck, TaskDetail, TaskSummary,
};
use rakuten_types::{TaskId, Timestamp, WorkerId};
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{ConnectOptions, SqlSafeStr};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use self::writer::{WriteOp, WriteStats};
use super::queries::{
    LapsedQuery, NewQuery, QueryFilter, QueryLeaseRequest, QueryResultRecord, QueryStore,
};
use super::{
    HealthSnapshot, LeaseAttempt, LeaseRequest, NewReport, NewTask, OrderStore, ReclaimRequest,
    RenewRequest, StaleTask, StoreError, TaskFilter,
};
use crate::settings::LeaseScope;
use rakuten_types::QueryId;
use rakuten_types::query::{QueryGrant, QueryResultAck, QuerySummary, QueryView, SubmitQueryAck};

/// The migrations of `migrations/sqlite`, embedded at compile time. (Built by hand rather than
/// with `sqlx::migrate!`, which needs sqlx's `macros` feature and with it a second build of
/// sqlx and the bundled SQLite for the proc-macro; see DECISIONS D-gw-2.)
pub fn migrator() -> Migrator {
    Migrator::with_migrations(vec![
        Migration::new(
            1,
            "order tasks".into(),
            MigrationType::Simple,
            sqlx::AssertSqlSafe(include_str!(
                "../../../migrations/sqlite/0001_order_tasks.sql"
            ))
            .into_sql_str(),
            false,
        ),
        Migration::new(
            2,
            "account queries".into(),
            MigrationType::Simple,
            sqlx::AssertSqlSafe(include_str!(
                "../../../migrations/sqlite/0002_account_queries.sql"
            ))
            .into_sql_str(),
            false,
        ),
    ])
}

/// Queue depth in front of the writer; senders wait (backpressure) when it is full.
const WRITE_QUEUE: usize = 8192;
/// Read connections.
const READ_CONNECTIONS: u32 = 4;

/// The SQLite order store.
#[derive(Debug)]
pub struct SqliteStore {
    tx: Mutex<Option<mpsc::Sender<WriteOp>>>,
    writer: tokio::sync::Mutex<Option<JoinHandle<()>>>,
    read: SqlitePool,
    stats: Arc<WriteStats>,
}

impl std::fmt::Debug for WriteOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WriteOp")
    }
}

impl SqliteStore {
    /// Opens (creating if missing, with its parent directory) and migrates the database at
    /// `path`, and starts the writer task.
    ///
    /// # Errors
    /// [`StoreError::Database`] when the file cannot be opened or migrated.
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Database(Arc::new(e.into())))?;
        }
        let opts = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        let mut wconn = opts.connect().await?;
        migrator()
            .run(&mut wconn)
            .await
            .map_err(|e| StoreError::Database(Arc::new(e.into())))?;
        let read = SqlitePoolOptions::new()
            .max_connections(READ_CONNECTIONS)
            .connect_with(opts.pragma("query_only", "ON"))
            .await?;
        let (tx, rx) = mpsc::channel(WRITE_QUEUE);
        let stats = Arc::new(WriteStats::default());
        let writer = tokio::spawn(writer::run(wconn, rx, stats.clone()));
        Ok(SqliteStore {
            tx: Mutex::new(Some(tx)),
            writer: tokio::sync::Mutex::new(Some(writer)),
            read,
            stats,
        })
    }

    /// The writer's counters (commits and operations), for benchmarks.
    pub fn on_commit(&self, hook: writer::CommitHook) {
        let _ = self.stats.on_commit.set(hook);
    }

    /// `(commits, operations)` of the writer so far.
    pub fn write_stats(&self) -> (u64, u64) {
        self.stats.snapshot()
    }

    async fn write<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, StoreError>>) -> WriteOp,
    ) -> Result<T, StoreError> {
        let sender = self
            .tx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or(StoreError::Closed)?;
        let (reply, answer) = oneshot::channel();
        sender
            .send(make(reply))
            .await
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }
}

#[async_trait]
impl OrderStore for SqliteStore {
    async fn task_insert(
        &self,
        task: NewTask,
        now: Timestamp,
    ) -> Result<SubmitOrderAck, StoreError> {
        self.write(|r| WriteOp::Insert(task, now, r)).await
    }

    async fn task_lease(
        &self,
        req: LeaseRequest,
        now: Timestamp,
    ) -> Result<LeaseAttempt, StoreError> {
        self.write(|r| WriteOp::Lease(req, now, r)).await
    }

    async fn task_leasable_exists(
        &self,
        worker_id: &WorkerId,
        site: Option<&str>,
        scope: LeaseScope,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        reads::task_leasable_exists(&self.read, worker_id, site, scope, now).await
    }

    async fn task_renew(&self, req: RenewRequest, now: Timestamp) -> Result<RenewAck, StoreError> {
        self.write(|r| WriteOp::Renew(req, now, r)).await
    }

    async fn task_report(
        &self,
        report: NewReport,
        now: Timestamp,
    ) -> Result<ReportAck, StoreError> {
        self.write(|r| WriteOp::Report(report, now, r)).await
    }

    async fn task_reclaim(
        &self,
        req: ReclaimRequest,
        now: Timestamp,
    ) -> Result<LeaseGrant, StoreError> {
        self.write(|r| WriteOp::Reclaim(req, now, r)).await
    }

    async fn task_mark_stale_expired(&self, now: Timestamp) -> Result<Vec<StaleTask>, StoreError> {
        self.write(|r| WriteOp::Sweep(now, r)).await
    }

    async fn task_get(&self, task_id: &TaskId) -> Result<Option<TaskDetail>, StoreError> {
        reads::task_get(&self.read, task_id).await
    }

    async fn task_list(&self, filter: TaskFilter) -> Result<Page<TaskSummary>, StoreError> {
        reads::task_list(&self.read, filter).await
    }

    async fn health_snapshot(
        &self,
        queued_before: Timestamp,
    ) -> Result<HealthSnapshot, StoreError> {
        reads::health_snapshot(&self.read, queued_before).await
    }

    async fn store_counts(&self) -> Result<crate::store::observe::StoreCounts, StoreError> {
        crate::store::observe::store_counts(&self.read).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        if self.tx.lock().map_or(true, |t| t.is_none()) {
            return Err(StoreError::Closed);
        }
        crate::store::observe::ping(&self.read).await
    }

    async fn close(&self) {
        // Dropping our sender lets the writer drain what is queued, commit, and stop.
        drop(self.tx.lock().unwrap_or_else(|e| e.into_inner()).take());
        if let Some(handle) = self.writer.lock().await.take()
            && let Err(e) = handle.await
        {
            tracing::error!(error = %e, "the writer task failed");
        }
        self.read.close().await;
    }
}

#[async_trait]
impl QueryStore for SqliteStore {
    async fn query_insert(
        &self,
        query: NewQuery,
        now: Timestamp,
    ) -> Result<SubmitQueryAck, StoreError> {
        self.write(|r| WriteOp::QueryInsert(query, now, r)).await
    }

    async fn query_lease_next(
        &self,
        req: QueryLeaseRequest,
        now: Timestamp,
    ) -> Result<Option<QueryGrant>, StoreError> {
        self.write(|r| WriteOp::QueryLease(req, now, r)).await
    }

    async fn query_leasable_exists(
        &self,
        site: Option<&str>,
        created_after: Timestamp,
    ) -> Result<bool, StoreError> {
        queries::query_leasable_exists(&self.read, site, created_after).await
    }

    async fn query_record_result(
        &self,
        rec: QueryResultRecord,
        now: Timestamp,
    ) -> Result<QueryResultAck, StoreError> {
        self.write(|r| WriteOp::QueryResult(rec, now, r)).await
    }

    async fn query_requeue_expired_leases(
        &self,
        now: Timestamp,
    ) -> Result<Vec<LapsedQuery>, StoreError> {
        self.write(|r| WriteOp::QueryRequeue(now, r)).await
    }

    async fn query_mark_expired(
        &self,
        created_before: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<QueryId>, StoreError> {
        self.write(|r| WriteOp::QueryExpire(created_before, now, r))
            .await
    }

    async fn query_delete_terminal_before(
        &self,
        finished_before: Timestamp,
    ) -> Result<u64, StoreError> {
        self.write(|r| WriteOp::QueryPurge(finished_before, r))
            .await
    }

    async fn query_get(&self, query_id: &QueryId) -> Result<Option<QueryView>, StoreError> {
        queries::query_get(&self.read, query_id).await
    }

    async fn query_list(&self, filter: QueryFilter) -> Result<Page<QuerySummary>, StoreError> {
        queries::query_list(&self.read, filter).await
    }
}
