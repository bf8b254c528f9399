//! Reads for `/metrics`, `/readyz` and `/health`, no
//! parameters, plain columns.
//! The item count visits only the [`OPEN_ITEM_STATUSES`](crate::store::observe::OPEN_ITEM_STATUSES)
//! rows through the `(status, id)` index; finished items, the bulk, are never scanned.

use super::Pool;
use crate::store::observe::QueueHealth;
use crate::store::{StoreResult, common};

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

const QUEUE_HEALTH: &str = "SELECT status, COUNT(*), MIN(enqueued_at) FROM priority_items \
     WHERE status IN ('pending','running') GROUP BY status";

/// Open item counts and the oldest pending item's enqueue time, in one statement (so a dropped or
/// unreadable `priority_items` fails it).
pub(crate) async fn queue_health(pool: &Pool) -> StoreResult<QueueHealth> {
    let rows = sqlx::query_as::<_, (String, i64, Option<String>)>(QUEUE_HEALTH)
        .fetch_all(pool)
        .await?;
    let mut out = QueueHealth::default();
    for (status, n, oldest) in rows {
        match status.as_str() {
            "pending" => {
                out.pending = n;
                out.oldest_pending_enqueued_at = oldest
                    .map(|s| {
                        rakuten_types::Timestamp::parse(&s)
                            .map_err(|_| common::corrupt("priority_items.enqueued_at"))
                    })
                    .transpose()?;
            }
            _ => out.running = n,
        }
    }
    Ok(out)
}
