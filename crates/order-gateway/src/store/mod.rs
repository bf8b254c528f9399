//! Storage behind one narrow trait, [`OrderStore`], with verb-noun methods, and one SQL
//! implementation of it for both databases (D-one-sql-store-per-engine):
//!
//! - this file: the traits' contract, request types and [`StoreError`]; [`queries`]: the
//!   account-query channel's trait [`QueryStore`] and its types;
//! - `sql/`: the one implementation, one file per concern (`tasks.rs` transitions, `queries.rs`
//!   the account-query channel, `reads.rs`, `store.rs` the trait impls, `rows.rs` /
//!   `query_row.rs` the row decoders), compiled once per engine;
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
pub mod observe;
pub mod operator;
pub mod postgres;
pub mod queries;
pub(crate) mod sql;
pub mod sqlite;
mod sqlite_sync;

pub use operator::OperatorStore;
pub use queries::QueryStore;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use rakuten_types::order::{
    LeaseGrant, Page, RenewAck, ReportAck, SubmitOrderAck, TaskDetail, TaskSummary,
};
use rakuten_types::{
    OrderState, Outcome, TaskId, TaskStatus, Timestamp, WorkerId, task_status::InvalidTransition,
};

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

/// Filter and page of `GET /api/orders`.
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    /// Only this status.
    pub status: Option<TaskStatus>,
    /// Only this site.
    pub site: Option<String>,
    /// Page size (already clamped to 1..=200).
    pub limit: i64,
    /// Offset (≥ 0).
    pub offset: i64,
}

/// Rows a console count counts up to: past it a page shows "10,000+" instead of scanning on
/// (a count of the whole table is most of a page's time at volume).
pub const COUNT_CAP: i64 = 10_000;

/// A position in a console list's oldest-first order `(created_at, insertion order)` — the order
/// of the indexes `idx_tasks_pending`, `idx_tasks_created` and their account-query twins, so a
/// page starts with an index seek instead of scanning past an offset. Its text form
/// (`<created_at>_<n>`) is what the page's Newer/Older links carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeekCursor {
    created_at: String,
    ord: i64,
}

impl SeekCursor {
    /// The cursor of a row: its `created_at` text as stored and its insertion order.
    pub(crate) fn new(created_at: String, ord: i64) -> Self {
        Self { created_at, ord }
    }

    /// Parses a cursor from a link; `None` when it is not one (the page answers 400).
    pub fn parse(s: &str) -> Option<Self> {
        let (created_at, ord) = s.rsplit_once('_')?;
        Timestamp::parse(created_at).ok()?;
        Some(Self {
            created_at: created_at.to_owned(),
            ord: ord.parse().ok()?,
        })
    }

    /// The text form [`SeekCursor::parse`] reads.
    pub fn encode(&self) -> String {
        format!("{}_{}", self.created_at, self.ord)
    }

    pub(crate) fn created_at(&self) -> &str {
        &self.created_at
    }

    pub(crate) fn ord(&self) -> i64 {
        self.ord
    }
}

/// Where a console list page starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seek {
    /// The oldest rows.
    Oldest,
    /// The rows just after this position (the "newer" link).
    After(SeekCursor),
    /// The rows just before this position (the "older" link).
    Before(SeekCursor),
    /// The newest rows.
    Newest,
}

/// One keyset page of a console list, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct SeekPage<T> {
    /// This page's rows, oldest first, at most the page size.
    pub items: Vec<T>,
    /// The first and last row's positions (the Older and Newer links start there).
    pub edges: Option<(SeekCursor, SeekCursor)>,
    /// Whether a row precedes this page.
    pub older: bool,
    /// Whether a row follows this page.
    pub newer: bool,
    /// Rows matching the filter, counted up to [`COUNT_CAP`] + 1 (more than the cap: "10,000+").
    pub total: i64,
}

/// A worker's heartbeat.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerSeen {
    /// The worker.
    pub worker_id: String,
    /// Its last lease request (or valid renew/report).
    pub last_seen_at: Timestamp,
}

