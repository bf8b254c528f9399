//! Storage behind one narrow trait, [`OrderStore`], with verb-noun methods, and one SQL
//! implementation of it for both databases (D-one-sql-store-per-engine):
//!
//! - this file: the [`OrderStore`] contract, the bound of one operation ([`STORE_OP_BOUND`]) and
//!   the embedded migrator; `error.rs`: [`StoreError`] and how a database error maps to it;
//!   [`types`]: what the traits take and answer, one file per subject (`task.rs` the transitions'
//!   requests and answers, `page.rs` filters and keyset pages, `health.rs` `/health`, clock
//!   signals and the console's overview), re-exported here; `resubmit.rs`: the idempotency check
//!   of a resubmitted order or query; [`queries`]: the account-query channel's trait
//!   [`QueryStore`] and its types; [`operator`]: the operator's-loop trait [`OperatorStore`] and
//!   its types;
//! - `sql/`: the one implementation, one file per concern (`tasks/` the transitions, one file per
//!   transition family, `queries.rs` the account-query channel, `reads.rs`, `store.rs` the trait
//!   impls, `rows.rs` / `query_row.rs` the row decoders), compiled once per engine;
//! - `dialect.rs`: the few SQL fragments the engines force apart, each with its reason;
//! - [`sqlite`]: the embedded default engine (opens the file, read pool, and starts its
//!   group-commit writer from the shared `sqlite_writer` crate, D-sqlite-writer-group-commit);
//!   `sqlite_sync.rs`: its submit, lease, renew and report, run on the writer's own thread
//!   (D-gateway-hot-path-on-writer-thread); [`postgres`]: several instances sharing one queue (pool,
//!   `LISTEN/NOTIFY` wake-ups, the alert-leader advisory lock).
//!
//! Migrations stay per engine (`migrations/sqlite`, `migrations/postgres`, same numbering): the
//! column types differ.
//!
//! Contract every driver keeps (spec §3–§5):
//! - every transition is a conditional update that repeats [`TaskStatus::transition`]'s guard in
//!   SQL; a lost race is a typed [`StoreError`], never a silent no-op;
//! - at most one `leased`/`running` task per gate key, enforced by the schema;
//! - nothing ever returns to `queued`; `stale` is reached only through lease expiry;
//! - a write is acknowledged (the method returns) only after it is durably committed;
//! - `now` is always the caller's (the injected clock), never the database's.
//!
//! The account-query channel (§11) has its own narrow trait, [`queries::QueryStore`], with its own
//! contract (redelivery instead of `stale`); both engines implement both traits, and SQLite runs
//! both through the same group-commit writer.

mod dialect;
mod error;
pub mod observe;
pub mod operator;
pub mod postgres;
pub mod queries;
mod resubmit;
pub(crate) mod sql;
pub mod sqlite;
mod sqlite_sync;
pub mod types;

pub use error::{StoreError, is_read_only};
pub use operator::OperatorStore;
pub use queries::QueryStore;
pub(crate) use resubmit::{check_same_task, idempotency_mismatch, json_difference};
pub use types::health::*;
pub use types::page::*;
pub use types::task::*;

use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use rakuten_types::order::{
    LeaseGrant, Page, RenewAck, ReportAck, SubmitOrderAck, TaskDetail, TaskSummary,
};
use rakuten_types::{TaskId, TaskStatus, Timestamp, WorkerId};

use crate::settings::LeaseScope;

/// One transition of the SQL implementation, to run on an engine's write connection `C` (inside
/// the transaction or savepoint the engine opens for it).
pub(crate) type Transition<C, T> =
    Box<dyn for<'c> FnOnce(&'c mut C) -> BoxFuture<'c, Result<T, StoreError>> + Send>;

