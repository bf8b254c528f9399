//! The lease history (D-lease-grant-history): one `lease_grants` row per grant. Each
//! function runs inside the caller's transaction, right after the guarded `UPDATE tasks …` it
//! records, so a grant and its row, or a transition and the grant's ending, commit together or
//! not at all. The partial unique index `one_open_grant` keeps at most one open grant per task.
//! A task leased before migration 0006 has no open row; renewing, ending or moving it then
//! touches nothing, by design.

use rakuten_types::{TaskId, Timestamp};
use sqlx::Row;

use super::Conn;
use crate::store::StoreError;
use crate::store::operator::{GrantEnd, GrantVia, LeaseGrantRecord, token_fingerprint};
use crate::store::sql::rows::{corrupt, decode_ts, ts};

/// Records a new grant: `grant_no` is the task's `lease_count` after it. Only the token's
/// fingerprint is stored, never the token.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn grant_opened(
    conn: &mut Conn,
    task_id: &TaskId,
    grant_no: i64,
    worker_id: &str,
    via: GrantVia,
    token: &str,
    expires: Timestamp,
    now: Timestamp,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO lease_grants (task_id, grant_no, worker_id, via, token_fp, granted_at, \
         expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(task_id.as_str())
    .bind(grant_no)
    .bind(worker_id)
    .bind(via.as_str())
    .bind(token_fingerprint(token))
    .bind(now.to_rfc3339())
    .bind(expires.to_rfc3339())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// A renewal of the task's open grant: its new expiry, one more renewal. (PostgreSQL's; SQLite
/// renews on its writer's thread, `store/sqlite_sync.rs`.)
#[allow(dead_code, reason = "compiled for both engines; SQLite renews in store/sqlite_sync.rs")]
pub(crate) async fn grant_renewed(
    conn: &mut Conn,
    task_id: &TaskId,
    expires: Timestamp,
    now: Timestamp,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE lease_grants SET expires_at = $1, renewals = renewals + 1, last_renewed_at = $2 \
         WHERE task_id = $3 AND ended_at IS NULL",
    )
    .bind(expires.to_rfc3339())
    .bind(now.to_rfc3339())
    .bind(task_id.as_str())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The task's open grant now expires at `expires` (clamping; a reclaimed grant's first poll).
pub(crate) async fn grant_moved(
    conn: &mut Conn,
    task_id: &TaskId,
    expires: Timestamp,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE lease_grants SET expires_at = $1 WHERE task_id = $2 AND ended_at IS NULL")
        .bind(expires.to_rfc3339())
        .bind(task_id.as_str())
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Ends the task's open grant, if any, `how`.
pub(crate) async fn grant_ended(
    conn: &mut Conn,
    task_id: &TaskId,
    how: GrantEnd,
    now: Timestamp,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE lease_grants SET ended_at = $1, ended_how = $2 \
         WHERE task_id = $3 AND ended_at IS NULL",
    )
    .bind(now.to_rfc3339())
    .bind(how.as_str())
    .bind(task_id.as_str())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The newest `limit` grants of a task, newest first.
pub(crate) async fn task_lease_grants(
    conn: &mut Conn,
    task_id: &TaskId,
    limit: i64,
) -> Result<Vec<LeaseGrantRecord>, StoreError> {
    let rows = sqlx::query(
        "SELECT grant_no, worker_id, via, token_fp, granted_at, expires_at, renewals, \
         last_renewed_at, ended_at, ended_how FROM lease_grants WHERE task_id = $1 \
         ORDER BY grant_no DESC LIMIT $2",
    )
    .bind(task_id.as_str())
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|r| {
            let via: String = r.try_get("via")?;
            let how: Option<String> = r.try_get("ended_how")?;
            Ok(LeaseGrantRecord {
                grant_no: r.try_get("grant_no")?,
                worker_id: r.try_get("worker_id")?,
                via: GrantVia::parse(&via).ok_or_else(|| corrupt("via", &via))?,
                token_fp: r.try_get("token_fp")?,
                granted_at: ts(&r.try_get::<String, _>("granted_at")?)?,
                expires_at: ts(&r.try_get::<String, _>("expires_at")?)?,
                renewals: r.try_get("renewals")?,
                last_renewed_at: decode_ts(r.try_get("last_renewed_at")?)?,
                ended_at: decode_ts(r.try_get("ended_at")?)?,
                ended_how: how
                    .map(|h| GrantEnd::parse(&h).ok_or_else(|| corrupt("ended_how", &h)))
                    .transpose()?,
            })
        })
        .collect()
}