/// What `/health` and the alerts need, read in one go.
#[derive(Debug, Clone, Default)]
pub struct HealthSnapshot {
    /// Queued tasks.
    pub queued: i64,
    /// The leased/running tasks.
    pub active: Vec<TaskSummary>,
    /// Stale tasks, all of them counted.
    pub stale_count: i64,
    /// Stale tasks (each one is an alert; at most 100 listed, oldest first).
    pub stale: Vec<TaskSummary>,
    /// Queued tasks created before the threshold asked for (at most 100, oldest first).
    pub queued_too_long: Vec<TaskSummary>,
    /// Queued tasks created before the threshold, all of them counted.
    pub queued_too_long_count: i64,
    /// Workers, longest silent first (so every offline one comes first), at most
    /// [`HEALTH_WORKERS_LISTED`].
    pub workers: Vec<WorkerSeen>,
    /// Every worker, listed or not.
    pub workers_total: i64,
    /// Each instance's clock signal, most recently written first (at most
    /// [`CLOCK_SIGNALS_LISTED`]; [`crate::jobs::alerts::compute`] keeps the fresh ones).
    pub clocks: Vec<rakuten_types::order::InstanceClock>,
}

/// What an instance's sweeper saw of its clock, written to `clock_signals`.
#[derive(Debug, Clone, PartialEq)]
pub struct ClockSignal {
    /// The instance (`<hostname>/<8 hex digits>`, fixed at start-up).
    pub instance_id: String,
    /// The database's clock minus the instance's, milliseconds; `None` when there is nothing to
    /// compare (SQLite).
    pub offset_ms: Option<i64>,
    /// `|offset_ms|` is over the tolerance (the instance does not sweep).
    pub skewed: bool,
    /// A clock jump seen since the last signal, described; `None` keeps the last one recorded.
    pub jump: Option<String>,
}

/// `at` (on an instance's clock) moved by that instance's `offset_ms` (the database's clock
/// minus its own): the same instant on the shared clock.
pub fn on_shared_clock(at: Timestamp, offset_ms: Option<i64>) -> Timestamp {
    match offset_ms {
        Some(o) if o >= 0 => at.plus(Duration::from_millis(o.unsigned_abs())),
        Some(o) => at.minus(Duration::from_millis(o.unsigned_abs())),
        None => at,
    }
}

/// Whether an instance's clock signal was written within [`CLOCK_SIGNAL_FRESH`] of `now`
/// (compared on the shared clock, so an instance whose clock runs behind still counts as
/// running).
pub fn clock_signal_fresh(c: &rakuten_types::order::InstanceClock, now: Timestamp) -> bool {
    on_shared_clock(c.updated_at, c.offset_ms) >= now.minus(CLOCK_SIGNAL_FRESH)
}

/// A clock signal not written for this long is an instance that stopped (or lost the database):
/// it no longer raises `clock_skew` and `/health` no longer lists it.
pub const CLOCK_SIGNAL_FRESH: Duration = Duration::from_secs(300);

/// `clock_jump` is an event, not a state: its alert clears once the instance saw no new jump for
/// this long (D-clock-alerts).
pub const CLOCK_JUMP_QUIET: Duration = Duration::from_secs(600);

/// Rows of `clock_signals` not written for this long are deleted (every start-up has a new id).
pub const CLOCK_SIGNAL_RETENTION: Duration = Duration::from_secs(86_400);

/// Most clock signals `/health` and the alert sync read.
pub const CLOCK_SIGNALS_LISTED: i64 = 100;

/// Most workers a [`HealthSnapshot`] lists.
pub const HEALTH_WORKERS_LISTED: i64 = 1000;

/// Tasks per status and the oldest queued task (the console's overview).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatusCounts {
    /// Every status with its number of tasks (zero included), in [`TaskStatus::ALL`] order, each
    /// counted up to [`COUNT_CAP`] + 1.
    pub by_status: Vec<(TaskStatus, i64)>,
    /// When the oldest queued task was created.
    pub oldest_queued: Option<Timestamp>,
}

/// "resolved by operator NAME: REASON" ("cancelled by …" for a cancel): who ended a task and
/// why, as the console says it. `task_attention`'s query builds the same words in SQL.
pub fn ended_by(
    action: rakuten_types::alert::OperatorActionKind,
    actor: &str,
    reason: &str,
) -> String {
    let done = match action {
        rakuten_types::alert::OperatorActionKind::Cancel => "cancelled",
        _ => "resolved",
    };
    format!("{done} by operator {actor}: {reason}")
}

