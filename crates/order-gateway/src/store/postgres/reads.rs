//! Read queries on the pool. `health_snapshot` and the listings read one `REPEATABLE READ`
//! snapshot, so their counts and pages agree.

use rakuten_types::order::{Page, TaskDetail, TaskSummary};
use rakuten_types::{TaskId, Timestamp, WorkerId};
use sqlx::{PgConnection, PgPool, Row};

use super::rows::{TASK_COLUMNS, report, task_row};
use crate::settings::LeaseScope;
use crate::store::sqlite::rows::{TaskRow, ts};
use crate::store::{HealthSnapshot, StoreError, TaskFilter, WorkerSeen};

const SNAPSHOT: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

pub(crate) async fn task_get(
    pool: &PgPool,
    task_id: &TaskId,
) -> Result<Option<TaskDetail>, StoreError> {
    let mut tx = pool.begin_with(SNAPSHOT).await?;
    let sql = format!("SELECT {TASK_COLUMNS} FROM tasks t WHERE t.task_id = $1");
    let Some(row) = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(task_id.as_str())
        .fetch_optional(&mut *tx)
        .await?
    else {
        return Ok(None);
    };
    let task = task_row(&row)?.into_summary()?;
    let history = sqlx::query(
        "SELECT state, payable_yen, pay_deadline, site_order_id, evidence_ref, detail, \
         error_code, worker_id, operator, reported_at FROM task_reports WHERE task_id = $1 ORDER BY seq",
    )
    .bind(task_id.as_str())
    .fetch_all(&mut *tx)
    .await?
    .iter()
    .map(report)
    .collect::<Result<Vec<_>, _>>()?;
    tx.commit().await?;
    Ok(Some(TaskDetail {
        task,
        history,
        // Filled by the HTTP layer from the operator store.
        operator_actions: Vec::new(),
        evidence_queries: Vec::new(),
    }))
}

pub(crate) async fn task_list(
    pool: &PgPool,
    f: TaskFilter,
) -> Result<Page<TaskSummary>, StoreError> {
    let status = f.status.map(|s| s.as_str());
    let mut tx = pool.begin_with(SNAPSHOT).await?;
    let total: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM tasks WHERE ($1::text IS NULL OR status = $1) \
         AND ($2::text IS NULL OR site = $2)",
    )
    .bind(status)
    .bind(f.site.clone())
    .fetch_one(&mut *tx)
    .await?;
    let sql = format!(
        "SELECT {TASK_COLUMNS} FROM tasks t WHERE ($1::text IS NULL OR t.status = $1) \
         AND ($2::text IS NULL OR t.site = $2) ORDER BY t.created_at, t.seq LIMIT $3 OFFSET $4"
    );
    let items = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(status)
        .bind(f.site.clone())
        .bind(f.limit)
        .bind(f.offset)
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|r| task_row(r).and_then(TaskRow::into_summary))
        .collect::<Result<Vec<_>, _>>()?;
    tx.commit().await?;
    Ok(Page {
        items,
        total,
        limit: f.limit,
        offset: f.offset,
    })
}

pub(crate) async fn task_leasable_exists(
    pool: &PgPool,
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
           AND lease_owner = $1 AND lease_expires_at > $2) \
         OR EXISTS (SELECT 1 FROM tasks t WHERE t.status = 'queued' \
           AND ($3::text IS NULL OR t.site = $3) \
           AND NOT EXISTS (SELECT 1 FROM tasks a WHERE a.status IN ('leased','running') \
           AND a.gate_key = {gate_expr}))"
    );
    Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(worker_id.as_str())
        .bind(now.to_rfc3339())
        .bind(site)
        .fetch_one(pool)
        .await?)
}

async fn summaries(
    conn: &mut PgConnection,
    where_sql: &str,
    bind: Option<String>,
) -> Result<Vec<TaskSummary>, StoreError> {
    let sql = format!(
        "SELECT {TASK_COLUMNS} FROM tasks t WHERE {where_sql} ORDER BY t.created_at, t.seq LIMIT 100"
    );
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
    if let Some(b) = bind {
        q = q.bind(b);
    }
    q.fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|r| task_row(r).and_then(TaskRow::into_summary))
        .collect()
}

pub(crate) async fn health_snapshot(
    pool: &PgPool,
    queued_before: Timestamp,
) -> Result<HealthSnapshot, StoreError> {
    let mut tx = pool.begin_with(SNAPSHOT).await?;
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
        "t.status = 'queued' AND t.created_at < $1",
        Some(queued_before.to_rfc3339()),
    )
    .await?;
    let workers = sqlx::query(
        "SELECT worker_id, last_seen_at FROM workers WHERE retired_at IS NULL ORDER BY worker_id COLLATE \"C\" LIMIT 1000",
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
