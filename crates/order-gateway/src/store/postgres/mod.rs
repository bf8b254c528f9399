//! The PostgreSQL driver of [`OrderStore`] and [`QueryStore`], for several gateway instances
//! sharing one queue (issue #7). Chosen by `RAKUTEN_GATEWAY_DB_URL=postgres://…`; SQLite stays the
//! default. Migrations live in `migrations/postgres` (same numbering as SQLite's) and are embedded.
//!
//! - `ops`: the order task transitions; `queries`: the account-query channel; `reads`: reads;
//!   `rows`: row decoding.
//! - Every write method is ONE transaction (READ COMMITTED) committed before it returns: the guards
//!   are conditional `UPDATE … RETURNING`, rows are locked or picked `FOR UPDATE SKIP LOCKED`, and
//!   the partial unique index `one_active_task` is the last word on the gate. No group-commit
//!   writer: PostgreSQL already batches WAL flushes of concurrent commits, and several instances
//!   write at once anyway.
//! - Wake-ups across instances: after a commit that may make something leasable, the store asks
//!   its notification pump for a `pg_notify(channel)`; the pump sends it outside any data
//!   transaction and coalesces requests that arrive while it is sending (a NOTIFY inside the data
//!   transaction would serialize every commit behind PostgreSQL's notify-queue lock, halving
//!   throughput; D-pg-8). [`PgStore::spawn_listener`] turns notifications into in-process
//!   [`LeaseNotifier`] wake-ups. The long-poll's periodic database check stays the fallback (a
//!   missed notification only delays).

mod ops;
mod queries;
mod reads;
mod rows;

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use rakuten_types::order::{
    LeaseGrant, Page, RenewAck, ReportAck, SubmitOrderAck, TaskDetail, TaskSummary,
};
use rakuten_types::query::{QueryGrant, QueryResultAck, QuerySummary, QueryView, SubmitQueryAck};
use rakuten_types::{QueryId, TaskId, Timestamp, WorkerId};
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};
use sqlx::{ConnectOptions, PgConnection, SqlSafeStr};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::queries::{
    LapsedQuery, NewQuery, QueryFilter, QueryLeaseRequest, QueryResultRecord, QueryStore,
};
use super::{
    HealthSnapshot, LeaseAttempt, LeaseRequest, NewReport, NewTask, OrderStore, ReclaimRequest,
    RenewRequest, StaleTask, StoreError, TaskFilter,
};
use crate::lease::notify::LeaseNotifier;
use crate::settings::LeaseScope;

/// `NOTIFY` channel of the order tasks: a task was submitted, the gate was freed, a stale task was
/// reclaimed for a worker.
pub const TASKS_CHANNEL: &str = "order_gateway_tasks";
/// `NOTIFY` channel of the account queries: a query was submitted or redelivered.
pub const QUERIES_CHANNEL: &str = "order_gateway_queries";

/// Connections per instance. Long-polls hold none while they wait, so a few suffice.
const POOL_CONNECTIONS: u32 = 10;

/// The migrations of `migrations/postgres`, embedded at compile time (see D-gw-2).
pub fn migrator() -> Migrator {
    Migrator::with_migrations(vec![
        Migration::new(
            1,
            "order tasks".into(),
            MigrationType::Simple,
            sqlx::AssertSqlSafe(include_str!(
                "../../../migrations/postgres/0001_order_tasks.sql"
            ))
            .into_sql_str(),
            false,
        ),
        Migration::new(
            2,
            "account queries".into(),
            MigrationType::Simple,
            sqlx::AssertSqlSafe(include_str!(
                "../../../migrations/postgres/0002_account_queries.sql"
            ))
            .into_sql_str(),
            false,
        ),
    ])
}

/// Sends `pg_notify` for the channels asked for since its last send, one statement each, outside
/// any data transaction. Requests arriving while it sends are coalesced into the next round.
#[derive(Debug, Default)]
struct NotifyPump {
    tasks: AtomicBool,
    queries: AtomicBool,
    closed: AtomicBool,
    wake: tokio::sync::Notify,
}

