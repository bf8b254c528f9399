//! [`StoreError`], why a store operation failed, and how a database error maps to it (busy,
//! unavailable, or a fault).

use std::sync::Arc;

use rakuten_types::{TaskId, TaskStatus, Timestamp, task_status::InvalidTransition};

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
    /// within [`STORE_OP_BOUND`](super::STORE_OP_BOUND) (503 with `Retry-After`). The operation may
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
