//! The order task endpoints (§4.2–§4.6, §5): submit, lease (long-poll), renew, report, reclaim,
//! get, list. Handlers validate input into store requests, call the store, and wake waiting
//! long-polls after commits that may make something leasable.

use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use rakuten_types::order::{
    LeaseGrant, MAX_INTENT_BYTES, MAX_REPORT_TEXT_CHARS, Page, ReclaimTask, RenewAck, RenewLease,
    ReportAck, ReportState, SubmitOrder, SubmitOrderAck, TaskDetail, TaskSummary,
};
use rakuten_types::{Envelope, ErrorCode, Outcome, TaskId, TaskStatus, WorkerId};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::http::auth::{
    Actor, Guarded, OPERATOR_ONLY, Role, act_as_worker, guarded, worker_is_bound_to,
};
use crate::http::checks::{check_reason, check_site, lease_wait_and_site};
use crate::http::error::{ApiError, ApiResult, ErrorEnvelope};
use crate::http::extract::{ApiJson, ApiPath, ApiQuery};
use crate::lease::long_poll::lease_with_wait;
use crate::lease::probe::{self, Step};
use crate::state::AppState;
use crate::store::{
    LeaseAttempt, LeaseRequest, NewReport, NewTask, ReclaimRequest, RenewRequest, TaskFilter,
};
use crate::telemetry::Channel;
use rakuten_edge::query_guard::unknown_value;

/// Longest `lease_token`, characters.
const MAX_TOKEN_CHARS: usize = 128;

/// The order routes (all under `/api`, behind the Bearer middleware) and who besides operators
/// may call each.
pub fn router() -> Router<AppState> {
    guarded(table())
}

/// The access table of [`router`]: path, handlers, who besides operators may call it.
pub fn table() -> Vec<Guarded> {
    use Role::{Upstream, Worker};
    vec![
        ("/api/orders", post(submit), &[Upstream]),
        ("/api/orders", get(list), &[Upstream]),
        (
            "/api/orders/lease",
            get(lease).head(crate::http::head_takes_no_lease),
            &[Worker],
        ),
        // A worker reads only the task it holds (D-worker-reads-held-task).
        ("/api/orders/{task_id}", get(get_task), &[Upstream, Worker]),
        ("/api/orders/{task_id}/renew", post(renew), &[Worker]),
        ("/api/orders/{task_id}/report", post(report), &[Worker]),
        (
            "/api/orders/{task_id}/reclaim",
            post(reclaim),
            OPERATOR_ONLY,
        ),
    ]
}