/// A migrator from `(version, description, sql)` triples embedded with `include_str!`. A file
/// whose first line is `-- no-transaction` runs outside a transaction (it opens its own; SQLite
/// table rebuilds must switch foreign keys off first, which a transaction ignores).
/// Each migration in `released` keeps the checksum of its text as released (D-released-migrations-pinned).
pub(crate) fn embedded_migrator(
    files: &[(i64, &str, &'static str)],
    released: &[rakuten_cli::migrations::Released],
) -> sqlx::migrate::Migrator {
    use sqlx::SqlSafeStr;
    use sqlx::migrate::{Migration, MigrationType, Migrator};
    Migrator::with_migrations(rakuten_cli::migrations::pin_released(
        files
            .iter()
            .map(|&(version, description, sql)| {
                Migration::new(
                    version,
                    description.to_owned().into(),
                    MigrationType::Simple,
                    sqlx::AssertSqlSafe(sql).into_sql_str(),
                    sql.starts_with("-- no-transaction"),
                )
            })
            .collect(),
        released,
    ))
}

/// The longest a store operation may take before its caller gets [`StoreError::Busy`]: a request
/// is answered within its own bound (a long-poll: its wait plus this) whatever holds the database.
pub const STORE_OP_BOUND: Duration = Duration::from_secs(3);

/// Runs one store operation within [`STORE_OP_BOUND`].
pub(crate) async fn bounded<T>(
    op: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(STORE_OP_BOUND, op).await {
        Ok(r) => r,
        Err(_) => Err(StoreError::Busy(format!(
            "no answer from the database within {} s",
            STORE_OP_BOUND.as_secs()
        ))),
    }
}

/// The order task store. Every write method is one durable transition (group-committed by the
/// SQLite driver); reads see only committed data.
#[async_trait]
pub trait OrderStore: Send + Sync + std::fmt::Debug + 'static {
    /// Inserts a queued task, or returns the existing one with `created: false` (§4.2).
    async fn task_insert(
        &self,
        task: NewTask,
        now: Timestamp,
    ) -> Result<SubmitOrderAck, StoreError>;

    /// [`Self::task_insert`], and — only when it created the task — the lease attempt
    /// [`Self::task_lease`] would run for `waiter` (a long-poll waiting in this process), in the
    /// same transaction: the task and its grant commit together, so the submit's answer and the
    /// grant both leave after one commit (D-handoff-in-submit-commit). The attempt's answer is
    /// `None` when the task existed already or the attempt failed (rolled back alone; the submit
    /// still commits). By default an engine inserts only and answers `None`.
    async fn task_insert_handing(
        &self,
        task: NewTask,
        waiter: LeaseRequest,
        now: Timestamp,
    ) -> Result<(SubmitOrderAck, Option<LeaseAttempt>), StoreError> {
        let _ = waiter;
        Ok((self.task_insert(task, now).await?, None))
    }

    /// One lease attempt (§4.3): refreshes the worker's heartbeat; re-grants the worker's own
    /// unexpired active task if it has one (`lease_count + 1`, new token); else claims the oldest
    /// queued task when the gate is free.
    async fn task_lease(
        &self,
        req: LeaseRequest,
        now: Timestamp,
    ) -> Result<LeaseAttempt, StoreError>;

    /// Whether a lease attempt by this worker could grant something now (a cheap read used by the
    /// long-poll's periodic fallback check).
    async fn task_leasable_exists(
        &self,
        worker_id: &WorkerId,
        site: Option<&str>,
        scope: LeaseScope,
        now: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Extends the holder's unexpired lease (§4.4); otherwise 6002.
    async fn task_renew(&self, req: RenewRequest, now: Timestamp) -> Result<RenewAck, StoreError>;

    /// Records a report (§4.5): first report leased → running, terminal reports end the task,
    /// `(task_id, state)` upserts, post-terminal reports of the last holder are appended.
    async fn task_report(&self, report: NewReport, now: Timestamp)
    -> Result<ReportAck, StoreError>;

    /// Leases a stale task to a named worker (§5).
    async fn task_reclaim(
        &self,
        req: ReclaimRequest,
        now: Timestamp,
    ) -> Result<LeaseGrant, StoreError>;

    /// Turns every active task whose lease lapsed at or before `now` into `stale` (§5).
    async fn task_mark_stale_expired(&self, now: Timestamp) -> Result<Vec<StaleTask>, StoreError>;

    /// Ends every queued task whose `not_after` is before `now` as `expired`
    /// (D-task-not-after-expired); a leased or running task is never touched.
    async fn task_expire_past_not_after(
        &self,
        now: Timestamp,
    ) -> Result<Vec<ExpiredTask>, StoreError>;

    /// Shortens every active lease that expires after `limit` to `limit` (a
    /// grant stamped while the clock ran ahead must not outlive `now + TTL` by more than a small
    /// margin once the clock is corrected). Returns the tasks clamped.
    async fn task_clamp_leases(
        &self,
        limit: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<TaskId>, StoreError>;

    /// Records what this instance's sweeper saw of its clock (`clock_signals`, one row per
    /// instance), the cause the alert sync reads for `clock_skew` and `clock_jump`; rows unwritten
    /// for [`CLOCK_SIGNAL_RETENTION`] are dropped in the same transaction.
    async fn clock_signal_record(
        &self,
        signal: ClockSignal,
        now: Timestamp,
    ) -> Result<(), StoreError>;

    /// How far the database's clock is ahead of `now`, milliseconds, when several instances share
    /// it (PostgreSQL); `None` for an embedded database, whose only clock is ours.
    async fn clock_offset_ms(&self, now: Timestamp) -> Result<Option<i64>, StoreError> {
        let _ = now;
        Ok(None)
    }

    /// Whether wake-ups from other instances arrive: false while a PostgreSQL instance's
    /// `LISTEN` session is not (yet, or any more) listening, when they arrive only at the
    /// long-poll's periodic check; always true for an embedded database (one instance).
    fn wakeups_listening(&self) -> bool {
        true
    }

    /// A task with its latest state and full history.
    async fn task_get(&self, task_id: &TaskId) -> Result<Option<TaskDetail>, StoreError>;

    /// A filtered page of tasks, oldest first.
    async fn task_list(&self, filter: TaskFilter) -> Result<Page<TaskSummary>, StoreError>;

    /// The console's task list: a filtered keyset page (at most `limit` rows) with a capped total.
    async fn task_seek(
        &self,
        status: Option<TaskStatus>,
        site: Option<String>,
        seek: Seek,
        limit: i64,
    ) -> Result<SeekPage<TaskSummary>, StoreError>;

    /// The leased and running tasks, oldest first, at most 100 (the console overview's "Active
    /// leases"; `health_snapshot` would also count every queued and stale task).
    async fn task_active_leases(&self) -> Result<Vec<TaskSummary>, StoreError>;

    /// Tasks per status and the oldest queued task, from one snapshot.
    async fn task_status_counts(&self) -> Result<StatusCounts, StoreError>;

    /// Every `stale` and `needs_human` task and the `failed` ones changed at or after
    /// `failed_since`, oldest first, at most `limit`, each with its latest report's detail and
    /// error code.
    async fn task_attention(
        &self,
        failed_since: Timestamp,
        limit: i64,
    ) -> Result<Vec<AttentionTask>, StoreError>;

    /// Counts and lists for `/health`; `queued_before` selects the queued-too-long tasks.
    async fn health_snapshot(&self, queued_before: Timestamp)
    -> Result<HealthSnapshot, StoreError>;

    /// Whether this instance logs the alerts this tick. Several instances sharing one database
    /// elect one (PostgreSQL: a session advisory lock, taken over when its holder dies), so each
    /// alert is logged once, not once per instance. `/health` answers on every instance anyway.
    async fn alerts_leader(&self) -> Result<bool, StoreError> {
        Ok(true)
    }

    /// Open task and query counts and worker heartbeats for `/metrics` (bounded reads,
    /// [`observe`]).
    async fn store_counts(&self) -> Result<observe::StoreCounts, StoreError>;

    /// Whether the database answers (`/readyz`); a closed store is [`StoreError::Closed`].
    async fn ping(&self) -> Result<(), StoreError>;

    /// Finishes the writes already accepted and closes the database.
    async fn close(&self);
}

#[cfg(test)]
mod released_tests {
    #[test]
    fn released_migrations_keep_their_statements() {
        for (migrator, released) in [
            (super::sqlite::migrator(), super::sqlite::RELEASED),
            (super::postgres::migrator(), super::postgres::RELEASED),
        ] {
            let migrations: Vec<_> = migrator.iter().cloned().collect();
            rakuten_cli::migrations::check_released(&migrations, released).unwrap();
        }
    }
}
