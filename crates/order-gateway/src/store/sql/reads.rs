//! Order task reads. SQLite runs them on its read pool (`query_only` connections that in WAL mode
//! never block the writer); `task_get`, the listing and `health_snapshot` each read one snapshot
//! (the dialect's `READ_SNAPSHOT`), so their counts and pages agree.

use rakuten_types::order::{Page, TaskDetail, TaskSummary};
use rakuten_types::{TaskId, TaskStatus, Timestamp, WorkerId};
use sqlx::Row;

use super::tasks::gate_free;
use super::{Conn, Db, Pool};
use crate::settings::LeaseScope;
use crate::store::dialect::Dialect;
use crate::store::sql::rows::{TASK_COLUMNS, TASK_LIST_COLUMNS, TaskRow, decode_report, ts};
use crate::store::sql::{eq_if_set, oldest_first_page};
use crate::store::{
    AttentionTask, COUNT_CAP, HEALTH_WORKERS_LISTED, HealthSnapshot, Seek, SeekCursor, SeekPage,
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

/// One page of `SELECT columns FROM from_table` where each `(column, value)` filter that is set
/// matches, oldest first, with the total count, both read from one snapshot. `prefix`: the table
/// alias with its dot, or empty.
pub(crate) async fn filtered_page<T>(
    pool: &Pool,
    columns: &str,
    from_table: &str,
    prefix: &str,
    filters: [(&str, Option<&str>); 2],
    (limit, offset): (i64, i64),
    decode: impl Fn(&<Db as sqlx::Database>::Row) -> Result<T, StoreError>,
) -> Result<Page<T>, StoreError> {
    let [(col1, val1), (col2, val2)] = filters;
    let filter = format!("{} AND {}", eq_if_set(col1, 1), eq_if_set(col2, 2));
    let mut tx = pool.begin_with(Db::READ_SNAPSHOT).await?;
    let total: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT COUNT(*) FROM {from_table} WHERE {filter}"
    )))
    .bind(val1)
    .bind(val2)
    .fetch_one(&mut *tx)
    .await?;
    let sql = format!(
        "SELECT {columns} FROM {from_table} WHERE {filter} {}",
        oldest_first_page::<Db>(prefix, 3)
    );
    let items = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(val1)
        .bind(val2)
        .bind(limit)
        .bind(offset)
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(decode)
        .collect::<Result<Vec<_>, _>>()?;
    tx.commit().await?;
    Ok(Page {
        items,
        total,
        limit,
        offset,
    })
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

/// `SELECT COUNT(*)` of at most [`COUNT_CAP`] + 1 rows of `FROM {from_where}` taken in
/// `order_by` order: an index walk that stops at the cap instead of counting a large table. The
/// order is the list's keyset order on purpose: it names the index to walk. Without it
/// PostgreSQL's generic plan of a prepared statement (the status is a parameter) scanned the
/// whole table, 20 ms for a status with no task and 87 ms for the overview's seven counts at
/// 100,000 tasks (D-console-keyset-paging).
pub(crate) fn capped_count(from_where: &str, order_by: &str) -> String {
    format!(
        "SELECT COUNT(*) FROM (SELECT 1 FROM {from_where} ORDER BY {order_by} LIMIT {}) AS capped",
        COUNT_CAP + 1
    )
}

/// One keyset page of `SELECT columns FROM from_table` where each `(column, value)` filter that is
/// set matches, in `(created_at, insertion order)` order starting at `seek`, with a capped total
/// and whether rows precede and follow it — all read from one snapshot. Each read is an index seek
/// plus at most `limit + 1` rows (`idx_tasks_pending`/`idx_tasks_created` and their account-query
/// twins, migrations 0005 and 0007), so a deep page costs what the first one does. `prefix`: the
/// table alias with its dot, or empty.
pub(crate) async fn seek_page<T>(
    pool: &Pool,
    columns: &str,
    from_table: &str,
    prefix: &str,
    filters: [(&str, Option<&str>); 2],
    (seek, limit): (&Seek, i64),
    decode: impl Fn(&<Db as sqlx::Database>::Row) -> Result<T, StoreError>,
) -> Result<SeekPage<T>, StoreError> {
    seek_page_by(pool, columns, from_table, prefix, "created_at", filters, (seek, limit), decode).await
}

