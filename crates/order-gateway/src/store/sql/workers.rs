//! The worker list (paged, D-worker-list-pages), an operator's retirement of a worker (hidden from
//! `/health` and `worker_offline` until it polls again, its token binding dropped), audited, and
//! the binding of a worker id to the worker token that acts for it (D-worker-id-bound-to-token).

use rakuten_types::Timestamp;
use rakuten_types::alert::{OperatorActionKind, OperatorActionView};
use rakuten_types::order::Page;
use sqlx::Row;

use super::actions::{ActionRecord, action_insert};
use super::{Conn, Db, Pool};
use crate::store::StoreError;
use crate::store::dialect::Dialect;
use crate::store::operator::{RetireRequest, WorkerRow};
use crate::store::sql::rows::{decode_ts, task_id, ts};

/// One page of the worker list with the count of every known worker, both read from one
/// snapshot (D-worker-list-pages). Order: workers holding a task first, then serving ones, then
/// retired ones, each most recently seen first, so what the operator acts on is on the first page
/// however many ids have polled once and gone silent.
pub(crate) async fn worker_list(
    pool: &Pool,
    (limit, offset): (i64, i64),
) -> Result<Page<WorkerRow>, StoreError> {
    let mut tx = pool.begin_with(Db::READ_SNAPSHOT).await?;
    let total: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM workers")
        .fetch_one(&mut *tx)
        .await?;
    // The lease holders are read once (a worker holds at most a few tasks), not per worker row.
    let sql = format!(
        "SELECT w.worker_id, w.last_seen_at, w.retired_at, a.task_id AS active_task \
         FROM workers w LEFT JOIN (SELECT lease_owner, MIN(task_id) AS task_id FROM tasks \
         WHERE status IN ('leased','running') GROUP BY lease_owner) a \
         ON a.lease_owner = w.worker_id \
         ORDER BY CASE WHEN a.task_id IS NOT NULL THEN 0 WHEN w.retired_at IS NULL THEN 1 \
         ELSE 2 END, w.last_seen_at DESC, w.worker_id{} LIMIT $1 OFFSET $2",
        Db::BYTE_ORDER
    );
    let items = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(limit)
        .bind(offset)
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|r| {
            Ok(WorkerRow {
                worker_id: r.try_get("worker_id")?,
                last_seen_at: ts(&r.try_get::<String, _>("last_seen_at")?)?,
                retired_at: decode_ts(r.try_get("retired_at")?)?,
                active_task: r
                    .try_get::<Option<String>, _>("active_task")?
                    .as_deref()
                    .map(task_id)
                    .transpose()?,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    tx.commit().await?;
    Ok(Page {
        items,
        total,
        limit,
        offset,
    })
}

pub(crate) async fn worker_retire(
    conn: &mut Conn,
    req: RetireRequest,
    now: Timestamp,
) -> Result<OperatorActionView, StoreError> {
    // Retiring frees the worker id for the next worker token that acts for it.
    let unbound: Option<String> = sqlx::query_scalar(
        "DELETE FROM worker_bindings WHERE worker_id = $1 RETURNING token_name",
    )
    .bind(req.worker_id.as_str())
    .fetch_optional(&mut *conn)
    .await?;
    let done = sqlx::query(
        "UPDATE workers SET retired_at = $1 WHERE worker_id = $2 AND retired_at IS NULL",
    )
    .bind(now.to_rfc3339())
    .bind(req.worker_id.as_str())
    .execute(&mut *conn)
    .await?
    .rows_affected();
    // A worker id known only by its binding (it leased account queries, which leave the order
    // heartbeat alone, §11.2) is retired by dropping the binding.
    if done != 1 && unbound.is_none() {
        // The error rolls the transaction back.
        let since: Option<Option<String>> =
            sqlx::query_scalar("SELECT retired_at FROM workers WHERE worker_id = $1")
                .bind(req.worker_id.as_str())
                .fetch_optional(&mut *conn)
                .await?;
        return Err(match since {
            Some(Some(since)) => StoreError::WorkerRetired {
                worker_id: req.worker_id.to_string(),
                since,
            },
            _ => StoreError::WorkerNotFound(req.worker_id.to_string()),
        });
    }
    action_insert(
        conn,
        ActionRecord {
            action: OperatorActionKind::RetireWorker,
            actor: &req.actor,
            reason: &req.reason,
            task: None,
            worker_id: Some(req.worker_id.as_str()),
            from: None,
            to: None,
            // Which worker token acted for the id until now (the audit's record of it).
            detail: match &unbound {
                Some(name) => serde_json::json!({ "unbound_token": name }),
                None => serde_json::json!({}),
            },
        },
        now,
    )
    .await
}

/// The worker token name `worker_id` is bound to, if any.
pub(crate) async fn worker_binding(
    conn: &mut Conn,
    worker_id: &str,
) -> Result<Option<String>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT token_name FROM worker_bindings WHERE worker_id = $1")
            .bind(worker_id)
            .fetch_optional(&mut *conn)
            .await?,
    )
}

/// Binds `worker_id` to `token_name` unless it is bound already; answers the name it is bound to
/// after the statement (the caller's, or the one that bound it first). One statement, so two
/// tokens racing for a new worker id get one winner.
pub(crate) async fn worker_bind(
    conn: &mut Conn,
    worker_id: String,
    token_name: String,
    now: Timestamp,
) -> Result<String, StoreError> {
    // The no-op update makes the conflicting row come back through RETURNING.
    Ok(sqlx::query_scalar(
        "INSERT INTO worker_bindings (worker_id, token_name, bound_at) VALUES ($1, $2, $3) \
         ON CONFLICT (worker_id) DO UPDATE SET token_name = worker_bindings.token_name \
         RETURNING token_name",
    )
    .bind(worker_id)
    .bind(token_name)
    .bind(now.to_rfc3339())
    .fetch_one(&mut *conn)
    .await?)
}
