//! The account-query channel on PostgreSQL (`account_queries`, migration 0002): the write
//! transitions (each in its own transaction, see [`super::PgStore`]) and the reads. Every
//! transition asks `QueryStatus::transition` first and repeats its guard in SQL. Rows are picked
//! `FOR UPDATE SKIP LOCKED` (lease, sweeps), so instances sharing the table never lease one query
//! twice nor sweep one row twice; a result locks its row (`FOR UPDATE`) before it checks the
//! lease. A new or redelivered query is followed, after the commit, by a `NOTIFY` on
//! [`super::QUERIES_CHANNEL`] (sent by [`super::PgStore`]).

use rakuten_types::order::Page;
use rakuten_types::query::{
    QueryEvent, QueryGrant, QueryKind, QueryResultAck, QueryStatus, QuerySummary, QueryView,
    SubmitQueryAck,
};
use rakuten_types::{QueryId, Timestamp};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, PgPool, Row};
use uuid::Uuid;

use crate::store::StoreError;
use crate::store::queries::{
    LapsedQuery, NewQuery, QueryFilter, QueryLeaseRequest, QueryResultRecord,
};
use crate::store::query_row::{QueryRow, corrupt, result_columns};
use crate::store::sqlite::rows::{decode_ts, ts};

/// Columns every full query read selects.
const COLUMNS: &str = "query_id, site, kind, params_json, status, attempt, max_attempts, \
    lease_owner, lease_token, lease_expires_at, result_json, raw_omitted, error_code, \
    error_message, result_token, result_success, created_at, updated_at, finished_at";

/// Columns of a listing (no result body).
const SUMMARY_COLUMNS: &str = "query_id, site, kind, params_json, status, attempt, max_attempts, \
    lease_owner, lease_token, lease_expires_at, NULL::text AS result_json, raw_omitted, error_code, \
    error_message, result_token, result_success, created_at, updated_at, finished_at";

/// Decodes a row selected with [`COLUMNS`] or [`SUMMARY_COLUMNS`].
fn decode_row(row: &PgRow) -> Result<QueryRow, StoreError> {
    let id: String = row.try_get("query_id")?;
    let kind: String = row.try_get("kind")?;
    let status: String = row.try_get("status")?;
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
        lease_expires_at: decode_ts(row.try_get("lease_expires_at")?)?,
        result_json: row.try_get("result_json")?,
        raw_omitted: row.try_get("raw_omitted")?,
        error_code: row.try_get("error_code")?,
        error_message: row.try_get("error_message")?,
        result_token: row.try_get("result_token")?,
        result_success: row.try_get("result_success")?,
        created_at: ts(&row.try_get::<String, _>("created_at")?)?,
        updated_at: ts(&row.try_get::<String, _>("updated_at")?)?,
        finished_at: decode_ts(row.try_get("finished_at")?)?,
    })
}

async fn load(
    conn: &mut PgConnection,
    id: &QueryId,
    lock: bool,
) -> Result<Option<QueryRow>, StoreError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM account_queries WHERE query_id = $1{}",
        if lock { " FOR UPDATE" } else { "" }
    );
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(id.as_str())
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(decode_row).transpose()
}