impl NotifyPump {
    fn request(&self, channel: &AtomicBool) {
        channel.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    async fn run(self: Arc<Self>, pool: PgPool) {
        loop {
            self.wake.notified().await;
            if self.closed.load(Ordering::Acquire) {
                return;
            }
            for (flag, channel) in [
                (&self.tasks, TASKS_CHANNEL),
                (&self.queries, QUERIES_CHANNEL),
            ] {
                if flag.swap(false, Ordering::AcqRel)
                    && let Err(e) = sqlx::query("SELECT pg_notify($1, '')")
                        .bind(channel)
                        .execute(&pool)
                        .await
                {
                    // Waiters still find the work through their periodic re-check.
                    tracing::warn!(error = %e, channel, "NOTIFY failed");
                }
            }
        }
    }
}

/// The PostgreSQL order and account-query store.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    options: PgConnectOptions,
    pump: Arc<NotifyPump>,
    /// The session holding (or trying for) the alert-leader advisory lock, and whether it holds it.
    leader: Arc<tokio::sync::Mutex<Option<(PgConnection, bool)>>>,
}

/// The alert-leader lock key: per schema, so deployments (and tests) in separate schemas of one
/// database elect separately.
const LEADER_LOCK: &str =
    "SELECT pg_try_advisory_lock(hashtext(current_schema() || '.order_gateway_alerts'))";

impl PgStore {
    /// Connects to `url` (`postgres://user@host:port/db`, optionally
    /// `?options=-c%20search_path%3D…`), runs the migrations (serialized between instances by
    /// sqlx's advisory lock) and opens the pool.
    ///
    /// # Errors
    /// [`StoreError::Database`] when PostgreSQL is unreachable or a migration fails.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let mut options = PgConnectOptions::from_str(url)?;
        // `application_name` from the URL is kept (operators tell instances apart by it).
        if options.get_application_name().is_none() {
            options = options.application_name("order-gateway");
        }
        let pool = PgPoolOptions::new()
            .max_connections(POOL_CONNECTIONS)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options.clone())
            .await?;
        migrator()
            .run(&pool)
            .await
            .map_err(|e| StoreError::Database(Arc::new(e.into())))?;
        let pump = Arc::new(NotifyPump::default());
        tokio::spawn(pump.clone().run(pool.clone()));
        Ok(PgStore {
            pool,
            options,
            pump,
            leader: Arc::default(),
        })
    }

    /// The pool (tests and benchmarks inspect the schema through it).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Starts the `LISTEN` task: notifications on [`TASKS_CHANNEL`] / [`QUERIES_CHANNEL`] wake this
    /// instance's order / query long-polls. On a lost connection it wakes both (a notification may
    /// have been missed), reconnects with a 1 s back-off, and listens again; until `shutdown`.
    pub fn spawn_listener(
        &self,
        tasks: LeaseNotifier,
        queries: LeaseNotifier,
        shutdown: CancellationToken,
    ) -> JoinHandle<()> {
        // The listener's session is named `<application_name>/listen` in `pg_stat_activity`.
        let name = format!(
            "{}/listen",
            self.options
                .get_application_name()
                .unwrap_or("order-gateway")
        );
        let options = self.options.clone().application_name(&name);
        tokio::spawn(async move {
            loop {
                let connected = async {
                    let pool = PgPoolOptions::new()
                        .max_connections(1)
                        .max_lifetime(None)
                        .idle_timeout(None)
                        .connect_with(options.clone())
                        .await?;
                    let mut l = PgListener::connect_with(&pool).await?;
                    l.listen_all([TASKS_CHANNEL, QUERIES_CHANNEL]).await?;
                    Ok::<_, sqlx::Error>(l)
                };
                let mut listener = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    l = connected => match l {
                        Ok(l) => l,
                        Err(e) => {
                            tracing::warn!(error = %e, "LISTEN connection failed; retrying in 1 s");
                            tokio::select! {
                                _ = shutdown.cancelled() => return,
                                _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                            }
                        }
                    },
                };
                // Anything committed while we were not listening is found by this wake-up.
                tasks.notify_leasable();
                queries.notify_leasable();
                loop {
                    let next = tokio::select! {
                        _ = shutdown.cancelled() => return,
                        n = listener.try_recv() => n,
                    };
                    match next {
                        Ok(Some(n)) if n.channel() == TASKS_CHANNEL => tasks.notify_leasable(),
                        Ok(Some(n)) if n.channel() == QUERIES_CHANNEL => queries.notify_leasable(),
                        Ok(Some(_)) => {}
                        Ok(None) => {
                            // Connection lost; the next try_recv reconnects and re-LISTENs.
                            tracing::warn!("LISTEN connection lost; reconnecting");
                            tasks.notify_leasable();
                            queries.notify_leasable();
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "LISTEN failed; reconnecting in 1 s");
                            tokio::select! {
                                _ = shutdown.cancelled() => return,
                                _ = tokio::time::sleep(Duration::from_secs(1)) => break,
                            }
                        }
                    }
                }
            }
        })
    }

    /// Runs one transition in its own transaction: committed when it succeeds, rolled back when
    /// it fails. The caller is answered only after the commit.
    async fn write<'a, T, F>(&'a self, op: F) -> Result<T, StoreError>
    where
        F: for<'c> FnOnce(
                &'c mut PgConnection,
            ) -> futures::future::BoxFuture<'c, Result<T, StoreError>>
            + Send
            + 'a,
        T: Send,
    {
        let mut tx = self.pool.begin().await?;
        match op(&mut tx).await {
            Ok(v) => {
                tx.commit().await?;
                Ok(v)
            }
            Err(e) => {
                let _ = tx.rollback().await;
                Err(e)
            }
        }
    }
}

