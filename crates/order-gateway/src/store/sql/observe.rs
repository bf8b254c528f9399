//! The `/metrics` counts and the `/readyz` ping ([`crate::store::observe`]), on the engine's read
//! pool. The statements have no parameters; the status lists are those of
//! [`OPEN_TASK_STATUSES`](crate::store::observe::OPEN_TASK_STATUSES) and
//! [`OPEN_QUERY_STATUSES`](crate::store::observe::OPEN_QUERY_STATUSES).

use super::Pool;
use crate::store::observe::{MAX_WORKERS, StatusCount, StoreCounts};
use crate::store::sql::rows::{decode_ts, ts};
use crate::store::{StoreError, WorkerSeen};

const TASK_COUNTS: &str = "SELECT status, COUNT(*), MIN(created_at), MIN(updated_at) FROM tasks \
     WHERE status IN ('queued','leased','running','stale','needs_human') GROUP BY status";
const QUERY_COUNTS: &str = "SELECT status, COUNT(*) FROM account_queries \
     WHERE status IN ('queued','leased') GROUP BY status";
const WORKERS: &str =
    "SELECT worker_id, last_seen_at FROM workers ORDER BY last_seen_at DESC LIMIT $1";

/// The counts of [`StoreCounts`].
pub(crate) async fn store_counts(pool: &Pool) -> Result<StoreCounts, StoreError> {
    let tasks = sqlx::query_as::<_, (String, i64, Option<String>, Option<String>)>(TASK_COUNTS)
        .fetch_all(pool)
        .await?
        .into_iter()
        .map(|(status, count, created, updated)| {
            Ok(StatusCount {
                status,
                count,
                oldest_created: decode_ts(created)?,
                oldest_updated: decode_ts(updated)?,
            })
        })
        .collect::<Result<_, StoreError>>()?;
    let queries = sqlx::query_as::<_, (String, i64)>(QUERY_COUNTS)
        .fetch_all(pool)
        .await?;
    let workers = sqlx::query_as::<_, (String, String)>(WORKERS)
        .bind(MAX_WORKERS)
        .fetch_all(pool)
        .await?
        .into_iter()
        .map(|(worker_id, seen)| {
            Ok(WorkerSeen {
                worker_id,
                last_seen_at: ts(&seen)?,
            })
        })
        .collect::<Result<_, StoreError>>()?;
    Ok(StoreCounts {
        tasks,
        queries,
        workers,
    })
}

/// `SELECT 1`: the database answers.
pub(crate) async fn ping(pool: &Pool) -> Result<(), StoreError> {
    sqlx::query_as::<_, (i32,)>("SELECT 1")
        .fetch_one(pool)
        .await
        .map(drop)
        .map_err(StoreError::from)
}
