//! Reads for `/metrics` and `/readyz` (issue #10 items 7 and 8), one generic implementation for
//! both drivers (no parameters, plain columns). The item count visits only `pending` and
//! `running` rows through the `(status, id)` index; finished items, the bulk, are never scanned.

use sqlx::{Database, Executor, FromRow, IntoArguments, Pool};

use super::StoreResult;

/// Item statuses counted at scrape time.
pub const OPEN_ITEM_STATUSES: [&str; 2] = ["pending", "running"];

const ITEM_COUNTS: &str = "SELECT status, task_type, COUNT(*) FROM priority_items \
     WHERE status IN ('pending','running') GROUP BY status, task_type";

/// `(status, task_type, count)` of the open priority items.
pub(crate) async fn item_counts<DB>(pool: &Pool<DB>) -> StoreResult<Vec<(String, String, i64)>>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'r> (String, String, i64): FromRow<'r, DB::Row>,
{
    Ok(sqlx::query_as::<DB, (String, String, i64)>(ITEM_COUNTS)
        .fetch_all(pool)
        .await?)
}

/// `SELECT 1`: the database answers.
pub(crate) async fn ping<DB>(pool: &Pool<DB>) -> StoreResult<()>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'r> (i32,): FromRow<'r, DB::Row>,
{
    sqlx::query_as::<DB, (i32,)>("SELECT 1")
        .fetch_one(pool)
        .await?;
    Ok(())
}