#[async_trait]
impl OrderStore for PgStore {
    async fn task_insert(
        &self,
        task: NewTask,
        now: Timestamp,
    ) -> Result<SubmitOrderAck, StoreError> {
        let ack = self
            .write(|c| Box::pin(ops::task_insert(c, task, now)))
            .await?;
        if ack.created {
            self.pump.request(&self.pump.tasks);
        }
        Ok(ack)
    }

    async fn task_lease(
        &self,
        req: LeaseRequest,
        now: Timestamp,
    ) -> Result<LeaseAttempt, StoreError> {
        self.write(|c| Box::pin(ops::task_lease(c, req, now))).await
    }

    async fn task_leasable_exists(
        &self,
        worker_id: &WorkerId,
        site: Option<&str>,
        scope: LeaseScope,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        reads::task_leasable_exists(&self.pool, worker_id, site, scope, now).await
    }

    async fn task_renew(&self, req: RenewRequest, now: Timestamp) -> Result<RenewAck, StoreError> {
        self.write(|c| Box::pin(ops::task_renew(c, req, now))).await
    }

    async fn task_report(
        &self,
        report: NewReport,
        now: Timestamp,
    ) -> Result<ReportAck, StoreError> {
        let ack = self
            .write(|c| Box::pin(ops::task_report(c, report, now)))
            .await?;
        if ack.status.is_terminal() {
            // The gate may be free again.
            self.pump.request(&self.pump.tasks);
        }
        Ok(ack)
    }

    async fn task_reclaim(
        &self,
        req: ReclaimRequest,
        now: Timestamp,
    ) -> Result<LeaseGrant, StoreError> {
        let grant = self
            .write(|c| Box::pin(ops::task_reclaim(c, req, now)))
            .await?;
        // The named worker may be long-polling on another instance.
        self.pump.request(&self.pump.tasks);
        Ok(grant)
    }

    async fn task_mark_stale_expired(&self, now: Timestamp) -> Result<Vec<StaleTask>, StoreError> {
        let staled = self
            .write(|c| Box::pin(ops::task_mark_stale_expired(c, now)))
            .await?;
        if !staled.is_empty() {
            self.pump.request(&self.pump.tasks);
        }
        Ok(staled)
    }

    async fn task_get(&self, task_id: &TaskId) -> Result<Option<TaskDetail>, StoreError> {
        reads::task_get(&self.pool, task_id).await
    }

    async fn task_list(&self, filter: TaskFilter) -> Result<Page<TaskSummary>, StoreError> {
        reads::task_list(&self.pool, filter).await
    }

