//! Paging shared by the task, account-query and alert lists: an offset page with its total
//! ([`filtered_page`], the API's lists) and a keyset page with a capped total ([`seek_page`],
//! the console's lists, D-console-keyset-paging), each read from one snapshot.

use rakuten_types::order::Page;
use sqlx::Row;

use super::{Conn, Db, Pool};
use crate::store::dialect::Dialect;
use crate::store::sql::{eq_if_set, oldest_first_page};
use crate::store::{COUNT_CAP, Seek, SeekCursor, SeekPage, StoreError};

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
    seek_page_by(
        pool,
        columns,
        from_table,
        prefix,
        "created_at",
        filters,
        (seek, limit),
        decode,
    )
    .await
}

/// [`seek_page`] in `(time_column, insertion order)` order instead of `created_at`'s (the alerts
/// page pages by `raised_at`).
// The arguments are the query's parts (columns, table, alias, time column, filters, page,
// decoder); a struct of them would be built once per call site and read no better.
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
        cursors.push(SeekCursor::new(
            r.try_get("seek_created")?,
            r.try_get("seek_ord")?,
        ));
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
            (
                beyond(&mut tx, from_table, &filter, &before, (val1, val2), edge).await?,
                more,
            )
        }
        Seek::Before(c) => {
            let edge = cursors.last().unwrap_or(c);
            (
                more,
                beyond(&mut tx, from_table, &filter, &after, (val1, val2), edge).await?,
            )
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
