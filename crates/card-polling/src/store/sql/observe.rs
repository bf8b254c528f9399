//! Reads for `/metrics`, `/readyz` and `/health`, no
//! parameters, plain columns.
//! The item count visits only the [`OPEN_ITEM_STATUSES`](crate::store::observe::OPEN_ITEM_STATUSES)
//! rows through the `(status, id)` index; finished items, the bulk, are never scanned.

use async_trait::async_trait;
use futures::FutureExt;

use rakuten_types::Timestamp;

use super::{SqlStore, dialect, t};
use crate::store::ServiceStore;

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

#[async_trait]
impl ServiceStore for SqlStore {
    async fn ping(&self) -> StoreResult<()> {
        ping(&self.pool).await
    }

    fn writes_failing(&self) -> bool {
        self.writer.failing()
    }

    async fn item_counts(&self) -> StoreResult<Vec<(String, String, i64)>> {
        item_counts(&self.pool).await
    }

    async fn queue_health(&self) -> StoreResult<crate::store::observe::QueueHealth> {
        queue_health(&self.pool).await
    }

    fn items_set_aside(&self) -> u64 {
        self.set_aside.load(std::sync::atomic::Ordering::Relaxed)
    }

    async fn clock_offset_ms(&self, now: Timestamp) -> StoreResult<Option<i64>> {
        let Some(sql) = dialect::SHARED_CLOCK_MILLIS else {
            return Ok(None);
        };
        let db_ms: i64 = sqlx::query_scalar(sql).fetch_one(&self.pool).await?;
        Ok(Some(db_ms - now.as_millis()))
    }

    fn clock_shared(&self) -> bool {
        dialect::SHARED_CLOCK_MILLIS.is_some()
    }

    async fn meta_feature_enabled_at(&self, now: Timestamp) -> StoreResult<Timestamp> {
        self.write(t(now), |c, now| {
            async move {
                sqlx::query(
                    "INSERT INTO meta (key, value) VALUES ('feature_enabled_at', $1) ON CONFLICT (key) DO NOTHING",
                )
                .bind(now.as_str())
                .execute(&mut *c)
                .await?;
                Ok(())
            }
            .boxed()
        })
        .await?;
        super::rows::feature_enabled_at(&self.pool).await
    }

    async fn shutdown(&self) {
        SqlStore::shutdown(self).await;
    }
}