/// A task that needs a person (the console's "needs attention"), with its latest report's words.
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionTask {
    /// The task.
    pub task: TaskSummary,
    /// The latest report's free text.
    pub last_detail: Option<String>,
    /// The operator who ended it, for a task ended by a resolve or a cancel: [`ended_by`]'s
    /// words (the latest such action). A worker's last words no longer say why such a task
    /// failed.
    pub ended_by: Option<String>,
    /// The latest report's error code.
    pub last_error_code: Option<i32>,
    /// The latest site order number any report of the task carried.
    pub last_site_order_id: Option<String>,
}

/// Why a store operation failed. Cloneable because one failed group commit answers many callers.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// No such task (6001).
    #[error("task {0} not found")]
    TaskNotFound(TaskId),
    /// The caller does not hold a valid lease on the task (6002).
    #[error("lease invalid: {0}")]
    LeaseInvalid(String),
    /// The task's status does not allow the operation (6003).
    #[error("task is {status}: {reason}")]
    StateConflict {
        /// The current status.
        status: TaskStatus,
        /// What was refused.
        reason: String,
    },
    /// An idempotency key (`task_id`, `query_id`) was reused with a different body (409, code
    /// 1006). The message names the first field that differs.
    #[error("{0}")]
    IdempotencyMismatch(String),
    /// Another task holds the concurrency gate (409, code 1006).
    #[error("another task is active: {0}")]
    GateBusy(String),
    /// The state machine refused a transition (a bug or a race the SQL guard also caught).
    #[error(transparent)]
    Transition(#[from] InvalidTransition),
    /// No such account query, or it was purged after its retention (6005).
    #[error("query {0} not found")]
    QueryNotFound(rakuten_types::QueryId),
    /// The caller does not hold the query's current lease (6006): not the holder, redelivered to
    /// someone else, superseded token, lease lapsed, or the query is finished.
    #[error("query lease invalid: {0}")]
    QueryLeaseInvalid(String),
    /// The query state machine refused a transition.
    #[error(transparent)]
    QueryTransition(#[from] rakuten_types::query::InvalidQueryTransition),
    /// The request contradicts what the task's stored history says (422, 1003): an operator's
    /// `failed` without a state while the latest report is `paid`. The message says what to send.
    #[error("{0}")]
    Contradicts(String),
    /// A new task's `not_after` is not in the future (422, 1003). Refused only when the task
    /// would be created: an identical resubmit of an existing task answers that task.
    #[error(
        "not_after {not_after} is not in the future (now {now}); a task whose deadline has passed would never be leased"
    )]
    DeadlinePassed {
        /// The deadline sent.
        not_after: Timestamp,
        /// The gateway's clock.
        now: Timestamp,
    },
    /// No such worker (404, 1005).
    #[error("worker {0} not found")]
    WorkerNotFound(String),
    /// The worker is retired already (409, 1006): a second retire would move its date and add an
    /// audit row for nothing.
    #[error(
        "worker {worker_id} is already retired (since {since}); it returns when it polls again"
    )]
    WorkerRetired {
        /// The worker.
        worker_id: String,
        /// When it was retired (RFC 3339).
        since: String,
    },
    /// The store is shutting down (503).
    #[error("store is closed")]
    Closed,
    /// The database is locked or too slow: a lock, statement, busy or pool timeout, or no answer
    /// within [`STORE_OP_BOUND`] (503 with `Retry-After`). The operation may
    /// still commit later (an idempotent retry finds it).
    #[error("database busy: {0}")]
    Busy(String),
    /// The database cannot store anything now: a full disk, a read-only file, an I/O error, or
    /// PostgreSQL refusing or dropping the connection (503 with `Retry-After`, like
    /// [`StoreError::Busy`]; the SQLite writer counts it as writes failing, so `/readyz` turns
    /// unready). Nothing of the operation was stored.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// A stored row could not be decoded.
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// The database failed.
    #[error("database error")]
    Database(#[source] Arc<sqlx::Error>),
}