    async fn health_snapshot(
        &self,
        queued_before: Timestamp,
    ) -> Result<HealthSnapshot, StoreError> {
        reads::health_snapshot(&self.pool, queued_before).await
    }

    async fn alerts_leader(&self) -> Result<bool, StoreError> {
        let mut slot = self.leader.lock().await;
        if let Some((conn, held)) = slot.as_mut() {
            let alive = sqlx::query("SELECT 1").execute(&mut *conn).await.is_ok();
            if alive && *held {
                return Ok(true);
            }
            if alive {
                let got: bool = sqlx::query_scalar(LEADER_LOCK)
                    .fetch_one(&mut *conn)
                    .await?;
                *held = got;
                return Ok(got);
            }
            *slot = None;
        }
        let mut conn = self.options.connect().await?;
        let got: bool = sqlx::query_scalar(LEADER_LOCK).fetch_one(&mut conn).await?;
        *slot = Some((conn, got));
        Ok(got)
    }

    async fn store_counts(&self) -> Result<crate::store::observe::StoreCounts, StoreError> {
        crate::store::observe::store_counts(&self.pool).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        crate::store::observe::ping(&self.pool).await
    }

    async fn close(&self) {
        self.pump.closed.store(true, Ordering::Release);
        self.pump.wake.notify_one();
        // Releases the alert-leader lock with its session.
        if let Some((conn, _)) = self.leader.lock().await.take() {
            let _ = sqlx::Connection::close(conn).await;
        }
        // Every acknowledged write is already committed; closing waits for in-flight ones.
        self.pool.close().await;
    }
}

#[async_trait]
impl QueryStore for PgStore {
    async fn query_insert(
        &self,
        query: NewQuery,
        now: Timestamp,
    ) -> Result<SubmitQueryAck, StoreError> {
        let ack = self
            .write(|c| Box::pin(queries::query_insert(c, query, now)))
            .await?;
        if ack.created {
            self.pump.request(&self.pump.queries);
        }
        Ok(ack)
    }

    async fn query_lease_next(
        &self,
        req: QueryLeaseRequest,
        now: Timestamp,
    ) -> Result<Option<QueryGrant>, StoreError> {
        self.write(|c| Box::pin(queries::query_lease_next(c, req, now)))
            .await
    }

    async fn query_leasable_exists(
        &self,
        site: Option<&str>,
        created_after: Timestamp,
    ) -> Result<bool, StoreError> {
        queries::query_leasable_exists(&self.pool, site, created_after).await
    }

    async fn query_record_result(
        &self,
        rec: QueryResultRecord,
        now: Timestamp,
    ) -> Result<QueryResultAck, StoreError> {
        self.write(|c| Box::pin(queries::query_record_result(c, rec, now)))
            .await
    }

    async fn query_requeue_expired_leases(
        &self,
        now: Timestamp,
    ) -> Result<Vec<LapsedQuery>, StoreError> {
        let lapsed = self
            .write(|c| Box::pin(queries::query_requeue_expired_leases(c, now)))
            .await?;
        if lapsed
            .iter()
            .any(|q| q.status == rakuten_types::query::QueryStatus::Queued)
        {
            self.pump.request(&self.pump.queries);
        }
        Ok(lapsed)
    }

    async fn query_mark_expired(
        &self,
        created_before: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<QueryId>, StoreError> {
        self.write(|c| Box::pin(queries::query_mark_expired(c, created_before, now)))
            .await
    }

    async fn query_delete_terminal_before(
        &self,
        finished_before: Timestamp,
    ) -> Result<u64, StoreError> {
        self.write(|c| Box::pin(queries::query_delete_terminal_before(c, finished_before)))
            .await
    }

    async fn query_get(&self, query_id: &QueryId) -> Result<Option<QueryView>, StoreError> {
        queries::query_get(&self.pool, query_id).await
    }

    async fn query_list(&self, filter: QueryFilter) -> Result<Page<QuerySummary>, StoreError> {
        queries::query_list(&self.pool, filter).await
    }
}
