//! The operator's routes: alert records, resolve and cancel of a task, the worker list
//! and retirement. Every action is a conditional update refused with 6003 from any other status,
//! and writes an `operator_actions` row (who, what, when, why, before → after) that the task's
//! detail shows. Who: the caller's token name ([`Actor`]). Operators only.

use axum::extract::State;
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use rakuten_edge::query_guard::unknown_value;
use rakuten_types::alert::{
    AlertKind, AlertView, CancelTask, OperatorActionAck, OperatorActionView, ResolveTask,
    WorkerView,
};
use rakuten_types::order::Page;
use rakuten_types::{Envelope, TaskId, WorkerId};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::http::auth::{Actor, Guarded, OPERATOR_ONLY, guarded};
use crate::http::checks::check_reason;
use crate::http::error::{ApiError, ApiResult, ErrorEnvelope};
use crate::http::extract::{ApiJson, ApiPath, ApiQuery};
use crate::state::AppState;
use crate::store::operator::{AlertFilter, CancelRequest, ResolveRequest, RetireRequest};

/// The operator routes (under `/api`, behind the Bearer middleware): operators only.
pub fn router() -> Router<AppState> {
    guarded(table())
}

/// The access table of [`router`]: operators only.
pub fn table() -> Vec<Guarded> {
    vec![
        ("/api/alerts", get(list_alerts), OPERATOR_ONLY),
        (
            "/api/orders/{task_id}/resolve",
            post(resolve),
            OPERATOR_ONLY,
        ),
        ("/api/orders/{task_id}/cancel", post(cancel), OPERATOR_ONLY),
        ("/api/workers", get(list_workers), OPERATOR_ONLY),
        ("/api/workers/{worker_id}", delete(retire), OPERATOR_ONLY),
    ]
}

/// Query of `GET /api/alerts`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AlertQuery {
    /// `open` (default) or `all`.
    #[param(schema_with = alert_state)]
    pub state: Option<String>,
    /// Only this kind.
    #[param(value_type = Option<AlertKind>)]
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

/// `state` of `GET /api/alerts`.
fn alert_state() -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .description(Some("`open` (default) or `all`."))
        .enum_values(Some(["open", "all"]))
        .build()
}

