//! The one implementation ([`super`]) compiled for SQLite, run by the group-commit writer. The
//! worker's hot transitions (submit, lease, renew, report) run on the writer's own thread instead
//! (`store/sqlite_sync.rs`, D-gateway-hot-path-on-writer-thread).

use rakuten_types::Timestamp;
use rakuten_types::order::{RenewAck, ReportAck, SubmitOrderAck};

use crate::store::sqlite_sync;
use crate::store::{LeaseAttempt, LeaseRequest, NewReport, NewTask, RenewRequest, StoreError};

pub(crate) type Db = sqlx::Sqlite;
pub(crate) type Conn = sqlx::SqliteConnection;
pub(crate) type Pool = sqlx::SqlitePool;
pub(crate) type Store = crate::store::sqlite::SqliteStore;
super::one_implementation!();

/// Inserts or finds a task (§4.2) on the writer's thread.
pub(crate) async fn insert(
    store: &Store,
    task: NewTask,
    now: Timestamp,
) -> Result<SubmitOrderAck, StoreError> {
    store
        .write_sync(Box::new(move |db| sqlite_sync::task_insert(db, &task, now)))
        .await
}

/// Inserts a task and, when it was created, runs `waiter`'s lease attempt in the same operation
/// (D-handoff-in-submit-commit).
pub(crate) async fn insert_handing(
    store: &Store,
    task: NewTask,
    waiter: LeaseRequest,
    now: Timestamp,
) -> Result<(SubmitOrderAck, Option<LeaseAttempt>), StoreError> {
    store
        .write_sync(Box::new(move |db| {
            sqlite_sync::task_insert_handing(db, &task, &waiter, now)
        }))
        .await
}

/// One lease attempt (§4.3) on the writer's thread; skipped if its caller has gone before it runs.
pub(crate) async fn lease(
    store: &Store,
    req: LeaseRequest,
    now: Timestamp,
) -> Result<LeaseAttempt, StoreError> {
    store
        .write_sync_lease(Box::new(move |db| sqlite_sync::task_lease(db, &req, now)))
        .await
}

/// A renewal (§4.4) on the writer's thread.
pub(crate) async fn renew(
    store: &Store,
    req: RenewRequest,
    now: Timestamp,
) -> Result<RenewAck, StoreError> {
    store
        .write_sync(Box::new(move |db| sqlite_sync::task_renew(db, &req, now)))
        .await
}

/// A report (§4.5) on the writer's thread.
pub(crate) async fn report(
    store: &Store,
    report: NewReport,
    now: Timestamp,
) -> Result<ReportAck, StoreError> {
    store
        .write_sync(Box::new(move |db| {
            sqlite_sync::task_report(db, &report, now)
        }))
        .await
}
