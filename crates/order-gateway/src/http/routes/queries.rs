//! The account-query endpoints (§11.2): submit, lease (long-poll), result, get, list. Semantics
//! and their contrast with the order endpoints: [`crate::query_queue`].

use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use rakuten_edge::query_guard::unknown_value;
use rakuten_types::order::Page;
use rakuten_types::query::{
    QueryGrant, QueryKind, QueryResultAck, QueryResultBody, QueryStatus, QuerySummary, QueryView,
    SubmitQuery, SubmitQueryAck,
};
use rakuten_types::{Envelope, QueryId, WorkerId};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::http::auth::{Actor, Guarded, Role, act_as_worker, guarded};
use crate::http::checks::{check_site, lease_wait_and_site};
use crate::http::error::{ApiError, ApiResult, ErrorEnvelope};
use crate::http::extract::{ApiJson, ApiPath, ApiQuery};
use crate::query_queue::{lease_with_wait, prepare_result, validate_submit};
use crate::settings::Settings;
use crate::state::AppState;
use crate::store::StoreError;
use crate::store::queries::{NewQuery, QueryFilter, QueryLeaseRequest, QueryResultRecord};
use crate::telemetry::Channel;

/// Longest `lease_token`, characters.
const MAX_TOKEN_CHARS: usize = 128;

/// The account-query routes (under `/api`, behind the Bearer middleware) and who besides
/// operators may call each. The result route takes bodies up to
/// [`Settings::query_result_body_limit`].
pub fn router(settings: &Settings) -> Router<AppState> {
    guarded(table(settings.query_result_body_limit()))
}

/// The access table of [`router`], the result route taking bodies up to `result_limit` bytes.
pub fn table(result_limit: usize) -> Vec<Guarded> {
    use Role::{Upstream, Worker};
    let result_limit = rakuten_edge::body::BodyLimit::layer(result_limit);
    vec![
        ("/api/account/queries", post(submit), &[Upstream]),
        ("/api/account/queries", get(list), &[Upstream]),
        (
            "/api/account/queries/lease",
            get(lease).head(crate::http::head_takes_no_lease),
            &[Worker],
        ),
        (
            "/api/account/queries/{query_id}",
            get(get_query),
            &[Upstream],
        ),
        (
            "/api/account/queries/{query_id}/result",
            post(result).layer(result_limit),
            &[Worker],
        ),
    ]
}

