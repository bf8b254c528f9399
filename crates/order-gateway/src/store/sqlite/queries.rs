//! The account-query channel on SQLite (`account_queries`, migration 0002): the write transitions
//! (run by the group-commit writer, one SAVEPOINT each, like the order ops) and the reads (on the
//! read pool). Every transition asks `QueryStatus::transition` first and repeats its guard in SQL.

use rakuten_types::order::Page;
use rakuten_types::query::{
    QueryEvent, QueryGrant, QueryKind, QueryResultAck, QueryStatus, QuerySummary, QueryView,
    SubmitQueryAck,
};
use rakuten_types::{QueryId, Timestamp};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection, SqlitePool};
use uuid::Uuid;

use super::rows::ts;
use crate::store::StoreError;
use crate::store::queries::{
    LapsedQuery, NewQuery, QueryFilter, QueryLeaseRequest, QueryResultRecord,
};
use crate::store::query_row::{QueryRow, corrupt, result_columns};

/// Columns every full query read selects.
const COLUMNS: &str = "query_id, site, kind, params_json, status, attempt, max_attempts, \
    lease_owner, lease_token, lease_expires_at, result_json, raw_omitted, error_code, \
    error_message, result_token, result_success, created_at, updated_at, finished_at";

/// Columns of a listing (no result body).
const SUMMARY_COLUMNS: &str = "query_id, site, kind, params_json, status, attempt, max_attempts, \
    lease_owner, lease_token, lease_expires_at, NULL AS result_json, raw_omitted, error_code, \
    error_message, result_token, result_success, created_at, updated_at, finished_at";

fn opt_ts(s: Option<String>) -> Result<Option<Timestamp>, StoreError> {
    s.as_deref().map(ts).transpose()
}

/// Decodes a row selected with [`COLUMNS`] or [`SUMMARY_COLUMNS`].
fn decode_row(row: &SqliteRow) -> Result<QueryRow, StoreError> {
    let id: String = row.try_get("query_id")?;
    let kind: String = row.try_get("kind")?;
    let status: String = row.try_get("status")?;
    let raw_omitted: i64 = row.try_get("raw_omitted")?;
    let result_success: Option<i64> = row.try_get("result_success")?;
    Ok(QueryRow {
        query_id: QueryId::parse(&id).map_err(|e| corrupt("query_id", e))?,
        site: row.try_get("site")?,
        kind: kind.parse().map_err(|e| corrupt("kind", e))?,
        params_json: row.try_get("params_json")?,
        status: status.parse().map_err(|e| corrupt("status", e))?,
        attempt: row.try_get("attempt")?,
        max_attempts: row.try_get("max_attempts")?,
        lease_owner: row.try_get("lease_owner")?,
        lease_token: row.try_get("lease_token")?,
        lease_expires_at: opt_ts(row.try_get("lease_expires_at")?)?,
        result_json: row.try_get("result_json")?,
        raw_omitted: raw_omitted != 0,
        error_code: row.try_get("error_code")?,
        error_message: row.try_get("error_message")?,
        result_token: row.try_get("result_token")?,
        result_success: result_success.map(|v| v != 0),
        created_at: ts(&row.try_get::<String, _>("created_at")?)?,
        updated_at: ts(&row.try_get::<String, _>("updated_at")?)?,
        finished_at: opt_ts(row.try_get("finished_at")?)?,
    })
}

async fn load(conn: &mut SqliteConnection, id: &QueryId) -> Result<Option<QueryRow>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM account_queries WHERE query_id = ?");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(id.as_str())
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(decode_row).transpose()
}

/// `POST /api/account/queries`: insert or find.
pub(crate) async fn query_insert(
    conn: &mut SqliteConnection,
    q: NewQuery,
    now: Timestamp,
) -> Result<SubmitQueryAck, StoreError> {
    let now_s = now.to_rfc3339();
    let inserted = sqlx::query(
        "INSERT INTO account_queries (query_id, site, kind, params_json, status, attempt, \
         max_attempts, created_at, updated_at) VALUES (?, ?, ?, ?, 'queued', 0, ?, ?, ?) \
         ON CONFLICT (query_id) DO NOTHING",
    )
    .bind(q.query_id.as_str())
    .bind(&q.site)
    .bind(q.kind.as_str())
    .bind(&q.params_json)
    .bind(q.max_attempts)
    .bind(&now_s)
    .bind(&now_s)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if inserted == 1 {
        return Ok(SubmitQueryAck {
            query_id: q.query_id,
            status: QueryStatus::Queued,
            created: true,
        });
    }
    let existing = load(conn, &q.query_id)
        .await?
        .ok_or_else(|| StoreError::QueryNotFound(q.query_id.clone()))?;
    // Same write op as the insert: site, kind and params never change after insert.
    crate::store::queries::check_same_query(
        &q,
        &existing.site,
        existing.kind,
        &existing.params_json,
    )?;
    Ok(SubmitQueryAck {
        query_id: existing.query_id,
        status: existing.status,
        created: false,
    })
}

