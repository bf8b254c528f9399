//! `worker_offline` causes: one alert per offline worker up to [`WORKER_OFFLINE_LISTED`], the
//! longest silent first, and past it one aggregate alert that names how many more are offline
//! (D-worker-offline-aggregate). The cap keeps one sync's inserts and its webhook burst bounded
//! when many ids polled once and went silent; the aggregate keeps the rest from going unalerted.

use rakuten_types::Timestamp;
use rakuten_types::alert::{AlertKind, AlertView};
use sqlx::Row;

use super::{Conn, Db};
use crate::store::StoreError;
use crate::store::dialect::Dialect;
use crate::store::operator::{AlertSyncRequest, Cause};
use crate::store::sql::rows::ts;

/// Most offline workers with a `worker_offline` alert of their own.
pub(crate) const WORKER_OFFLINE_LISTED: usize = 100;

/// The subject of the aggregate `worker_offline` alert: a `/` no worker id may hold, so it never
/// names a worker.
pub const WORKERS_NOT_LISTED: &str = "workers/not-listed";

/// `worker_offline`: each serving worker silent for longer than `req.worker_offline`, the
/// longest silent first up to [`WORKER_OFFLINE_LISTED`], then one aggregate for the rest. The
/// longest silent first keeps the listed set stable: a worker going offline later joins the
/// aggregate instead of displacing (and so clearing) an alert already raised.
pub(crate) async fn causes(
    conn: &mut Conn,
    req: &AlertSyncRequest,
    now: Timestamp,
) -> Result<Vec<Cause>, StoreError> {
    let since = now.minus(req.worker_offline).to_rfc3339();
    let sql = format!(
        "SELECT worker_id, last_seen_at FROM workers WHERE retired_at IS NULL \
         AND last_seen_at < $1 ORDER BY last_seen_at, worker_id{} LIMIT {}",
        Db::BYTE_ORDER,
        WORKER_OFFLINE_LISTED + 1
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(&since)
        .fetch_all(&mut *conn)
        .await?;
    let mut out = Vec::new();
    for row in rows.iter().take(WORKER_OFFLINE_LISTED) {
        let w: String = row.try_get("worker_id")?;
        let seen = ts(&row.try_get::<String, _>("last_seen_at")?)?;
        out.push(Cause {
            kind: AlertKind::WorkerOffline,
            summary: format!(
                "worker {w} has not polled since {seen} ({:.0} s)",
                now.seconds_since(seen)
            ),
            subject: w.clone(),
            task_id: None,
            worker_id: Some(w),
        });
    }
    if rows.len() > WORKER_OFFLINE_LISTED {
        let offline: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM workers WHERE retired_at IS NULL AND last_seen_at < $1",
        )
        .bind(&since)
        .fetch_one(&mut *conn)
        .await?;
        let more = offline - WORKER_OFFLINE_LISTED as i64;
        out.push(Cause {
            kind: AlertKind::WorkerOffline,
            summary: aggregate_summary(more, req.worker_offline.as_secs_f64()),
            subject: WORKERS_NOT_LISTED.to_owned(),
            task_id: None,
            worker_id: None,
        });
    }
    Ok(out)
}

fn aggregate_summary(more: i64, after_secs: f64) -> String {
    format!(
        "{more} more workers have not polled for over {after_secs:.0} s and have no \
         worker_offline alert of their own (the {WORKER_OFFLINE_LISTED} longest silent have \
         one); `order-gateway ops workers` or GET /api/workers lists every worker, lease \
         holders and the most recently seen first, with the total; retire the ones that are gone"
    )
}

/// Keeps the open aggregate alert's count current: its summary is rewritten in place when the
/// number of unlisted offline workers changes. No webhook event is sent for it; the alert stays
/// the same alert (raised once, cleared once).
pub(crate) async fn refresh_open(
    conn: &mut Conn,
    open: &AlertView,
    cause: &Cause,
) -> Result<(), StoreError> {
    if cause.kind != AlertKind::WorkerOffline
        || cause.subject != WORKERS_NOT_LISTED
        || open.summary == cause.summary
    {
        return Ok(());
    }
    sqlx::query("UPDATE alerts SET summary = $1 WHERE alert_id = $2 AND state = 'open'")
        .bind(&cause.summary)
        .bind(&open.alert_id)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Deletes the rows of workers last seen before `cutoff` that hold no lease (D-worker-retention):
/// ids that polled once and went away would otherwise stay in the list and keep an alert open
/// forever. A worker holding a task is kept however long it is silent; it is the one the stale
/// task's advice names. A pruned worker that polls again comes back as a new row.
pub(crate) async fn prune(conn: &mut Conn, cutoff: Timestamp) -> Result<u64, StoreError> {
    let gone = sqlx::query(
        "DELETE FROM workers WHERE last_seen_at < $1 AND NOT EXISTS (SELECT 1 FROM tasks t \
         WHERE t.status IN ('leased','running') AND t.lease_owner = workers.worker_id)",
    )
    .bind(cutoff.to_rfc3339())
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if gone > 0 {
        tracing::info!(
            workers = gone,
            "worker rows past RAKUTEN_WORKER_RETENTION_SECONDS deleted"
        );
    }
    Ok(gone)
}
