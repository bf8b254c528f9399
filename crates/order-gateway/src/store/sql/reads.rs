//! Order task reads. SQLite runs them on its read pool (`query_only` connections that in WAL mode
//! never block the writer); `task_get`, the listing and `health_snapshot` each read one snapshot
//! (the dialect's `READ_SNAPSHOT`), so their counts and pages agree.

use rakuten_types::order::{Page, TaskDetail, TaskSummary};
use rakuten_types::{TaskId, TaskStatus, Timestamp, WorkerId};
use sqlx::Row;

use super::paging::{capped_count, filtered_page, seek_page};
use super::{Conn, Db, Pool};
use crate::store::sql::leasable::{before_deadline, gate_free};
use crate::settings::LeaseScope;
use crate::store::dialect::Dialect;
use crate::store::sql::rows::{TASK_COLUMNS, TASK_LIST_COLUMNS, TaskRow, decode_report, ts};
use crate::store::sql::eq_if_set;
use crate::store::{
    AttentionTask, HEALTH_WORKERS_LISTED, HealthSnapshot, Seek, SeekPage,
    StatusCounts, StoreError, TaskFilter, WorkerSeen,
};

pub(crate) async fn task_get(
    pool: &Pool,
    task_id: &TaskId,
) -> Result<Option<TaskDetail>, StoreError> {
    let mut tx = pool.begin_with(Db::READ_SNAPSHOT).await?;
    let sql = format!("SELECT {TASK_COLUMNS} FROM tasks t WHERE t.task_id = $1");
    let Some(row) = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(task_id.as_str())
        .fetch_optional(&mut *tx)
        .await?
    else {
        return Ok(None);
    };
    let mut detail = TaskRow::detail_or_undecodable(&row)?;
    detail.history = sqlx::query(
        "SELECT state, payable_yen, pay_deadline, site_order_id, evidence_ref, detail, \
         error_code, worker_id, operator, reported_at FROM task_reports WHERE task_id = $1 ORDER BY seq",
    )
    .bind(task_id.as_str())
    .fetch_all(&mut *tx)
    .await?
    .iter()
    .map(decode_report)
    .collect::<Result<Vec<_>, _>>()?;
    tx.commit().await?;
    // `operator_actions` and `evidence_queries` are filled by the HTTP layer from the operator
    // store.
    Ok(Some(detail))
}

pub(crate) async fn task_list(pool: &Pool, f: TaskFilter) -> Result<Page<TaskSummary>, StoreError> {
    let status = f.status.map(|s| s.as_str());
    let filters = [("t.status", status), ("t.site", f.site.as_deref())];
    let page = (f.limit, f.offset);
    // A poison row shows up (set aside, or undecodable), never fails the page.
    filtered_page(pool, TASK_LIST_COLUMNS, "tasks t", "t.", filters, page, TaskRow::summary_or_undecodable).await
}

pub(crate) async fn task_seek(
    pool: &Pool,
    status: Option<TaskStatus>,
    site: Option<String>,
    seek: Seek,
    limit: i64,
) -> Result<SeekPage<TaskSummary>, StoreError> {
    let filters = [("t.status", status.map(|s| s.as_str())), ("t.site", site.as_deref())];
    seek_page(pool, TASK_LIST_COLUMNS, "tasks t", "t.", filters, (&seek, limit), TaskRow::summary_or_undecodable).await
}

pub(crate) async fn task_leasable_exists(
    pool: &Pool,
    worker_id: &WorkerId,
    site: Option<&str>,
    scope: LeaseScope,
    now: Timestamp,
) -> Result<bool, StoreError> {
    let sql = format!(
        "SELECT EXISTS (SELECT 1 FROM tasks WHERE status IN ('leased','running') \
           AND lease_owner = $1 AND lease_expires_at > $2) \
         OR EXISTS (SELECT 1 FROM tasks t WHERE t.status = 'queued' AND {} AND {} AND {})",
        eq_if_set("t.site", 3),
        gate_free(scope),
        before_deadline("t", 2)
    );
    Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(worker_id.as_str())
        .bind(now.to_rfc3339())
        .bind(site)
        .fetch_one(pool)
        .await?)
}

/// At most 100 task summaries matching `where_sql` (which may use `$1` = `bind`), oldest first.
async fn summaries(
    conn: &mut Conn,
    where_sql: &str,
    bind: Option<String>,
) -> Result<Vec<TaskSummary>, StoreError> {
    let sql = format!(
        "SELECT {TASK_LIST_COLUMNS} FROM tasks t WHERE {where_sql} ORDER BY t.created_at, t.{} LIMIT 100",
        Db::INSERTION_ORDER
    );
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
    if let Some(b) = bind {
        q = q.bind(b);
    }
    q.fetch_all(&mut *conn)
        .await?
        .iter()
        .map(TaskRow::summary_or_undecodable)
        .collect()
}

pub(crate) async fn task_active_leases(pool: &Pool) -> Result<Vec<TaskSummary>, StoreError> {
    let mut conn = pool.acquire().await?;
    summaries(&mut conn, "t.status IN ('leased','running')", None).await
}