/// The first field where a resubmitted body differs from the stored one, as a dotted path under
/// `prefix` (`intent.quantity`), or `None` when they are equal. Both sides are compared as parsed
/// JSON, so key order and whitespace don't matter; `1` and `1.0` do (the intent is passed through
/// as sent).
pub(crate) fn json_difference(
    prefix: &str,
    stored: &serde_json::Value,
    sent: &serde_json::Value,
) -> Option<String> {
    use serde_json::Value;
    if stored == sent {
        return None;
    }
    if let (Value::Object(a), Value::Object(b)) = (stored, sent) {
        let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
        keys.sort();
        keys.dedup();
        for k in keys {
            if a.get(k) != b.get(k) {
                let name: String = k.chars().take(64).collect();
                return Some(format!("{prefix}.{name}"));
            }
        }
    }
    Some(prefix.to_owned())
}

/// The 409 for a reused idempotency key: `key` is `task_id`/`query_id`, `field` what differs.
pub(crate) fn idempotency_mismatch(key: &str, id: &str, field: &str) -> StoreError {
    StoreError::IdempotencyMismatch(format!(
        "{key} {id} already exists with a different {field}; reuse a {key} only for an identical \
         resubmit"
    ))
}

/// Checks a resubmitted order against the stored row (site, then intent). The intent is the same
/// when it is the same JSON value, numbers as written (D-intent-resubmit-same-value): key order,
/// spacing and string escapes may differ, and the first submit's text is the one kept.
pub(crate) fn check_same_task(
    task: &NewTask,
    stored_site: &str,
    stored_intent_json: &str,
) -> Result<(), StoreError> {
    use rakuten_types::intent::IntentJson;
    let id = task.task_id.as_str();
    if stored_site != task.site {
        return Err(idempotency_mismatch("task_id", id, "site"));
    }
    let text = |t: &str| {
        IntentJson::from_text(t.to_owned())
            .map_err(|e| StoreError::Corrupt(format!("intent_json: {e}")))
    };
    let (stored, sent) = (text(stored_intent_json)?, text(&task.intent_json)?);
    match stored.first_difference(&sent, "intent") {
        Some(f) => Err(idempotency_mismatch("task_id", id, &f)),
        None => Ok(()),
    }
}

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

/// Whether `e` is SQLite refusing to write a read-only file or folder (`SQLITE_READONLY` and its
/// extended codes, primary code 8): start-up reports it as read-only, naming the file and its
/// variable (D-exit-2-or-3).
pub fn is_read_only(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(d) => {
            d.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some()
                && d.code()
                    .and_then(|c| c.parse::<i32>().ok())
                    .is_some_and(|n| n & 0xff == 8)
        }
        _ => false,
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        // Waiting on a lock is not a fault of ours: SQLite SQLITE_BUSY/SQLITE_LOCKED (primary
        // codes 5/6), PostgreSQL lock_not_available (55P03) / query_canceled by
        // statement_timeout (57014), or no pooled connection free in time.
        let busy = match &e {
            sqlx::Error::PoolTimedOut => true,
            sqlx::Error::Database(d) => match d.code().as_deref() {
                Some("55P03" | "57014") => true,
                Some(c) => c.parse::<i32>().is_ok_and(|n| matches!(n & 0xff, 5 | 6)),
                None => false,
            },
            _ => false,
        };
        // Cannot store at all: SQLite READONLY/IOERR/FULL/CANTOPEN (8/10/13/14), PostgreSQL
        // connection exceptions (08…), insufficient resources (53…, a full disk), shutdown
        // (57P01–57P03), or the socket/file itself.
        let unavailable = match &e {
            sqlx::Error::Io(_) => true,
            sqlx::Error::Database(d) => match d.code().as_deref() {
                Some(c) if c.starts_with("08") || c.starts_with("53") => true,
                Some("57P01" | "57P02" | "57P03") => true,
                Some(c) => c
                    .parse::<i32>()
                    .is_ok_and(|n| matches!(n & 0xff, 8 | 10 | 13 | 14)),
                None => false,
            },
            _ => false,
        };
        if busy {
            StoreError::Busy(e.to_string())
        } else if unavailable {
            StoreError::Unavailable(e.to_string())
        } else {
            StoreError::Database(Arc::new(e))
        }
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