/// Submit an account query (§11.2). Idempotent on `query_id`; `kind` and `params` are checked
/// here (422), not after a worker took it.
#[utoipa::path(
    post, path = "/api/account/queries", tag = "account queries",
    request_body = SubmitQuery,
    responses(
        (status = 200, description = "created, or the existing query (`created: false`)", body = Envelope<SubmitQueryAck>),
        (status = 409, description = "query_id reused with a different site, kind or params (1006)", body = ErrorEnvelope),
        (status = 413, description = "params over 16 KiB (1004)", body = ErrorEnvelope),
        (status = 422, description = "unknown kind or site, bad params: order_detail without an order_number of 1..64 [0-9A-Za-z-], max_pages outside 1..20, since not RFC 3339 (1003)", body = ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn submit(
    State(st): State<AppState>,
    ApiJson(body): ApiJson<SubmitQuery>,
) -> ApiResult<SubmitQueryAck> {
    check_site(&body.site)?;
    let (kind, params_json) = validate_submit(&body.kind, &body.params)?;
    let query_id = match body.query_id {
        // `GET /api/account/queries/lease` is the long-poll: a query with that id could never be
        // read back.
        Some(id) if id.as_str() == "lease" => {
            return Err(ApiError::Validation(
                "query_id \"lease\" is reserved (it is a route)".into(),
            ));
        }
        Some(id) => id,
        None => QueryId::parse(&uuid::Uuid::now_v7().to_string())
            .map_err(|e| ApiError::Internal(anyhow::Error::new(e)))?,
    };
    let ack = st
        .queries
        .query_insert(
            NewQuery {
                query_id,
                site: body.site,
                kind,
                params_json,
                max_attempts: i64::from(st.settings.query_max_attempts),
            },
            st.clock.now(),
        )
        .await?;
    rakuten_edge::access_log::name_query(ack.query_id.as_str());
    if ack.created {
        st.query_notifier.notify_leasable();
    }
    Ok(Json(Envelope::ok(ack)))
}

/// Query of `GET /api/account/queries/lease`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct QueryLeaseQuery {
    /// The polling worker (required). Its order heartbeat is NOT refreshed.
    pub worker_id: WorkerId,
    /// Seconds to hold the poll when nothing is queued (default 30, fractional allowed, capped
    /// by `RAKUTEN_LEASE_MAX_WAIT_SECONDS`).
    #[param(minimum = 0)]
    pub wait: Option<f64>,
    /// Only queries of this site (`rakuten`).
    #[param(value_type = Option<rakuten_types::schema::Site>)]
    pub site: Option<String>,
}

/// Long-poll for a query lease (§11.2). No concurrency gate: any number of queries may be
/// leased at once, and order leases neither block nor are blocked by it.
#[utoipa::path(
    get, path = "/api/account/queries/lease", tag = "account queries",
    params(QueryLeaseQuery),
    responses(
        (status = 200, description = "a lease (`attempt` 1 on first delivery, +1 per redelivery), or `data: null` after `wait`", body = Envelope<QueryGrant>),
        (status = 422, description = "bad worker_id, wait or site (1003)", body = ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn lease(
    State(st): State<AppState>,
    actor: Actor,
    ApiQuery(q): ApiQuery<QueryLeaseQuery>,
) -> ApiResult<QueryGrant> {
    act_as_worker(&st, &actor, &q.worker_id).await?;
    let wait = lease_wait_and_site(
        q.wait,
        q.site.as_deref(),
        st.settings.lease_max_wait_seconds,
    )?;
    let query_ttl = st.settings.query_ttl();
    let req = QueryLeaseRequest {
        worker_id: q.worker_id,
        site: q.site,
        ttl: st.settings.query_lease_ttl(),
        created_after: st.clock.now().minus(query_ttl),
    };
    let _polling = st.metrics.long_poll(Channel::Queries);
    let grant = lease_with_wait(
        st.queries.as_ref(),
        &st.query_notifier,
        st.clock.as_ref(),
        req,
        query_ttl,
        wait,
        &st.shutdown,
    )
    .await?;
    if grant.is_some() {
        st.metrics.grants(Channel::Queries).increment(1);
    }
    Ok(Json(match grant {
        Some(g) => {
            rakuten_edge::access_log::name_query(g.query_id.as_str());
            Envelope::ok(g)
        }
        None => Envelope::empty(0, "no query"),
    }))
}

/// Record a query's result (§11.2, §11.3). Only the current holder (worker, lease token,
/// unexpired lease) may; a success result over `RAKUTEN_QUERY_RESULT_MAX_BYTES` loses its raw
/// pages (`raw_omitted`), and if still over, the query ends `failed` (the answer says so).
#[utoipa::path(
    post, path = "/api/account/queries/{query_id}/result", tag = "account queries",
    params(("query_id" = QueryId, Path, description = "query id")),
    request_body = QueryResultBody,
    responses(
        (status = 200, description = "stored (or an identical repeat from the same lease: `duplicate: true`)", body = Envelope<QueryResultAck>),
        (status = 404, description = "no such query, or purged after retention (6005)", body = ErrorEnvelope),
        (status = 409, description = "not the current holder: redelivered, superseded token, lease lapsed, or finished (6006); drop the result, do not resend", body = ErrorEnvelope),
        (status = 413, description = "body over twice the result limit plus 64 KiB (1004)", body = ErrorEnvelope),
        (status = 422, description = "worker_id missing, success=true without a result object (1003)", body = ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn result(
    State(st): State<AppState>,
    actor: Actor,
    ApiPath(query_id): ApiPath<QueryId>,
    ApiJson(body): ApiJson<QueryResultBody>,
) -> ApiResult<QueryResultAck> {
    let worker_id = body
        .worker_id
        .ok_or_else(|| ApiError::Validation("worker_id is required".into()))?;
    act_as_worker(&st, &actor, &worker_id).await?;
    if let Some(t) = &body.lease_token
        && (t.is_empty() || t.chars().count() > MAX_TOKEN_CHARS || t.chars().any(char::is_control))
    {
        return Err(ApiError::Validation(
            "lease_token must be 1 to 128 characters without control characters".into(),
        ));
    }
    let outcome = prepare_result(
        body.success,
        body.result,
        body.error_code,
        body.error_message,
        st.settings.query_result_max_bytes,
    )?;
    let rec = QueryResultRecord {
        query_id,
        worker_id,
        lease_token: body.lease_token,
        reported_success: body.success,
        outcome,
    };
    let ack = st.queries.query_record_result(rec, st.clock.now()).await?;
    if !ack.duplicate {
        st.metrics.query_results.increment(1);
    }
    Ok(Json(Envelope::ok(ack)))
}

/// A query with its status and result (§11.2).
#[utoipa::path(
    get, path = "/api/account/queries/{query_id}", tag = "account queries",
    params(("query_id" = QueryId, Path, description = "query id")),
    responses(
        (status = 200, body = Envelope<QueryView>),
        (status = 404, description = "no such query, or purged after retention (6005)", body = ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn get_query(
    State(st): State<AppState>,
    ApiPath(query_id): ApiPath<QueryId>,
) -> ApiResult<QueryView> {
    match st.queries.query_get(&query_id).await? {
        Some(v) => Ok(Json(Envelope::ok(v))),
        None => Err(StoreError::QueryNotFound(query_id).into()),
    }
}

/// Query of `GET /api/account/queries`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct QueryListQuery {
    /// Only this status (`queued`, `leased`, `succeeded`, `failed`, `expired`).
    #[param(value_type = Option<QueryStatus>)]
    pub status: Option<String>,
    /// Only this kind (`order_list`, `order_detail`).
    #[param(value_type = Option<QueryKind>)]
    pub kind: Option<String>,
    /// Page size, default 50, larger values are clamped to 200. A page also ends before its
    /// items pass 1 MiB of JSON; the answer's `limit` is the size used: continue at
    /// `offset + limit`.
    #[param(minimum = 1)]
    pub limit: Option<i64>,
    /// Items to skip, default 0.
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

/// List queries, oldest first, without result bodies (§11.2, for operators).
#[utoipa::path(
    get, path = "/api/account/queries", tag = "account queries",
    params(QueryListQuery),
    responses(
        (status = 200, body = Envelope<Page<QuerySummary>>),
        (status = 422, description = "unknown status or kind, bad limit/offset (1003)", body = ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn list(
    State(st): State<AppState>,
    ApiQuery(q): ApiQuery<QueryListQuery>,
) -> ApiResult<Page<QuerySummary>> {
    // An unknown value is named with every allowed one (D-query-refusal-wording).
    let status = q
        .status
        .as_deref()
        .map(|s| {
            s.parse::<QueryStatus>().map_err(|_| {
                let allowed = QueryStatus::ALL.map(QueryStatus::as_str);
                ApiError::Validation(unknown_value("status", s, &allowed))
            })
        })
        .transpose()?;
    let kind = q
        .kind
        .as_deref()
        .map(|s| {
            s.parse::<QueryKind>().map_err(|_| {
                let allowed = [QueryKind::OrderList, QueryKind::OrderDetail].map(QueryKind::as_str);
                ApiError::Validation(unknown_value("kind", s, &allowed))
            })
        })
        .transpose()?;
    let (limit, offset) = crate::http::page::page_bounds(q.limit, q.offset)?;
    let page = st
        .queries
        .query_list(QueryFilter {
            status,
            kind,
            limit,
            offset,
        })
        .await?;
    Ok(Json(Envelope::ok(crate::http::page::within_byte_bound(
        page,
    ))))
}
