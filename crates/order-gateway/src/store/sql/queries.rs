//! The account-query channel (`account_queries`, migration 0002, §11): the write transitions and
//! the reads. Every transition asks `QueryStatus::transition` first and repeats its guard in SQL.
//! On PostgreSQL rows are picked `FOR UPDATE SKIP LOCKED` (lease, sweeps), so instances sharing
//! the table never lease one query twice nor sweep one row twice, and a result locks its row
//! (`FOR UPDATE`) before it checks the lease.

use rakuten_types::order::Page;
use rakuten_types::query::{
    QueryEvent, QueryGrant, QueryKind, QueryResultAck, QueryStatus, QuerySummary, QueryView,
    SubmitQueryAck,
};
use rakuten_types::{QueryId, Timestamp};
use uuid::Uuid;

use super::{Conn, Db, Pool};
use crate::store::{Seek, SeekPage, StoreError};
use crate::store::dialect::Dialect;
use crate::store::queries::{
    LapsedQuery, NewQuery, QueryFilter, QueryLeaseRequest, QueryResultRecord,
};
use crate::store::sql::query_row::{
    QUERY_COLUMNS, QUERY_SUMMARY_COLUMNS, QueryRow, result_columns,
};
use crate::store::sql::rows::corrupt;
use super::paging::{filtered_page, seek_page};
use crate::store::sql::eq_if_set;

/// Loads a query; `lock` also locks its row until the transaction ends (PostgreSQL).
async fn load(conn: &mut Conn, id: &QueryId, lock: bool) -> Result<Option<QueryRow>, StoreError> {
    let lock = if lock { Db::FOR_UPDATE } else { "" };
    let sql = format!("SELECT {QUERY_COLUMNS} FROM account_queries WHERE query_id = $1{lock}");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(id.as_str())
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(QueryRow::decode).transpose()
}

/// `POST /api/account/queries`: insert or find.
pub(crate) async fn query_insert(
    conn: &mut Conn,
    q: NewQuery,
    now: Timestamp,
) -> Result<SubmitQueryAck, StoreError> {
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
    .bind(now.to_rfc3339())
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
    // Same transaction as the insert: site, kind and params never change after insert.
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
    conn: &mut Conn,
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
           AND created_at > $5 AND {} ORDER BY created_at, {} LIMIT 1{}) \
         AND status = 'queued' AND created_at > $5 RETURNING {QUERY_COLUMNS}",
        eq_if_set("site", 6),
        Db::INSERTION_ORDER,
        Db::SKIP_LOCKED
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
    let row = QueryRow::decode(&row)?;
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
    conn: &mut Conn,
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
    .bind(now.to_rfc3339())
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
    conn: &mut Conn,
    now: Timestamp,
) -> Result<Vec<LapsedQuery>, StoreError> {
    let now_s = now.to_rfc3339();
    let sql = format!(
        "SELECT {QUERY_COLUMNS} FROM account_queries WHERE status = 'leased' \
         AND lease_expires_at <= $1 ORDER BY lease_expires_at LIMIT 1000{}",
        Db::SKIP_LOCKED
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(&now_s)
        .fetch_all(&mut *conn)
        .await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let row = QueryRow::decode(&r)?;
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
    conn: &mut Conn,
    created_before: Timestamp,
    now: Timestamp,
) -> Result<Vec<QueryId>, StoreError> {
    for s in [QueryStatus::Queued, QueryStatus::Leased] {
        s.transition(QueryEvent::TtlExpire)?;
    }
    let sql = format!(
        "UPDATE account_queries SET status = 'expired', lease_token = NULL, \
         lease_expires_at = NULL, error_code = NULL, \
         error_message = 'older than RAKUTEN_QUERY_TTL_SECONDS; never leased again', \
         updated_at = $1, finished_at = $1 \
         WHERE query_id IN (SELECT query_id FROM account_queries \
           WHERE status IN ('queued','leased') AND created_at <= $2 LIMIT 1000{}) \
         AND status IN ('queued','leased') RETURNING query_id",
        Db::SKIP_LOCKED
    );
    let ids: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
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
    conn: &mut Conn,
    finished_before: Timestamp,
) -> Result<u64, StoreError> {
    let sql = format!(
        "DELETE FROM account_queries WHERE query_id IN (SELECT query_id FROM account_queries \
         WHERE status IN ('succeeded','failed','expired') AND finished_at < $1 LIMIT 1000{}) \
         AND status IN ('succeeded','failed','expired')",
        Db::SKIP_LOCKED
    );
    Ok(sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(finished_before.to_rfc3339())
        .execute(&mut *conn)
        .await?
        .rows_affected())
}

/// Whether a queued, unexpired query exists (the long-poll's fallback check).
pub(crate) async fn query_leasable_exists(
    pool: &Pool,
    site: Option<&str>,
    created_after: Timestamp,
) -> Result<bool, StoreError> {
    let sql = format!(
        "SELECT EXISTS (SELECT 1 FROM account_queries WHERE status = 'queued' \
         AND created_at > $1 AND {})",
        eq_if_set("site", 2)
    );
    Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(created_after.to_rfc3339())
        .bind(site)
        .fetch_one(pool)
        .await?)
}

pub(crate) async fn query_get(pool: &Pool, id: &QueryId) -> Result<Option<QueryView>, StoreError> {
    let mut conn = pool.acquire().await?;
    load(&mut conn, id, false)
        .await?
        .map(QueryRow::into_view)
        .transpose()
}

pub(crate) async fn query_list(
    pool: &Pool,
    f: QueryFilter,
) -> Result<Page<QuerySummary>, StoreError> {
    let filters = [
        ("status", f.status.map(QueryStatus::as_str)),
        ("kind", f.kind.map(QueryKind::as_str)),
    ];
    let columns = QUERY_SUMMARY_COLUMNS;
    let page = (f.limit, f.offset);
    filtered_page(pool, columns, "account_queries", "", filters, page, |r| {
        QueryRow::decode(r).and_then(QueryRow::into_summary)
    })
    .await
}

pub(crate) async fn query_seek(
    pool: &Pool,
    status: Option<QueryStatus>,
    kind: Option<QueryKind>,
    seek: Seek,
    limit: i64,
) -> Result<SeekPage<QuerySummary>, StoreError> {
    let filters = [
        ("status", status.map(QueryStatus::as_str)),
        ("kind", kind.map(QueryKind::as_str)),
    ];
    seek_page(pool, QUERY_SUMMARY_COLUMNS, "account_queries", "", filters, (&seek, limit), |r| {
        QueryRow::decode(r).and_then(QueryRow::into_summary)
    })
    .await
}