pub(crate) async fn health_snapshot(
    pool: &Pool,
    queued_before: Timestamp,
) -> Result<HealthSnapshot, StoreError> {
    // One read transaction: every figure comes from the same snapshot.
    let mut tx = pool.begin_with(Db::READ_SNAPSHOT).await?;
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
    let queued_too_long_count: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM tasks WHERE status = 'queued' AND created_at < $1")
            .bind(queued_before.to_rfc3339())
            .fetch_one(&mut *tx)
            .await?;
    let workers_total: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM workers WHERE retired_at IS NULL")
        .fetch_one(&mut *tx)
        .await?;
    // Longest silent first: whatever the threshold, every offline worker precedes every online
    // one, so a long list never hides an offline worker behind healthy ones.
    let sql = format!(
        "SELECT worker_id, last_seen_at FROM workers WHERE retired_at IS NULL \
         ORDER BY last_seen_at, worker_id{} LIMIT {HEALTH_WORKERS_LISTED}",
        Db::BYTE_ORDER
    );
    let workers = sqlx::query(sqlx::AssertSqlSafe(sql))
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
    let clocks = super::clocks::clock_signals(&mut tx).await?;
    tx.commit().await?;
    Ok(HealthSnapshot {
        clocks,
        queued,
        stale_count,
        active,
        stale,
        queued_too_long,
        queued_too_long_count,
        workers,
        workers_total,
    })
}

pub(crate) async fn task_status_counts(pool: &Pool) -> Result<StatusCounts, StoreError> {
    let mut tx = pool.begin_with(Db::READ_SNAPSHOT).await?;
    // One count per status, each an index range of `idx_tasks_pending (status, created_at)`
    // stopped at the cap (the console shows "10,000+").
    let mut by_status = Vec::with_capacity(TaskStatus::ALL.len());
    for status in TaskStatus::ALL {
        let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(capped_count(
            "tasks WHERE status = $1",
            &format!("created_at, {}", Db::INSERTION_ORDER),
        )))
            .bind(status.as_str())
            .fetch_one(&mut *tx)
            .await?;
        by_status.push((status, n));
    }
    let oldest: Option<String> =
        sqlx::query_scalar("SELECT MIN(created_at) FROM tasks WHERE status = 'queued'")
            .fetch_one(&mut *tx)
            .await?;
    tx.commit().await?;
    Ok(StatusCounts {
        by_status,
        oldest_queued: oldest.as_deref().map(ts).transpose()?,
    })
}

pub(crate) async fn task_attention(
    pool: &Pool,
    failed_since: Timestamp,
    limit: i64,
) -> Result<Vec<AttentionTask>, StoreError> {
    // One branch per status, each walking `idx_tasks_pending (status, created_at)` in order and
    // stopping after `limit` rows; the branches are merged oldest first. The latest report is
    // looked up for the listed rows only.
    let branch = |cond: &str| {
        format!(
            "SELECT * FROM (SELECT t.task_id AS id, t.created_at AS c, t.{o} AS o FROM tasks t \
             WHERE {cond} ORDER BY t.created_at, t.{o} LIMIT $2) AS b",
            o = Db::INSERTION_ORDER
        )
    };
    // An ended task whose verdict a later report contradicts, whenever it ended
    // (D-late-report-contradiction-alert), through its partial index; the recent failed ones
    // are the branch above's.
    let contradicted = format!(
        "SELECT * FROM (SELECT t.task_id AS id, t.created_at AS c, t.{o} AS o \
         FROM tasks t{i} WHERE {c} AND NOT (t.status = 'failed' AND t.updated_at >= $1) \
         ORDER BY t.created_at, t.{o} LIMIT $2) AS b",
        o = Db::INSERTION_ORDER,
        i = Db::indexed_by("idx_tasks_contradicted"),
        c = crate::store::sql::CONTRADICTED,
    );
    let sql = format!(
        "SELECT {TASK_LIST_COLUMNS}, \
           (SELECT r.detail FROM task_reports r WHERE r.task_id = t.task_id \
             ORDER BY r.seq DESC LIMIT 1) AS last_detail, \
           (SELECT r.error_code FROM task_reports r WHERE r.task_id = t.task_id \
             ORDER BY r.seq DESC LIMIT 1) AS last_error_code, \
           (SELECT r.site_order_id FROM task_reports r WHERE r.task_id = t.task_id \
             AND r.site_order_id IS NOT NULL ORDER BY r.seq DESC LIMIT 1) AS last_site_order_id, \
           (SELECT CASE a.action WHEN 'cancel' THEN 'cancelled' ELSE 'resolved' END /* store::ended_by */ \
                   || ' by operator ' || a.actor || ': ' || a.reason \
             FROM operator_actions a WHERE a.task_id = t.task_id \
               AND a.action IN ('resolve', 'cancel') \
             ORDER BY a.created_at DESC, a.action_id DESC LIMIT 1) AS ended_by \
         FROM ({} UNION ALL {} UNION ALL {} UNION ALL {}) AS pick \
         JOIN tasks t ON t.task_id = pick.id ORDER BY pick.c, pick.o LIMIT $2",
        branch("t.status = 'stale'"),
        branch("t.status = 'needs_human'"),
        branch("t.status = 'failed' AND t.updated_at >= $1"),
        contradicted,
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(failed_since.to_rfc3339())
        .bind(limit)
        .fetch_all(pool)
        .await?
        .iter()
        .map(|r| {
            Ok(AttentionTask {
                task: TaskRow::decode(r)?.into_summary(),
                last_detail: r.try_get("last_detail")?,
                ended_by: r.try_get("ended_by")?,
                last_error_code: r.try_get("last_error_code")?,
                last_site_order_id: r.try_get("last_site_order_id")?,
            })
        })
        .collect()
}