/// `GET /api/account/queries/lease`: one attempt, one statement. The TTL guard
/// (`created_at > created_after`) is part of the claim itself.
pub(crate) async fn query_lease_next(
    conn: &mut SqliteConnection,
    req: QueryLeaseRequest,
    now: Timestamp,
) -> Result<Option<QueryGrant>, StoreError> {
    QueryStatus::Queued.transition(QueryEvent::Lease)?;
    let token = Uuid::now_v7().to_string();
    let expires = now.plus(req.ttl);
    let now_s = now.to_rfc3339();
    let sql = format!(
        "UPDATE account_queries SET status = 'leased', attempt = attempt + 1, lease_owner = ?, \
         lease_token = ?, lease_expires_at = ?, updated_at = ? \
         WHERE query_id = (SELECT query_id FROM account_queries WHERE status = 'queued' \
           AND created_at > ? AND (? IS NULL OR site = ?) ORDER BY created_at, rowid LIMIT 1) \
         AND status = 'queued' AND created_at > ? RETURNING {COLUMNS}"
    );
    let created_after = req.created_after.to_rfc3339();
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(req.worker_id.as_str())
        .bind(&token)
        .bind(expires.to_rfc3339())
        .bind(&now_s)
        .bind(&created_after)
        .bind(req.site.clone())
        .bind(req.site.clone())
        .bind(&created_after)
        .fetch_optional(&mut *conn)
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let row = decode_row(&row)?;
    Ok(Some(QueryGrant {
        params: row.params()?,
        query_id: row.query_id,
        site: row.site,
        kind: row.kind,
        attempt: row.attempt,
        lease_expires_at: expires,
        lease_token: token,
    }))
}

/// `POST /api/account/queries/{id}/result`.
pub(crate) async fn query_record_result(
    conn: &mut SqliteConnection,
    rec: QueryResultRecord,
    now: Timestamp,
) -> Result<QueryResultAck, StoreError> {
    let row = load(conn, &rec.query_id)
        .await?
        .ok_or_else(|| StoreError::QueryNotFound(rec.query_id.clone()))?;
    if let Some(ack) = row.check_result(&rec, now)? {
        return Ok(ack);
    }
    let (event, result_json, raw_omitted, error_code, error_message) = result_columns(rec.outcome);
    let next = row.status.transition(event)?;
    let now_s = now.to_rfc3339();
    let done = sqlx::query(
        "UPDATE account_queries SET status = ?, result_json = ?, raw_omitted = ?, error_code = ?, \
         error_message = ?, result_token = lease_token, result_success = ?, \
         updated_at = ?, finished_at = ? \
         WHERE query_id = ? AND status = 'leased' AND lease_owner = ? AND lease_token = ? \
         AND lease_expires_at > ?",
    )
    .bind(next.as_str())
    .bind(result_json)
    .bind(i64::from(raw_omitted))
    .bind(error_code)
    .bind(error_message.clone())
    .bind(i64::from(rec.reported_success))
    .bind(&now_s)
    .bind(&now_s)
    .bind(row.query_id.as_str())
    .bind(rec.worker_id.as_str())
    .bind(row.lease_token.clone())
    .bind(&now_s)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if done != 1 {
        return Err(StoreError::QueryLeaseInvalid(
            "the lease changed concurrently".into(),
        ));
    }
    Ok(QueryResultAck {
        query_id: row.query_id,
        status: next,
        raw_omitted,
        duplicate: false,
        error_code,
        error_message,
    })
}

/// The sweeper's redelivery: lapsed leases → `queued` (attempts left) or `failed`.
pub(crate) async fn query_requeue_expired_leases(
    conn: &mut SqliteConnection,
    now: Timestamp,
) -> Result<Vec<LapsedQuery>, StoreError> {
    let now_s = now.to_rfc3339();
    let sql = format!(
        "SELECT {COLUMNS} FROM account_queries WHERE status = 'leased' AND lease_expires_at <= ? \
         ORDER BY lease_expires_at LIMIT 1000"
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(&now_s)
        .fetch_all(&mut *conn)
        .await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let row = decode_row(&r)?;
        let attempts_left = row.attempt < row.max_attempts;
        let next = row
            .status
            .transition(QueryEvent::LeaseLapsed { attempts_left })?;
        let done = if next == QueryStatus::Queued {
            sqlx::query(
                "UPDATE account_queries SET status = 'queued', lease_token = NULL, \
                 lease_expires_at = NULL, updated_at = ? WHERE query_id = ? \
                 AND status = 'leased' AND lease_token = ? AND lease_expires_at <= ? \
                 AND attempt < max_attempts",
            )
            .bind(&now_s)
            .bind(row.query_id.as_str())
            .bind(row.lease_token.clone())
            .bind(&now_s)
            .execute(&mut *conn)
            .await?
            .rows_affected()
        } else {
            sqlx::query(
                "UPDATE account_queries SET status = 'failed', error_code = NULL, \
                 error_message = ?, updated_at = ?, finished_at = ? WHERE query_id = ? \
                 AND status = 'leased' AND lease_token = ? AND lease_expires_at <= ?",
            )
            .bind(format!(
                "attempts exhausted: the lease lapsed on each of {} attempts without a result",
                row.attempt
            ))
            .bind(&now_s)
            .bind(&now_s)
            .bind(row.query_id.as_str())
            .bind(row.lease_token.clone())
            .bind(&now_s)
            .execute(&mut *conn)
            .await?
            .rows_affected()
        };
        if done == 1 {
            out.push(LapsedQuery {
                query_id: row.query_id,
                status: next,
                attempt: row.attempt,
                lease_owner: row.lease_owner,
            });
        }
    }
    Ok(out)
}

