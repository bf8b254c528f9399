//! The reclaim's grant (D-lease-grant-history): an operator's reclaim of a stale task leases it
//! to a named worker inside [`super::tasks::task_reclaim`]; the grant waits, marked
//! `reclaim_pending`, until that worker's next poll receives this very grant instead of a new
//! one. The reclaim is audited like every operator action.

use rakuten_types::alert::OperatorActionKind;
use rakuten_types::{TaskId, TaskStatus, Timestamp};
use sqlx::Row;

use super::Conn;
use super::actions::{ActionRecord, action_insert};
use crate::store::StoreError;

/// After a reclaim's grant: marks it as not yet received by its worker, so the worker's
/// next poll receives this very grant, and audits the reclaim.
pub(crate) async fn reclaim_recorded(
    conn: &mut Conn,
    task: &TaskId,
    worker_id: &str,
    lease_count: i64,
    actor: &str,
    reason: &str,
    now: Timestamp,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE tasks SET reclaim_pending = 1 WHERE task_id = $1 AND status = 'leased'")
        .bind(task.as_str())
        .execute(&mut *conn)
        .await?;
    action_insert(
        conn,
        ActionRecord {
            action: OperatorActionKind::Reclaim,
            actor,
            reason,
            task: Some(task),
            worker_id: Some(worker_id),
            from: Some(TaskStatus::Stale),
            to: Some(TaskStatus::Leased),
            detail: serde_json::json!({ "lease_count": lease_count }),
        },
        now,
    )
    .await?;
    Ok(())
}

/// The first poll of a reclaimed task's worker: the reclaim's own grant (same token and
/// count; the lease runs `ttl` from now), or `None`. Returns `(task_id, lease_count,
/// lease_token)`.
#[allow(dead_code, reason = "compiled for both engines; SQLite leases in store/sqlite_sync.rs")]
pub(crate) async fn reclaimed_grant_take(
    conn: &mut Conn,
    worker_id: &str,
    expires: Timestamp,
    now: Timestamp,
) -> Result<Option<(String, i64, String)>, StoreError> {
    let row = sqlx::query(
        "UPDATE tasks SET reclaim_pending = 0, lease_expires_at = $1, updated_at = $2 \
         WHERE status = 'leased' AND reclaim_pending = 1 AND lease_owner = $3 \
         AND lease_expires_at > $2 RETURNING task_id, lease_count, lease_token",
    )
    .bind(expires.to_rfc3339())
    .bind(now.to_rfc3339())
    .bind(worker_id)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(match row {
        Some(r) => Some((
            r.try_get("task_id")?,
            r.try_get("lease_count")?,
            r.try_get("lease_token")?,
        )),
        None => None,
    })
}