/// `POST /api/account/queries`: insert or find.
pub(crate) async fn query_insert(
    conn: &mut PgConnection,
    q: NewQuery,
    now: Timestamp,
) -> Result<SubmitQueryAck, StoreError> {
    let now_s = now.to_rfc3339();
    let inserted = sqlx::query(
        "INSERT INTO account_queries (query_id, site, kind, params_json, status, attempt, \
         max_attempts, created_at, updated_at) VALUES ($1, $2, $3, $4, 'queued', 0, $5, $6, $6) \
         ON CONFLICT (query_id) DO NOTHING",
    )
    .bind(q.query_id.as_str())
    .bind(&q.site)
    .bind(q.kind.as_str())
    .bind(&q.params_json)
    .bind(q.max_attempts)
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
    let existing = load(conn, &q.query_id, false)
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
    conn: &mut PgConnection,
    req: QueryLeaseRequest,
    now: Timestamp,
) -> Result<Option<QueryGrant>, StoreError> {
    QueryStatus::Queued.transition(QueryEvent::Lease)?;
    let token = Uuid::now_v7().to_string();
    let expires = now.plus(req.ttl);
    let sql = format!(
        "UPDATE account_queries SET status = 'leased', attempt = attempt + 1, lease_owner = $1, \
         lease_token = $2, lease_expires_at = $3, updated_at = $4 \
         WHERE query_id = (SELECT query_id FROM account_queries WHERE status = 'queued' \
           AND created_at > $5 AND ($6::text IS NULL OR site = $6) ORDER BY created_at, seq \
           LIMIT 1 FOR UPDATE SKIP LOCKED) \
         AND status = 'queued' AND created_at > $5 RETURNING {COLUMNS}"
    );
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(req.worker_id.as_str())
        .bind(&token)
        .bind(expires.to_rfc3339())
        .bind(now.to_rfc3339())
        .bind(req.created_after.to_rfc3339())
        .bind(req.site.clone())
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
    conn: &mut PgConnection,
    rec: QueryResultRecord,
    now: Timestamp,
) -> Result<QueryResultAck, StoreError> {
    let row = load(conn, &rec.query_id, true)
        .await?
        .ok_or_else(|| StoreError::QueryNotFound(rec.query_id.clone()))?;
    if let Some(ack) = row.check_result(&rec, now)? {
        return Ok(ack);
    }
    let (event, result_json, raw_omitted, error_code, error_message) = result_columns(rec.outcome);
    let next = row.status.transition(event)?;
    let now_s = now.to_rfc3339();
    let done = sqlx::query(
        "UPDATE account_queries SET status = $1, result_json = $2, raw_omitted = $3, \
         error_code = $4, error_message = $5, result_token = lease_token, result_success = $6, \
         updated_at = $7, finished_at = $7 \
         WHERE query_id = $8 AND status = 'leased' AND lease_owner = $9 AND lease_token = $10 \
         AND lease_expires_at > $7",
    )
    .bind(next.as_str())
    .bind(result_json)
    .bind(raw_omitted)
    .bind(error_code)
    .bind(error_message.clone())
    .bind(rec.reported_success)
    .bind(&now_s)
    .bind(row.query_id.as_str())
    .bind(rec.worker_id.as_str())
    .bind(row.lease_token.clone())
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
    conn: &mut PgConnection,
    now: Timestamp,
) -> Result<Vec<LapsedQuery>, StoreError> {
    let now_s = now.to_rfc3339();
    let sql = format!(
        "SELECT {COLUMNS} FROM account_queries WHERE status = 'leased' AND lease_expires_at <= $1 \
         ORDER BY lease_expires_at LIMIT 1000 FOR UPDATE SKIP LOCKED"
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
                 lease_expires_at = NULL, updated_at = $1 WHERE query_id = $2 \
                 AND status = 'leased' AND lease_token = $3 AND lease_expires_at <= $1 \
                 AND attempt < max_attempts",
            )
            .bind(&now_s)
            .bind(row.query_id.as_str())
            .bind(row.lease_token.clone())
            .execute(&mut *conn)
            .await?
            .rows_affected()
        } else {
            sqlx::query(
                "UPDATE account_queries SET status = 'failed', error_code = NULL, \
                 error_message = $1, updated_at = $2, finished_at = $2 WHERE query_id = $3 \
                 AND status = 'leased' AND lease_token = $4 AND lease_expires_at <= $2",
            )
            .bind(format!(
                "attempts exhausted: the lease lapsed on each of {} attempts without a result",
                row.attempt
            ))
            .bind(&now_s)
            .bind(row.query_id.as_str())
            .bind(row.lease_token.clone())
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
    conn: &mut PgConnection,
    created_before: Timestamp,
    now: Timestamp,
) -> Result<Vec<QueryId>, StoreError> {
    for s in [QueryStatus::Queued, QueryStatus::Leased] {
        s.transition(QueryEvent::TtlExpire)?;
    }
    let ids: Vec<String> = sqlx::query_scalar(
        "UPDATE account_queries SET status = 'expired', lease_token = NULL, \
         lease_expires_at = NULL, error_code = NULL, \
         error_message = 'older than RAKUTEN_QUERY_TTL_SECONDS; never leased again', \
         updated_at = $1, finished_at = $1 \
         WHERE query_id IN (SELECT query_id FROM account_queries \
           WHERE status IN ('queued','leased') AND created_at <= $2 LIMIT 1000 \
           FOR UPDATE SKIP LOCKED) \
         AND status IN ('queued','leased') RETURNING query_id",
    )
    .bind(now.to_rfc3339())
    .bind(created_before.to_rfc3339())
    .fetch_all(&mut *conn)
    .await?;
    ids.iter()
        .map(|s| QueryId::parse(s).map_err(|e| corrupt("query_id", e)))
        .collect()
}

/// The sweeper's retention: terminal queries finished before the cutoff are deleted.
pub(crate) async fn query_delete_terminal_before(
    conn: &mut PgConnection,
    finished_before: Timestamp,
) -> Result<u64, StoreError> {
    Ok(sqlx::query(
        "DELETE FROM account_queries WHERE query_id IN (SELECT query_id FROM account_queries \
         WHERE status IN ('succeeded','failed','expired') AND finished_at < $1 LIMIT 1000 \
         FOR UPDATE SKIP LOCKED) AND status IN ('succeeded','failed','expired')",
    )
    .bind(finished_before.to_rfc3339())
    .execute(&mut *conn)
    .await?
    .rows_affected())
}

/// Whether a queued, unexpired query exists (the long-poll's fallback check).
pub(crate) async fn query_leasable_exists(
    pool: &PgPool,
    site: Option<&str>,
    created_after: Timestamp,
) -> Result<bool, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM account_queries WHERE status = 'queued' \
         AND created_at > $1 AND ($2::text IS NULL OR site = $2))",
    )
    .bind(created_after.to_rfc3339())
    .bind(site)
    .fetch_one(pool)
    .await?)
}

pub(crate) async fn query_get(
    pool: &PgPool,
    id: &QueryId,
) -> Result<Option<QueryView>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM account_queries WHERE query_id = $1");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(id.as_str())
        .fetch_optional(pool)
        .await?;
    row.as_ref()
        .map(|r| decode_row(r).and_then(QueryRow::into_view))
        .transpose()
}

pub(crate) async fn query_list(
    pool: &PgPool,
    f: QueryFilter,
) -> Result<Page<QuerySummary>, StoreError> {
    let status = f.status.map(QueryStatus::as_str);
    let kind = f.kind.map(QueryKind::as_str);
    let mut tx = pool
        .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await?;
    let total: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM account_queries WHERE ($1::text IS NULL OR status = $1) \
         AND ($2::text IS NULL OR kind = $2)",
    )
    .bind(status)
    .bind(kind)
    .fetch_one(&mut *tx)
    .await?;
    let sql = format!(
        "SELECT {SUMMARY_COLUMNS} FROM account_queries WHERE ($1::text IS NULL OR status = $1) \
         AND ($2::text IS NULL OR kind = $2) ORDER BY created_at, seq LIMIT $3 OFFSET $4"
    );
    let items = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(status)
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
