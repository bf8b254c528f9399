//! The sweeper's transitions (§5): lapsed leases turn `stale`, queued tasks past their deadline
//! turn `expired`, and leases past a limit are clamped to it.

use rakuten_types::{TaskEvent, TaskId, TaskStatus, Timestamp};
use sqlx::Row;

use super::super::{Conn, Db, grants};
use crate::store::dialect::Dialect;
use crate::store::operator::GrantEnd;
use crate::store::sql::rows::{decode_ts, ts};
use crate::store::{ExpiredTask, StaleTask, StoreError};

/// The sweeper's transition (§5): every lapsed active lease → `stale`, never `queued`. One
/// statement; on PostgreSQL rows another transaction holds (a report in flight, another
/// instance's sweep) are skipped and looked at again on the next tick, so each lease lapses
/// exactly once.
pub(crate) async fn task_mark_stale_expired(
    conn: &mut Conn,
    now: Timestamp,
) -> Result<Vec<StaleTask>, StoreError> {
    // Both active statuses may lapse; the SQL guard below admits exactly those.
    for s in [TaskStatus::Leased, TaskStatus::Running] {
        s.transition(TaskEvent::Expire)?;
    }
    let sql = format!(
        "UPDATE tasks SET status = 'stale', updated_at = $1 \
         WHERE task_id IN (SELECT task_id FROM tasks \
           WHERE status IN ('leased','running') AND lease_expires_at <= $1 \
           ORDER BY lease_expires_at LIMIT 1000{}) \
         AND status IN ('leased','running') AND lease_expires_at <= $1 \
         RETURNING task_id, lease_owner, lease_expires_at, lease_count",
        Db::SKIP_LOCKED
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(now.to_rfc3339())
        .fetch_all(&mut *conn)
        .await?;
    let mut staled = rows
        .iter()
        .map(|row| {
            let task_id: String = row.try_get("task_id")?;
            Ok(StaleTask {
                task_id: TaskId::parse(&task_id)
                    .map_err(|e| StoreError::Corrupt(format!("task_id: {e}")))?,
                lease_owner: row.try_get("lease_owner")?,
                lease_expires_at: decode_ts(row.try_get("lease_expires_at")?)?,
                lease_count: row.try_get("lease_count")?,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    for t in &staled {
        grants::grant_ended(conn, &t.task_id, GrantEnd::Expired, now).await?;
    }
    // RETURNING has no order; report the oldest lapse first.
    staled.sort_by(|a, b| {
        (a.lease_expires_at, a.task_id.as_str()).cmp(&(b.lease_expires_at, b.task_id.as_str()))
    });
    Ok(staled)
}

/// The sweeper's other transition (D-task-not-after-expired): every queued task whose
/// `not_after` is before `now` → `expired`, the terminal status that says why. Only `queued`
/// takes the event (a leased task keeps running); on PostgreSQL rows a lease is claiming right
/// now are skipped and looked at on the next tick (the lease's own guard refuses them anyway).
pub(crate) async fn task_expire_past_not_after(
    conn: &mut Conn,
    now: Timestamp,
) -> Result<Vec<ExpiredTask>, StoreError> {
    // The status written is the transition function's answer; the guard is its `from`.
    let next = TaskStatus::Queued.transition(TaskEvent::NotAfterPassed)?;
    let sql = format!(
        "UPDATE tasks SET status = $2, updated_at = $1 \
         WHERE task_id IN (SELECT task_id FROM tasks \
           WHERE status = 'queued' AND not_after IS NOT NULL AND not_after < $1 \
           ORDER BY not_after LIMIT 1000{}) \
         AND status = 'queued' AND not_after IS NOT NULL AND not_after < $1 \
         RETURNING task_id, not_after, created_at",
        Db::SKIP_LOCKED
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(now.to_rfc3339())
        .bind(next.as_str())
        .fetch_all(&mut *conn)
        .await?;
    let mut expired = rows
        .iter()
        .map(|row| {
            let task_id: String = row.try_get("task_id")?;
            Ok(ExpiredTask {
                task_id: TaskId::parse(&task_id)
                    .map_err(|e| StoreError::Corrupt(format!("task_id: {e}")))?,
                not_after: ts(&row.try_get::<String, _>("not_after")?)?,
                created_at: ts(&row.try_get::<String, _>("created_at")?)?,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    // RETURNING has no order; the earliest deadline first.
    expired
        .sort_by(|a, b| (a.not_after, a.task_id.as_str()).cmp(&(b.not_after, b.task_id.as_str())));
    Ok(expired)
}

/// Clamps every active lease expiring after `limit` to `limit`; returns the
/// tasks clamped. Rows another transaction holds are left for the next sweep.
pub(crate) async fn task_clamp_leases(
    conn: &mut Conn,
    limit: Timestamp,
    now: Timestamp,
) -> Result<Vec<TaskId>, StoreError> {
    let sql = format!(
        "UPDATE tasks SET lease_expires_at = $1, updated_at = $2 \
         WHERE task_id IN (SELECT task_id FROM tasks \
           WHERE status IN ('leased','running') AND lease_expires_at > $1 LIMIT 1000{}) \
         AND status IN ('leased','running') AND lease_expires_at > $1 RETURNING task_id",
        Db::SKIP_LOCKED
    );
    let ids: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(limit.to_rfc3339())
        .bind(now.to_rfc3339())
        .fetch_all(&mut *conn)
        .await?;
    let ids = ids
        .iter()
        .map(|s| TaskId::parse(s).map_err(|e| StoreError::Corrupt(format!("task_id: {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    for id in &ids {
        grants::grant_moved(conn, id, limit).await?;
    }
    Ok(ids)
}
