//! Reads for `/metrics` and `/readyz` (issue #10 items 7 and 8), written once for both drivers:
//! the SQL has no parameters and both schemas store timestamps as fixed-width UTC text, so the
//! same statements and decoders serve SQLite and PostgreSQL. Each read is bounded: the task and
//! query counts visit only rows of the open statuses through the `(status, created_at)` indexes
//! (finished rows, the bulk of a long-lived queue, are never scanned), the worker list is capped.

use rakuten_types::Timestamp;
use sqlx::{Database, Executor, FromRow, IntoArguments, Pool};

use super::{StoreError, WorkerSeen};

/// Task statuses counted at scrape time (the terminal `succeeded` / `failed` are counted by
/// in-process counters instead: counting them would scan the whole history).
pub const OPEN_TASK_STATUSES: [&str; 5] = ["queued", "leased", "running", "stale", "needs_human"];
/// Account-query statuses counted at scrape time (the channel's depth).
pub const OPEN_QUERY_STATUSES: [&str; 2] = ["queued", "leased"];
/// Most workers listed.
pub const MAX_WORKERS: i64 = 1000;

const TASK_COUNTS: &str = "SELECT status, COUNT(*), MIN(created_at), MIN(updated_at) FROM tasks \
     WHERE status IN ('queued','leased','running','stale','needs_human') GROUP BY status";
const QUERY_COUNTS: &str = "SELECT status, COUNT(*) FROM account_queries \
     WHERE status IN ('queued','leased') GROUP BY status";
const WORKERS: &str =
    "SELECT worker_id, last_seen_at FROM workers ORDER BY last_seen_at DESC LIMIT 1000";

/// How many tasks have one open status, and the oldest of them.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusCount {
    /// The status.
    pub status: String,
    /// Tasks in it.
    pub count: i64,
    /// The oldest `created_at` among them.
    pub oldest_created: Option<Timestamp>,
    /// The oldest `updated_at` (last change) among them.
    pub oldest_updated: Option<Timestamp>,
}

/// Everything `/metrics` reads from the database, in one snapshot per scrape.
#[derive(Debug, Clone, Default)]
pub struct StoreCounts {
    /// Open task statuses present (absent = 0).
    pub tasks: Vec<StatusCount>,
    /// Open account-query statuses present and their counts (absent = 0).
    pub queries: Vec<(String, i64)>,
    /// Workers, most recently seen first, at most [`MAX_WORKERS`].
    pub workers: Vec<WorkerSeen>,
}

fn ts(s: Option<String>) -> Result<Option<Timestamp>, StoreError> {
    s.map(|s| {
        Timestamp::parse(&s).map_err(|e| StoreError::Corrupt(format!("timestamp {s:?}: {e}")))
    })
    .transpose()
}

async fn rows<DB, T>(pool: &Pool<DB>, sql: &'static str) -> Result<Vec<T>, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    T: for<'r> FromRow<'r, DB::Row> + Send + Unpin,
{
    Ok(sqlx::query_as::<DB, T>(sql).fetch_all(pool).await?)
}

/// The counts of [`StoreCounts`] from `pool` (either driver's read pool).
pub(crate) async fn store_counts<DB>(pool: &Pool<DB>) -> Result<StoreCounts, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'r> (String, i64, Option<String>, Option<String>): FromRow<'r, DB::Row>,
    for<'r> (String, i64): FromRow<'r, DB::Row>,
    for<'r> (String, String): FromRow<'r, DB::Row>,
{
    let tasks = rows::<DB, (String, i64, Option<String>, Option<String>)>(pool, TASK_COUNTS)
        .await?
        .into_iter()
        .map(|(status, count, c, u)| {
            Ok(StatusCount {
                status,
                count,
                oldest_created: ts(c)?,
                oldest_updated: ts(u)?,
            })
        })
        .collect::<Result<_, StoreError>>()?;
    let queries = rows::<DB, (String, i64)>(pool, QUERY_COUNTS).await?;
    let workers = rows::<DB, (String, String)>(pool, WORKERS)
        .await?
        .into_iter()
        .map(|(worker_id, seen)| {
            Ok(WorkerSeen {
                worker_id,
                last_seen_at: ts(Some(seen))?.unwrap_or(Timestamp::now_utc()),
            })
        })
        .collect::<Result<_, StoreError>>()?;
    Ok(StoreCounts {
        tasks,
        queries,
        workers,
    })
}

/// `SELECT 1` on `pool`: the database answers.
pub(crate) async fn ping<DB>(pool: &Pool<DB>) -> Result<(), StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'r> (i32,): FromRow<'r, DB::Row>,
{
    rows::<DB, (i32,)>(pool, "SELECT 1").await.map(drop)
}