/// Submit an order intent (§4.2). Idempotent on `task_id`.
#[utoipa::path(
    post, path = "/api/orders", tag = "orders",
    request_body = SubmitOrder,
    responses(
        (status = 200, description = "created, or the existing task (`created: false`)", body = Envelope<SubmitOrderAck>),
        (status = 409, description = "task_id reused with a different site or intent (1006)", body = ErrorEnvelope),
        (status = 413, description = "intent over 64 KiB (1004)", body = ErrorEnvelope),
        (status = 422, description = "invalid body, unknown site, intent that can never be executed, `not_after` not an RFC 3339 timestamp or not in the future for a new task (1003)", body = ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn submit(
    State(st): State<AppState>,
    ApiJson(body): ApiJson<SubmitOrder>,
) -> ApiResult<SubmitOrderAck> {
    check_site(&body.site)?;
    // Pass-through (§4.2): the intent's text is stored exactly as sent, its numbers, key order
    // and spacing untouched (D-intent-verbatim-text); a parsed copy is only checked against the
    // worker's own rules so that what can never be executed is refused now (D-order-intent-rules).
    let intent_json = body.intent.as_str();
    if intent_json.len() > MAX_INTENT_BYTES {
        return Err(ApiError::PayloadTooLarge(format!(
            "intent is {} bytes as sent; the limit is {MAX_INTENT_BYTES}",
            intent_json.len()
        )));
    }
    if !intent_json.starts_with('{') {
        return Err(ApiError::Validation("intent must be a JSON object".into()));
    }
    rakuten_types::intent::OrderIntent::parse_json(&body.intent)
        .map_err(|e| ApiError::Validation(e.to_string()))?;
    let intent_json = intent_json.to_owned();
    let task_id = match body.task_id {
        Some(id) => id,
        None => TaskId::parse(&uuid::Uuid::now_v7().to_string())
            .map_err(|e| ApiError::Internal(anyhow::Error::new(e)))?,
    };
    let task = NewTask {
        task_id,
        site: body.site,
        intent_json,
        // Checked against the clock in the insert itself (D-task-not-after-expired).
        not_after: body.not_after,
    };
    // A long-poll waiting in this process: its lease attempt runs in this submit's transaction,
    // and the grant is handed to it after that one commit (D-handoff-in-submit-commit).
    if let Some(waiter) = st.lease_notifier.take_waiter() {
        let (ack, attempt) = st
            .store
            .task_insert_handing(task, waiter.request().clone(), st.clock.now())
            .await?;
        probe::mark(Step::SubmitCommitted);
        rakuten_edge::access_log::name_task(ack.task_id.as_str());
        match attempt {
            Some(LeaseAttempt::Granted(grant)) => {
                // A poll gone by now leaves its worker a lease that expires to `stale`.
                waiter.hand(grant);
                probe::mark(Step::SubmitNotified);
            }
            _ if ack.created => {
                // The waiter (dropped here) runs an attempt of its own; another may take the task.
                drop(waiter);
                st.lease_notifier.notify_leasable();
                probe::mark(Step::SubmitNotified);
            }
            _ => {}
        }
        probe::mark(Step::SubmitAnswered);
        return Ok(Json(Envelope::ok(ack)));
    }
    let ack = st.store.task_insert(task, st.clock.now()).await?;
    probe::mark(Step::SubmitCommitted);
    rakuten_edge::access_log::name_task(ack.task_id.as_str());
    if ack.created {
        st.lease_notifier.notify_leasable();
        probe::mark(Step::SubmitNotified);
        // The woken long-poll sits in this worker thread's next-task slot, which tokio lets run
        // only when this task yields: without this, after the acknowledgement is written. Its
        // lease reaches the writer first now, the answer waits one task switch (BENCHMARKS.md,
        // hand-off breakdown).
        tokio::task::yield_now().await;
    }
    probe::mark(Step::SubmitAnswered);
    Ok(Json(Envelope::ok(ack)))
}

/// Query of `GET /api/orders/lease`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LeaseQuery {
    /// The polling worker (required); refreshes its heartbeat.
    pub worker_id: WorkerId,
    /// Seconds to hold the poll when nothing is leasable (default 30, fractional allowed, capped
    /// by `RAKUTEN_LEASE_MAX_WAIT_SECONDS`).
    #[param(minimum = 0)]
    pub wait: Option<f64>,
    /// Only tasks of this site (`rakuten`).
    #[param(value_type = Option<rakuten_types::schema::Site>)]
    pub site: Option<String>,
}

/// Long-poll for a lease (§4.3). Returns the worker's own active task first (as a new grant,
/// `lease_count + 1`), else the oldest queued task when no other task is active, else waits.
#[utoipa::path(
    get, path = "/api/orders/lease", tag = "orders",
    params(LeaseQuery),
    responses(
        (status = 200, description = "a grant, or `data: null` after `wait` (code 0, or 6004 when another task is active)", body = Envelope<LeaseGrant>),
        (status = 422, description = "bad worker_id, wait or site (1003)", body = ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn lease(
    State(st): State<AppState>,
    actor: Actor,
    ApiQuery(q): ApiQuery<LeaseQuery>,
) -> ApiResult<LeaseGrant> {
    act_as_worker(&st, &actor, &q.worker_id).await?;
    let wait = lease_wait_and_site(
        q.wait,
        q.site.as_deref(),
        st.settings.lease_max_wait_seconds,
    )?;
    let req = LeaseRequest {
        worker_id: q.worker_id,
        site: q.site,
        ttl: st.settings.lease_ttl(),
        scope: st.settings.lease_scope,
    };
    let _polling = st.metrics.long_poll(Channel::Orders);
    let attempt = lease_with_wait(
        st.store.as_ref(),
        &st.lease_notifier,
        st.clock.as_ref(),
        req,
        wait,
        &st.shutdown,
    )
    .await?;
    if matches!(attempt, LeaseAttempt::Granted(_)) {
        st.metrics.grants(Channel::Orders).increment(1);
    }
    Ok(Json(match attempt {
        LeaseAttempt::Granted(g) => {
            rakuten_edge::access_log::name_task(g.task_id.as_str());
            Envelope::ok(g)
        }
        LeaseAttempt::Empty => Envelope::empty(0, "no task"),
        LeaseAttempt::GateBusy => Envelope::empty(
            ErrorCode::TaskActiveElsewhere.as_i32(),
            "another task is active; nothing handed out",
        ),
    }))
}

/// The operations whose holder fields (`worker_id`, `lease_token`, `reason`) go in the JSON body
/// only, with those field names: a query string naming one is refused with a 422 saying where it
/// goes (D-holder-fields-in-body), before the generic unknown-parameter refusal.
const BODY_ONLY_FIELDS: [(&str, &[&str]); 3] = [
    ("/api/orders/{task_id}/renew", &["worker_id", "lease_token"]),
    (
        "/api/orders/{task_id}/report",
        &["worker_id", "lease_token"],
    ),
    ("/api/orders/{task_id}/reclaim", &["worker_id", "reason"]),
];

/// The 422 message for a renew, report or reclaim whose query string names a field that goes in
/// the JSON body (`POST` on `path`, the matched route template); `None` otherwise.
pub fn body_field_in_query(path: &str, query: Option<&str>) -> Option<String> {
    let (_, fields) = BODY_ONLY_FIELDS.iter().find(|(p, _)| *p == path)?;
    let query = query.filter(|q| !q.is_empty())?;
    let name = form_urlencoded::parse(query.as_bytes())
        .map(|(name, _)| name)
        .find(|name| fields.contains(&name.as_ref()))?;
    Some(format!(
        "`{name}` goes in the JSON body, not the query string: send {{{}}} as the body",
        fields
            .iter()
            .map(|f| format!("\"{f}\": …"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

fn checked_token(t: Option<String>) -> Result<Option<String>, ApiError> {
    if let Some(t) = &t
        && (t.is_empty() || t.chars().count() > MAX_TOKEN_CHARS || t.chars().any(char::is_control))
    {
        return Err(ApiError::Validation(
            "lease_token must be 1 to 128 characters without control characters".into(),
        ));
    }
    Ok(t)
}

/// Renew a lease (§4.4).
#[utoipa::path(
    post, path = "/api/orders/{task_id}/renew", tag = "orders",
    params(("task_id" = TaskId, Path, description = "task id")),
    request_body(content = RenewLease, description = "the holder's `worker_id` (required) and its grant's `lease_token`, in the body only"),
    responses(
        (status = 200, body = Envelope<RenewAck>),
        (status = 404, description = "no such task (6001)", body = ErrorEnvelope),
        (status = 409, description = "not the holder, expired, superseded or terminal (6002)", body = ErrorEnvelope),
        (status = 422, description = "invalid body, `worker_id` missing, or `worker_id`/`lease_token` sent in the query string (1003)", body = ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn renew(
    State(st): State<AppState>,
    actor: Actor,
    ApiPath(task_id): ApiPath<TaskId>,
    ApiJson(body): ApiJson<RenewLease>,
) -> ApiResult<RenewAck> {
    let req = RenewRequest {
        task_id,
        worker_id: body.worker_id,
        lease_token: checked_token(body.lease_token)?,
        ttl: st.settings.lease_ttl(),
    };
    act_as_worker(&st, &actor, &req.worker_id).await?;
    let ack = st.store.task_renew(req, st.clock.now()).await?;
    st.metrics.renewals.increment(1);
    Ok(Json(Envelope::ok(ack)))
}

fn check_text(name: &str, v: &Option<String>, allow_newlines: bool) -> Result<(), ApiError> {
    if let Some(s) = v {
        if s.chars().count() > MAX_REPORT_TEXT_CHARS {
            return Err(ApiError::Validation(format!(
                "{name} is longer than {MAX_REPORT_TEXT_CHARS} characters"
            )));
        }
        let bad = |c: char| c.is_control() && !(allow_newlines && matches!(c, '\n' | '\r' | '\t'));
        if s.chars().any(bad) {
            return Err(ApiError::Validation(format!(
                "{name} contains control characters"
            )));
        }
    }
    Ok(())
}

/// Longest `evidence_ref`, characters.
const MAX_EVIDENCE_REF_CHARS: usize = 256;

/// `evidence_ref` names this task's evidence: `{task_id}/{NN}-{step}`, NN ≥ 2 digits, step
/// `[a-z0-9-]+`. That form has no `..`, no absolute path and no second separator, so it can't
/// point outside the task's evidence directory or at another task's.
fn evidence_ref_ok(task_id: &TaskId, e: &str) -> bool {
    // Characters, as the document's `maxLength` counts them (a task id may be non-ASCII).
    if e.chars().count() > MAX_EVIDENCE_REF_CHARS {
        return false;
    }
    let Some(name) = e
        .strip_prefix(task_id.as_str())
        .and_then(|r| r.strip_prefix('/'))
    else {
        return false;
    };
    let Some((nn, step)) = name.split_once('-') else {
        return false;
    };
    nn.len() >= 2
        && nn.bytes().all(|b| b.is_ascii_digit())
        && !step.is_empty()
        && step
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

fn validate_report(task_id: &TaskId, body: &ReportState) -> Result<Option<Outcome>, ApiError> {
    check_text("site_order_id", &body.site_order_id, false)?;
    check_text("evidence_ref", &body.evidence_ref, false)?;
    check_text("detail", &body.detail, true)?;
    if let Some(e) = &body.evidence_ref
        && !evidence_ref_ok(task_id, e)
    {
        return Err(ApiError::Validation(format!(
            "evidence_ref must be {{task_id}}/{{NN}}-{{step}} for this task, e.g. {}/03-order-confirm \
             (NN two or more digits, step [a-z0-9-]+, at most {MAX_EVIDENCE_REF_CHARS} characters)",
            task_id.as_str()
        )));
    }
    if body.payable_yen.is_some_and(|y| y < 0) {
        return Err(ApiError::Validation(
            "payable_yen must not be negative".into(),
        ));
    }
    match (body.terminal, body.outcome) {
        (false, Some(_)) => Err(ApiError::Validation(
            "outcome is only allowed with terminal=true".into(),
        )),
        (false, None) => Ok(None),
        // The same rule as an operator's resolve (D-report-outcome-must-fit-state).
        (true, Some(o)) => o
            .check_fits_state(Some(body.state))
            .map(|()| Some(o))
            .map_err(ApiError::Validation),
        (true, None) => Outcome::implied_by(body.state).map(Some).ok_or_else(|| {
            ApiError::Validation(format!(
                "terminal report in state {} needs an explicit outcome \
                 (succeeded, failed or needs_human)",
                body.state
            ))
        }),
    }
}

/// Report an order state (§4.5). The first report moves `leased` → `running`; `(task_id, state)`
/// is idempotent; `terminal=true` ends the task; reports after the end are appended.
#[utoipa::path(
    post, path = "/api/orders/{task_id}/report", tag = "orders",
    params(("task_id" = TaskId, Path, description = "task id")),
    request_body = ReportState,
    responses(
        (status = 200, body = Envelope<ReportAck>),
        (status = 404, description = "no such task (6001)", body = ErrorEnvelope),
        (status = 409, description = "not the holder, expired or superseded (6002)", body = ErrorEnvelope),
        (status = 422, description = "invalid body, `worker_id` missing, terminal without outcome, an outcome contradicting the state, or `worker_id`/`lease_token` sent in the query string (1003)", body = ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn report(
    State(st): State<AppState>,
    actor: Actor,
    ApiPath(task_id): ApiPath<TaskId>,
    ApiJson(body): ApiJson<ReportState>,
) -> ApiResult<ReportAck> {
    let outcome = validate_report(&task_id, &body)?;
    let report = NewReport {
        task_id,
        worker_id: body.worker_id,
        lease_token: checked_token(body.lease_token)?,
        state: body.state,
        payable_yen: body.payable_yen,
        pay_deadline: body.pay_deadline,
        site_order_id: body.site_order_id,
        evidence_ref: body.evidence_ref,
        detail: body.detail,
        error_code: body.error_code,
        outcome,
    };
    act_as_worker(&st, &actor, &report.worker_id).await?;
    let ack = st.store.task_report(report, st.clock.now()).await?;
    if !ack.duplicate {
        st.metrics.reports.increment(1);
        if ack.status.is_terminal() && outcome.is_some() {
            st.metrics.task_finished(ack.status.as_str());
        }
    }
    if ack.status.is_terminal() && outcome.is_some() {
        // The gate is free again.
        st.lease_notifier.notify_leasable();
    }
    Ok(Json(Envelope::ok(ack)))
}

/// The reason recorded for a reclaim sent without one (older clients).
const NO_REASON: &str = "(no reason given)";

/// Reclaim a stale task for a named worker (§5). The worker's next lease poll receives this very
/// grant (same `lease_token`, same `lease_count`); the action is recorded in `operator_actions`
/// with its `reason`.
#[utoipa::path(
    post, path = "/api/orders/{task_id}/reclaim", tag = "orders",
    params(("task_id" = TaskId, Path, description = "task id")),
    request_body(content = ReclaimTask, description = "the `worker_id` to hand the task to (required) and an optional `reason`, in the body only"),
    responses(
        (status = 200, description = "the new grant, `lease_count > 1`, with `known_state`", body = Envelope<LeaseGrant>),
        (status = 404, description = "no such task (6001)", body = ErrorEnvelope),
        (status = 409, description = "not stale (6003) or another task is active (1006)", body = ErrorEnvelope),
        (status = 422, description = "invalid body, `worker_id` missing, a bad `reason`, or `worker_id`/`reason` sent in the query string (1003)", body = ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn reclaim(
    State(st): State<AppState>,
    ApiPath(task_id): ApiPath<TaskId>,
    actor: Actor,
    ApiJson(body): ApiJson<ReclaimTask>,
) -> ApiResult<LeaseGrant> {
    let reason = match body.reason {
        Some(r) => check_reason(&r)?,
        None => NO_REASON.to_owned(),
    };
    let req = ReclaimRequest {
        task_id,
        worker_id: body.worker_id,
        ttl: st.settings.lease_ttl(),
        scope: st.settings.lease_scope,
        reason,
        actor: actor.name,
    };
    let grant = st.store.task_reclaim(req, st.clock.now()).await?;
    // The named worker may be waiting in a long-poll right now.
    st.lease_notifier.notify_everyone();
    Ok(Json(Envelope::ok(grant)))
}

/// A task with its whole intent (its JSON text as submitted), its latest state and every report,
/// oldest first (§4.6), its operator actions and the evidence queries gathered when it went stale.
/// A worker token reads only a task leased or running to a worker id bound to it; any other
/// answers 6001 (D-worker-reads-held-task).
#[utoipa::path(
    get, path = "/api/orders/{task_id}", tag = "orders",
    params(("task_id" = TaskId, Path, description = "task id")),
    responses(
        (status = 200, body = Envelope<TaskDetail>),
        (status = 404, description = "no such task (6001)", body = ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn get_task(
    State(st): State<AppState>,
    actor: Actor,
    ApiPath(task_id): ApiPath<TaskId>,
) -> ApiResult<TaskDetail> {
    let Some(mut d) = st.store.task_get(&task_id).await? else {
        return Err(crate::store::StoreError::TaskNotFound(task_id).into());
    };
    // The recovery branch reads the re-granted task it holds (D-recovery-retries-task-read); any
    // other task is outside a worker token's scope and answers like one that does not exist
    // (D-worker-reads-held-task).
    if actor.role == Role::Worker {
        let held = matches!(d.status, TaskStatus::Leased | TaskStatus::Running);
        let mine = match d.lease_owner.as_deref() {
            Some(w) if held => worker_is_bound_to(&st, &actor, w).await?,
            _ => false,
        };
        if !mine {
            return Err(crate::store::StoreError::TaskNotFound(task_id).into());
        }
    }
    d.operator_actions = st.ops.task_operator_actions(&task_id).await?;
    d.evidence_queries = st.ops.task_evidence_queries(&task_id).await?;
    Ok(Json(Envelope::ok(d)))
}

/// Query of `GET /api/orders`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only this task status.
    #[param(value_type = Option<TaskStatus>)]
    pub status: Option<String>,
    /// Only this site.
    #[param(value_type = Option<rakuten_types::schema::Site>)]
    pub site: Option<String>,
    /// Page size, default 50, larger values are clamped to 200. A page also ends before its
    /// items pass 1 MiB of JSON; the answer's `limit` is the size used: continue at
    /// `offset + limit`.
    #[param(minimum = 1)]
    pub limit: Option<i64>,
    /// Items to skip, default 0.
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

/// List tasks, oldest first (§4.6). Each item carries a summary of its intent (`item_url`,
/// `quantity`, `variant_id`, `max_total_yen`) and the intent's size, never the whole intent:
/// `GET /api/orders/{task_id}` has it, as submitted. One item is at most 12 KiB, a page's items
/// at most 1 MiB (D-list-pages-bounded).
#[utoipa::path(
    get, path = "/api/orders", tag = "orders",
    params(ListQuery),
    responses(
        (status = 200, description = "a page of task summaries (intents summarized; at most 1 MiB of items)", body = Envelope<Page<TaskSummary>>),
        (status = 422, description = "unknown status or site, bad limit/offset (1003)", body = ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn list(
    State(st): State<AppState>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<Page<TaskSummary>> {
    // An unknown value is named with every allowed one (D-query-refusal-wording).
    let status = q
        .status
        .as_deref()
        .map(|s| {
            s.parse::<TaskStatus>().map_err(|_| {
                let allowed = TaskStatus::ALL.map(TaskStatus::as_str);
                ApiError::Validation(unknown_value("status", s, &allowed))
            })
        })
        .transpose()?;
    if let Some(site) = &q.site {
        check_site(site)?;
    }
    let (limit, offset) = crate::http::page::page_bounds(q.limit, q.offset)?;
    let page = st
        .store
        .task_list(TaskFilter {
            status,
            site: q.site,
            limit,
            offset,
        })
        .await?;
    Ok(Json(Envelope::ok(crate::http::page::within_byte_bound(
        page,
    ))))
}