/// [`seek_page`] in `(time_column, insertion order)` order instead of `created_at`'s (the alerts
/// page pages by `raised_at`).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn seek_page_by<T>(
    pool: &Pool,
    columns: &str,
    from_table: &str,
    prefix: &str,
    time_column: &str,
    filters: [(&str, Option<&str>); 2],
    (seek, limit): (&Seek, i64),
    decode: impl Fn(&<Db as sqlx::Database>::Row) -> Result<T, StoreError>,
) -> Result<SeekPage<T>, StoreError> {
    let [(col1, val1), (col2, val2)] = filters;
    // Each filter is written as the equality alone when set (so the planner picks the
    // `(status, created_at…)` index — `eq_if_set`'s `IS NULL OR` form hides it from SQLite), and
    // as a constant-true test of its parameter when not (PostgreSQL refuses an unused parameter).
    let term = |col: &str, val: Option<&str>, n: usize| match val {
        Some(_) => format!("{col} = ${n}"),
        None => format!("CAST(${n} AS TEXT) IS NULL"),
    };
    let filter = format!("{} AND {}", term(col1, val1, 1), term(col2, val2, 2));
    let created = format!("{prefix}{time_column}");
    let ord = format!("{prefix}{}", Db::INSERTION_ORDER);
    // Rows strictly after / before the position bound at $3 (created_at) and $4 (order), written
    // with a leading range on `created_at` so both engines seek the index to it.
    let after = format!("{created} >= $3 AND ({created} > $3 OR {ord} > $4)");
    let before = format!("{created} <= $3 AND ({created} < $3 OR {ord} < $4)");
    let mut tx = pool.begin_with(Db::READ_SNAPSHOT).await?;
    let total: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(capped_count(
        &format!("{from_table} WHERE {filter}"),
        &format!("{created}, {ord}"),
    )))
    .bind(val1)
    .bind(val2)
    .fetch_one(&mut *tx)
    .await?;
    let (bound, cursor, descending) = match seek {
        Seek::Oldest => (None, None, false),
        Seek::After(c) => (Some(&after), Some(c), false),
        Seek::Before(c) => (Some(&before), Some(c), true),
        Seek::Newest => (None, None, true),
    };
    let dir = if descending { " DESC" } else { "" };
    let sql = format!(
        "SELECT {columns}, {created} AS seek_created, {ord} AS seek_ord FROM {from_table} \
         WHERE {filter}{} ORDER BY {created}{dir}, {ord}{dir} LIMIT {}",
        bound.map(|b| format!(" AND {b}")).unwrap_or_default(),
        limit + 1
    );
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(val1).bind(val2);
    if let Some(c) = cursor {
        q = q.bind(c.created_at().to_owned()).bind(c.ord());
    }
    let rows = q.fetch_all(&mut *tx).await?;
    let more = rows.len() as i64 > limit;
    let mut items = Vec::with_capacity(rows.len());
    let mut cursors = Vec::with_capacity(rows.len());
    for r in rows.iter().take(limit.max(0) as usize) {
        items.push(decode(r)?);
        cursors.push(SeekCursor::new(r.try_get("seek_created")?, r.try_get("seek_ord")?));
    }
    if descending {
        items.reverse();
        cursors.reverse();
    }
    // The side this read did not walk: one index probe from the page's edge.
    let (older, newer) = match seek {
        Seek::Oldest => (false, more),
        Seek::Newest => (more, false),
        Seek::After(c) => {
            let edge = cursors.first().unwrap_or(c);
            (beyond(&mut tx, from_table, &filter, &before, (val1, val2), edge).await?, more)
        }
        Seek::Before(c) => {
            let edge = cursors.last().unwrap_or(c);
            (more, beyond(&mut tx, from_table, &filter, &after, (val1, val2), edge).await?)
        }
    };
    tx.commit().await?;
    Ok(SeekPage {
        items,
        edges: cursors.first().cloned().zip(cursors.last().cloned()),
        older,
        newer,
        total,
    })
}

/// Whether a row matching `filter` lies on `side` (`after`/`before` of [`seek_page`]) of `edge`.
async fn beyond(
    conn: &mut Conn,
    from_table: &str,
    filter: &str,
    side: &str,
    (val1, val2): (Option<&str>, Option<&str>),
    edge: &SeekCursor,
) -> Result<bool, StoreError> {
    let sql = format!("SELECT EXISTS (SELECT 1 FROM {from_table} WHERE {filter} AND {side})");
    Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(val1)
        .bind(val2)
        .bind(edge.created_at().to_owned())
        .bind(edge.ord())
        .fetch_one(&mut *conn)
        .await?)
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
        super::tasks::before_deadline("t", 2)
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
         FROM ({} UNION ALL {} UNION ALL {}) AS pick JOIN tasks t ON t.task_id = pick.id \
         ORDER BY pick.c, pick.o LIMIT $2",
        branch("t.status = 'stale'"),
        branch("t.status = 'needs_human'"),
        branch("t.status = 'failed' AND t.updated_at >= $1"),
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