/// The sweeper's TTL: queued or leased queries created at or before `created_before` → `expired`.
pub(crate) async fn query_mark_expired(
    conn: &mut SqliteConnection,
    created_before: Timestamp,
    now: Timestamp,
) -> Result<Vec<QueryId>, StoreError> {
    for s in [QueryStatus::Queued, QueryStatus::Leased] {
        s.transition(QueryEvent::TtlExpire)?;
    }
    let now_s = now.to_rfc3339();
    let ids: Vec<String> = sqlx::query_scalar(
        "UPDATE account_queries SET status = 'expired', lease_token = NULL, \
         lease_expires_at = NULL, error_code = NULL, \
         error_message = 'older than RAKUTEN_QUERY_TTL_SECONDS; never leased again', \
         updated_at = ?, finished_at = ? \
         WHERE rowid IN (SELECT rowid FROM account_queries WHERE status IN ('queued','leased') \
           AND created_at <= ? LIMIT 1000) \
         AND status IN ('queued','leased') RETURNING query_id",
    )
    .bind(&now_s)
    .bind(&now_s)
    .bind(created_before.to_rfc3339())
    .fetch_all(&mut *conn)
    .await?;
    ids.iter()
        .map(|s| QueryId::parse(s).map_err(|e| corrupt("query_id", e)))
        .collect()
}

/// The sweeper's retention: terminal queries finished before the cutoff are deleted.
pub(crate) async fn query_delete_terminal_before(
    conn: &mut SqliteConnection,
    finished_before: Timestamp,
) -> Result<u64, StoreError> {
    Ok(sqlx::query(
        "DELETE FROM account_queries WHERE rowid IN (SELECT rowid FROM account_queries \
         WHERE status IN ('succeeded','failed','expired') AND finished_at < ? LIMIT 1000) \
         AND status IN ('succeeded','failed','expired')",
    )
    .bind(finished_before.to_rfc3339())
    .execute(&mut *conn)
    .await?
    .rows_affected())
}

/// Whether a queued, unexpired query exists (the long-poll's fallback check).
pub(crate) async fn query_leasable_exists(
    pool: &SqlitePool,
    site: Option<&str>,
    created_after: Timestamp,
) -> Result<bool, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM account_queries WHERE status = 'queued' \
         AND created_at > ? AND (? IS NULL OR site = ?))",
    )
    .bind(created_after.to_rfc3339())
    .bind(site)
    .bind(site)
    .fetch_one(pool)
    .await?)
}

pub(crate) async fn query_get(
    pool: &SqlitePool,
    id: &QueryId,
) -> Result<Option<QueryView>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM account_queries WHERE query_id = ?");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(id.as_str())
        .fetch_optional(pool)
        .await?;
    row.as_ref()
        .map(|r| decode_row(r).and_then(QueryRow::into_view))
        .transpose()
}

pub(crate) async fn query_list(
    pool: &SqlitePool,
    f: QueryFilter,
) -> Result<Page<QuerySummary>, StoreError> {
    let status = f.status.map(QueryStatus::as_str);
    let kind = f.kind.map(QueryKind::as_str);
    let mut conn = pool.acquire().await?;
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let total: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM account_queries WHERE (? IS NULL OR status = ?) \
         AND (? IS NULL OR kind = ?)",
    )
    .bind(status)
    .bind(status)
    .bind(kind)
    .bind(kind)
    .fetch_one(&mut *tx)
    .await?;
    let sql = format!(
        "SELECT {SUMMARY_COLUMNS} FROM account_queries WHERE (? IS NULL OR status = ?) \
         AND (? IS NULL OR kind = ?) ORDER BY created_at, rowid LIMIT ? OFFSET ?"
    );
    let items = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(status)
        .bind(status)
        .bind(kind)
        .bind(kind)
        .bind(f.limit)
        .bind(f.offset)
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|r| decode_row(r).and_then(QueryRow::into_summary))
        .collect::<Result<Vec<_>, _>>()?;
    tx.commit().await?;
    Ok(Page {
        items,
        total,
        limit: f.limit,
        offset: f.offset,
    })
}