/// Alert records, newest first.
#[utoipa::path(
    get, path = "/api/alerts", tag = "operator",
    params(AlertQuery),
    responses(
        (status = 200, body = Envelope<Page<AlertView>>),
        (status = 422, description = "unknown state or kind, bad limit/offset (1003)", body = ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn list_alerts(
    State(st): State<AppState>,
    ApiQuery(q): ApiQuery<AlertQuery>,
) -> ApiResult<Page<AlertView>> {
    let open_only = match q.state.as_deref() {
        None | Some("open") => true,
        Some("all") => false,
        Some(other) => {
            return Err(ApiError::Validation(unknown_value(
                "state",
                other,
                &["open", "all"],
            )));
        }
    };
    let kind = q
        .kind
        .as_deref()
        .map(|s| {
            s.parse::<AlertKind>().map_err(|_| {
                let allowed = AlertKind::ALL.map(AlertKind::as_str);
                ApiError::Validation(unknown_value("kind", s, &allowed))
            })
        })
        .transpose()?;
    let (limit, offset) = crate::http::page::page_bounds(q.limit, q.offset)?;
    let page = st
        .ops
        .alert_list(AlertFilter {
            open_only,
            kind,
            limit,
            offset,
        })
        .await?;
    Ok(Json(Envelope::ok(crate::http::page::within_byte_bound(
        page,
    ))))
}

/// Resolve a `stale` or `needs_human` task by hand, after checking the site: `succeeded` or
/// `failed`, with a reason. Also corrects a `succeeded` or `failed` task while its latest reported
/// state contradicts it (D-late-report-contradiction-alert); 6003 from any other status.
#[utoipa::path(
    post, path = "/api/orders/{task_id}/resolve", tag = "operator",
    params(("task_id" = TaskId, Path, description = "task id")),
    request_body = ResolveTask,
    responses(
        (status = 200, body = Envelope<OperatorActionAck>),
        (status = 404, description = "no such task (6001)", body = ErrorEnvelope),
        (status = 409, description = "not stale or needs_human, nor an ended task whose latest reported state contradicts its outcome (6003)", body = ErrorEnvelope),
        (status = 422, description = "missing reason, outcome not succeeded/failed, or contradicting the state given or, without one, the latest reported state (1003)", body = ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn resolve(
    State(st): State<AppState>,
    actor: Actor,
    ApiPath(task_id): ApiPath<TaskId>,
    ApiJson(body): ApiJson<ResolveTask>,
) -> ApiResult<OperatorActionAck> {
    let reason = check_reason(&body.reason)?;
    if body.outcome == rakuten_types::Outcome::NeedsHuman {
        return Err(ApiError::Validation(
            "outcome must be succeeded or failed: a resolve is a person's verdict".into(),
        ));
    }
    body.outcome
        .check_fits_state(body.state)
        .map_err(ApiError::Validation)?;
    if let Some(s) = &body.site_order_id
        && (s.is_empty() || s.chars().count() > 128 || s.chars().any(char::is_control))
    {
        return Err(ApiError::Validation(
            "site_order_id must be 1 to 128 characters without control characters".into(),
        ));
    }
    let ack = st
        .ops
        .task_resolve(
            ResolveRequest {
                task_id,
                outcome: body.outcome,
                reason,
                actor: actor.name,
                site_order_id: body.site_order_id,
                state: body.state,
            },
            st.clock.now(),
        )
        .await?;
    tracing::info!(task_id = %ack.task_id, status = %ack.status, actor = %ack.action.actor, "operator resolved a task");
    Ok(Json(Envelope::ok(ack)))
}

/// Cancel a queued task (→ `failed`), with a reason; 6003 from any other status (a lease that
/// won the race included).
#[utoipa::path(
    post, path = "/api/orders/{task_id}/cancel", tag = "operator",
    params(("task_id" = TaskId, Path, description = "task id")),
    request_body = CancelTask,
    responses(
        (status = 200, body = Envelope<OperatorActionAck>),
        (status = 404, description = "no such task (6001)", body = ErrorEnvelope),
        (status = 409, description = "not queued (6003)", body = ErrorEnvelope),
        (status = 422, description = "missing reason (1003)", body = ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn cancel(
    State(st): State<AppState>,
    actor: Actor,
    ApiPath(task_id): ApiPath<TaskId>,
    ApiJson(body): ApiJson<CancelTask>,
) -> ApiResult<OperatorActionAck> {
    let reason = check_reason(&body.reason)?;
    let ack = st
        .ops
        .task_cancel(
            CancelRequest {
                task_id,
                reason,
                actor: actor.name,
            },
            st.clock.now(),
        )
        .await?;
    tracing::info!(task_id = %ack.task_id, actor = %ack.action.actor, "operator cancelled a queued task");
    Ok(Json(Envelope::ok(ack)))
}

/// Query of `GET /api/workers`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WorkerQuery {
    /// Page size, default 50, larger values are clamped to 200. A page also ends before its
    /// items pass 1 MiB of JSON; the answer's `limit` is the size used: continue at
    /// `offset + limit`.
    #[param(minimum = 1)]
    pub limit: Option<i64>,
    /// Items to skip, default 0.
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

/// Known workers, one page with the count of all (`total`): those holding a task first, then
/// serving ones, then retired ones, each most recently seen first (D-worker-list-pages).
#[utoipa::path(
    get, path = "/api/workers", tag = "operator",
    params(WorkerQuery),
    responses(
        (status = 200, body = Envelope<Page<WorkerView>>),
        (status = 422, description = "bad limit/offset (1003)", body = ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn list_workers(
    State(st): State<AppState>,
    ApiQuery(q): ApiQuery<WorkerQuery>,
) -> ApiResult<Page<WorkerView>> {
    let (limit, offset) = crate::http::page::page_bounds(q.limit, q.offset)?;
    let now = st.clock.now();
    let offline_after = st.settings.worker_offline_alert_seconds;
    let page = st.ops.worker_list(limit, offset).await?;
    let items = page
        .items
        .into_iter()
        .map(|w| {
            let secs = now.seconds_since(w.last_seen_at);
            WorkerView {
                worker_id: w.worker_id,
                last_seen_at: w.last_seen_at,
                last_seen_seconds: secs,
                offline: secs > offline_after,
                retired: w.retired_at.is_some(),
                active_task: w.active_task,
            }
        })
        .collect();
    Ok(Json(Envelope::ok(crate::http::page::within_byte_bound(
        Page {
            items,
            total: page.total,
            limit: page.limit,
            offset: page.offset,
        },
    ))))
}

/// Query of `DELETE /api/workers/{worker_id}`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RetireQuery {
    /// Why (required).
    #[param(value_type = Option<rakuten_types::schema::Reason>, required = true)]
    pub reason: Option<String>,
}

/// Retire a worker: gone from `/health` and from `worker_offline` alerts until it polls again.
#[utoipa::path(
    delete, path = "/api/workers/{worker_id}", tag = "operator",
    params(("worker_id" = WorkerId, Path, description = "worker id"), RetireQuery),
    responses(
        (status = 200, body = Envelope<OperatorActionView>),
        (status = 404, description = "no such worker (1005)", body = ErrorEnvelope),
        (status = 409, description = "already retired (1006); the message says since when", body = ErrorEnvelope),
        (status = 422, description = "missing reason (1003)", body = ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn retire(
    State(st): State<AppState>,
    actor: Actor,
    ApiPath(worker_id): ApiPath<WorkerId>,
    ApiQuery(q): ApiQuery<RetireQuery>,
) -> ApiResult<OperatorActionView> {
    let reason = check_reason(q.reason.as_deref().unwrap_or(""))?;
    let action = st
        .ops
        .worker_retire(
            RetireRequest {
                worker_id,
                reason,
                actor: actor.name,
            },
            st.clock.now(),
        )
        .await?;
    Ok(Json(Envelope::ok(action)))
}
