//! Reads for `/metrics` and `/readyz` (issue #10 items 7 and 8), no parameters, plain columns.
//! The item count visits only the [`OPEN_ITEM_STATUSES`](crate::store::observe::OPEN_ITEM_STATUSES)
//! rows through the `(status, id)` index; finished items, the bulk, are never scanned.

use super::Pool;
use crate::store::StoreResult;

const ITEM_COUNTS: &str = "SELECT status, task_type, COUNT(*) FROM priority_items \
     WHERE status IN ('pending','running') GROUP BY status, task_type";

/// `(status, task_type, count)` of the open priority items.
pub(crate) async fn item_counts(pool: &Pool) -> StoreResult<Vec<(String, String, i64)>> {
    Ok(sqlx::query_as::<_, (String, String, i64)>(ITEM_COUNTS)
        .fetch_all(pool)
        .await?)
}

/// `SELECT 1`: the database answers.
pub(crate) async fn ping(pool: &Pool) -> StoreResult<()> {
    sqlx::query_as::<_, (i32,)>("SELECT 1")
        .fetch_one(pool)
        .await?;
    Ok(())
}
