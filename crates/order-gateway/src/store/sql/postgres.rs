//! The one implementation ([`super`]) compiled for PostgreSQL, one transaction per transition.

use rakuten_types::Timestamp;
use rakuten_types::order::{RenewAck, ReportAck, SubmitOrderAck};

use crate::store::{LeaseAttempt, LeaseRequest, NewReport, NewTask, RenewRequest, StoreError};

pub(crate) type Db = sqlx::Postgres;
pub(crate) type Conn = sqlx::PgConnection;
pub(crate) type Pool = sqlx::PgPool;
pub(crate) type Store = crate::store::postgres::PgStore;
super::one_implementation!();

/// Inserts or finds a task (§4.2), one transaction.
pub(crate) async fn insert(
    store: &Store,
    task: NewTask,
    now: Timestamp,
) -> Result<SubmitOrderAck, StoreError> {
    store
        .write(Box::new(move |c| {
            Box::pin(tasks::task_insert(c, task, now))
        }))
        .await
}

/// Inserts a task and, when it was created, runs `waiter`'s lease attempt in the same
/// transaction (D-handoff-in-submit-commit): the waiting long-poll is this instance's.
pub(crate) async fn insert_handing(
    store: &Store,
    task: NewTask,
    waiter: LeaseRequest,
    now: Timestamp,
) -> Result<(SubmitOrderAck, Option<LeaseAttempt>), StoreError> {
    store
        .write(Box::new(move |c| {
            Box::pin(async move {
                let ack = tasks::task_insert(c, task, now).await?;
                if !ack.created {
                    return Ok((ack, None));
                }
                // The attempt in a savepoint of its own: when it fails, only it is rolled back
                // and the submit still commits (the poll then runs an attempt of its own).
                sqlx::query("SAVEPOINT handoff").execute(&mut *c).await?;
                match tasks::task_lease(c, waiter, now).await {
                    Ok(attempt) => {
                        sqlx::query("RELEASE SAVEPOINT handoff")
                            .execute(&mut *c)
                            .await?;
                        Ok((ack, Some(attempt)))
                    }
                    Err(_) => {
                        sqlx::query("ROLLBACK TO SAVEPOINT handoff")
                            .execute(&mut *c)
                            .await?;
                        Ok((ack, None))
                    }
                }
            })
        }))
        .await
}

/// One lease attempt (§4.3), one transaction; not started if its caller has gone.
pub(crate) async fn lease(
    store: &Store,
    req: LeaseRequest,
    now: Timestamp,
) -> Result<LeaseAttempt, StoreError> {
    store
        .write_lease(Box::new(move |c| Box::pin(tasks::task_lease(c, req, now))))
        .await
}

/// A renewal (§4.4), one transaction.
pub(crate) async fn renew(
    store: &Store,
    req: RenewRequest,
    now: Timestamp,
) -> Result<RenewAck, StoreError> {
    store
        .write(Box::new(move |c| Box::pin(tasks::task_renew(c, req, now))))
        .await
}

/// A report (§4.5), one transaction.
pub(crate) async fn report(
    store: &Store,
    report: NewReport,
    now: Timestamp,
) -> Result<ReportAck, StoreError> {
    store
        .write(Box::new(move |c| {
            Box::pin(tasks::task_report(c, report, now))
        }))
        .await
}
