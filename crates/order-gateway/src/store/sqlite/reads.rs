//! Read queries, run on the read pool (`query_only` connections). In WAL mode they never block
//! the writer and see only committed data.

use rakuten_types::order::{Page, TaskDetail, TaskSummary};
use rakuten_types::{TaskId, Timestamp, WorkerId};
use sqlx::{Row, SqlitePool};

use super::rows::{TASK_COLUMNS, TaskRow, decode_report, ts};
use crate::settings::LeaseScope;
use crate::store::{HealthSnapshot, StoreError, TaskFilter, WorkerSeen};

pub(crate) async fn task_get(
    pool: &SqlitePool,
    task_id: &TaskId,
) -> Result<Option<TaskDetail>, StoreError> {
    let mut conn = pool.acquire().await?;
    let sql = format!("SELECT {TASK_COLUMNS} FROM tasks t WHERE t.task_id = ?");
    let Some(row) = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(task_id.as_str())
        .fetch_optional(&mut *conn)
        .await?
    else {
        return Ok(None);
    };
    let task = TaskRow::decode(&row)?.into_summary()?;
    let history = sqlx::query(
        "SELECT state, payable_yen, pay_deadline, site_order_id, evidence_ref, detail, \
         error_code, worker_id, operator, reported_at FROM task_reports WHERE task_id = ? ORDER BY seq",
    )
    .bind(task_id.as_str())
    .fetch_all(&mut *conn)
    .await?
    .iter()
    .map(decode_report)
    .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(TaskDetail {
        task,
        history,
        // Filled by the HTTP layer from the operator store.
        operator_actions: Vec::new(),
        evidence_queries: Vec::new(),
    }))
}

pub(crate) async fn task_list(
    pool: &SqlitePool,
    f: TaskFilter,
) -> Result<Page<TaskSummary>, StoreError> {
    let status = f.status.map(|s| s.as_str());
    let total: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM tasks WHERE (? IS NULL OR status = ?) AND (? IS NULL OR site = ?)",
    )
    .bind(status)
    .bind(status)
    .bind(f.site.clone())
    .bind(f.site.clone())
    .fetch_one(pool)
    .await?;
    let sql = format!(
        "SELECT {TASK_COLUMNS} FROM tasks t WHERE (? IS NULL OR t.status = ?) \
         AND (? IS NULL OR t.site = ?) ORDER BY t.created_at, t.rowid LIMIT ? OFFSET ?"
    );
    let items = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(status)
        .bind(status)
        .bind(f.site.clone())
        .bind(f.site.clone())
        .bind(f.limit)
        .bind(f.offset)
        .fetch_all(pool)
        .await?
        .iter()
        .map(|r| TaskRow::decode(r).and_then(TaskRow::into_summary))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Page {
        items,
        total,
        limit: f.limit,
        offset: f.offset,
    })
}

pub(crate) async fn task_leasable_exists(
    pool: &SqlitePool,
    worker_id: &WorkerId,
    site: Option<&str>,
    scope: LeaseScope,
    now: Timestamp,
) -> Result<bool, StoreError> {
    let gate_expr = match scope {
        LeaseScope::Global => "'*'",
        LeaseScope::Site => "t.site",
    };
    let sql = format!(
        "SELECT EXISTS (SELECT 1 FROM tasks WHERE status IN ('leased','running') \
           AND lease_owner = ? AND lease_expires_at > ?) \
         OR EXISTS (SELECT 1 FROM tasks t WHERE t.status = 'queued' AND (? IS NULL OR t.site = ?) \
           AND NOT EXISTS (SELECT 1 FROM tasks a WHERE a.status IN ('leased','running') \
           AND a.gate_key = {gate_expr}))"
    );
    Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(worker_id.as_str())
        .bind(now.to_rfc3339())
        .bind(site)
        .bind(site)
        .fetch_one(pool)
        .await?)
}

async fn summaries(
    conn: &mut sqlx::SqliteConnection,
    where_sql: &str,
    bind: Option<String>,
) -> Result<Vec<TaskSummary>, StoreError> {
    let sql = format!(
        "SELECT {TASK_COLUMNS} FROM tasks t WHERE {where_sql} ORDER BY t.created_at, t.rowid LIMIT 100"
    );
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
    if let Some(b) = bind {
        q = q.bind(b);
    }
    q.fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|r| TaskRow::decode(r).and_then(TaskRow::into_summary))
        .collect()
}

pub(crate) async fn health_snapshot(
    pool: &SqlitePool,
    queued_before: Timestamp,
) -> Result<HealthSnapshot, StoreError> {
    let mut conn = pool.acquire().await?;
    // One read transaction: every figure comes from the same snapshot.
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let queued: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tasks WHERE status = 'queued'")
        .fetch_one(&mut *tx)
        .await?;
    let stale_count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tasks WHERE status = 'stale'")
        .fetch_one(&mut *tx)
        .await?;
    let active = summaries(&mut tx, "t.status IN ('leased','running')", None).await?;
    let stale = summaries(&mut tx, "t.status = 'stale'", None).await?;
    let queued_too_long = summaries(
        &mut tx,
        "t.status = 'queued' AND t.created_at < ?",
        Some(queued_before.to_rfc3339()),
    )
    .await?;
    let workers = sqlx::query(
        "SELECT worker_id, last_seen_at FROM workers WHERE retired_at IS NULL \
             ORDER BY worker_id LIMIT 1000",
    )
    .fetch_all(&mut *tx)
    .await?
    .iter()
    .map(|r| {
        Ok(WorkerSeen {
            worker_id: r.try_get("worker_id")?,
            last_seen_at: ts(&r.try_get::<String, _>("last_seen_at")?)?,
        })
    })
    .collect::<Result<Vec<_>, StoreError>>()?;
    tx.commit().await?;
    Ok(HealthSnapshot {
        queued,
        stale_count,
        active,
        stale,
        queued_too_long,
        workers,
    })
}
