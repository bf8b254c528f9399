//! The task row as the transitions read it: loaded, or loaded and locked for the rest of the
//! transaction, its latest reported state, and the worker's heartbeat every worker call writes.

use rakuten_types::{OrderState, TaskId, Timestamp, WorkerId};

use super::super::{Conn, Db};
use crate::store::StoreError;
use crate::store::dialect::Dialect;
use crate::store::sql::rows::{TASK_COLUMNS, TaskRow, order_state};

/// Loads a task; `lock` also locks its row until the transaction ends (PostgreSQL).
pub(super) async fn load_task(
    conn: &mut Conn,
    task_id: &TaskId,
    lock: bool,
) -> Result<Option<TaskRow>, StoreError> {
    let lock = if lock { Db::FOR_UPDATE } else { "" };
    let sql = format!("SELECT {TASK_COLUMNS} FROM tasks t WHERE t.task_id = $1{lock}");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(task_id.as_str())
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(TaskRow::decode).transpose()
}

/// Loads and locks a task (PostgreSQL), or says it does not exist.
pub(super) async fn load_task_locked(
    conn: &mut Conn,
    task_id: &TaskId,
) -> Result<TaskRow, StoreError> {
    load_task(conn, task_id, true)
        .await?
        .ok_or_else(|| StoreError::TaskNotFound(task_id.clone()))
}

/// The state of the task's latest report, if any.
pub(super) async fn latest_state(
    conn: &mut Conn,
    task_id: &str,
) -> Result<Option<OrderState>, StoreError> {
    let s: Option<String> = sqlx::query_scalar(
        "SELECT state FROM task_reports WHERE task_id = $1 ORDER BY seq DESC LIMIT 1",
    )
    .bind(task_id)
    .fetch_optional(&mut *conn)
    .await?;
    s.as_deref().map(order_state).transpose()
}

/// The worker's heartbeat (`workers.last_seen_at`); a retired worker that calls is active again.
pub(super) async fn worker_touch(
    conn: &mut Conn,
    worker_id: &WorkerId,
    now: Timestamp,
) -> Result<(), StoreError> {
    // The maximum: instances' clocks may differ slightly; a heartbeat never moves backwards.
    let sql = format!(
        "INSERT INTO workers (worker_id, last_seen_at) VALUES ($1, $2) \
         ON CONFLICT (worker_id) DO UPDATE \
         SET last_seen_at = {}(workers.last_seen_at, EXCLUDED.last_seen_at), retired_at = NULL",
        Db::GREATEST
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(worker_id.as_str())
        .bind(now.to_rfc3339())
        .execute(&mut *conn)
        .await?;
    Ok(())
}
