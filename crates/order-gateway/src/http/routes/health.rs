//! `GET /health` (§4.6, §4.7): counts, active tasks, workers and raised alerts for an operator;
//! every other caller — no token, an upstream, worker or metrics token — gets only the overall
//! `status`, the probe (D-health-detail-for-operators: the detail names tasks, workers and alert
//! summaries, which only operators may read through the API; a metrics token is for `/metrics`).
//! A wrong token is 401.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::{MethodRouter, get};
use axum::{Json, Router};
use rakuten_types::Envelope;
use rakuten_types::alert::AlertKind;
use rakuten_types::order::{Alert, Health};

use crate::http::auth::{Role, actor_of};
use crate::http::error::ApiError;
use crate::http::error::ApiResult;
use crate::http::error::ErrorEnvelope;
use crate::jobs::alerts::{AlertThresholds, health_at};
use crate::state::AppState;
use crate::store::operator::AlertFilter;

/// The health route.
pub fn router() -> Router<AppState> {
    routes()
        .into_iter()
        .fold(Router::new(), |r, (path, handler)| r.route(path, handler))
}

/// The routes of [`router`] (path, handlers).
pub fn routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    vec![("/health", get(health))]
}

/// What `/health` shows: everything to an operator, the status alone to anyone else.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum HealthView {
    /// The spec's content (§4.6).
    Full(Health),
    /// `{"status": "ok" | "degraded"}`.
    Summary(HealthSummary),
}

/// What every caller but an operator sees of `/health`. Its schema admits no other property, so
/// the operator's whole answer (which also has `status`) is never read as a summary: a client
/// validating against the document finds exactly one of the two.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HealthSummary {
    /// `ok` or `degraded`.
    pub status: String,
}

/// Health and alerts; `status` is `degraded` while any alert is raised or writes fail (HTTP 200
/// either way).
#[utoipa::path(
    get, path = "/health", tag = "health",
    responses(
        (status = 200, description = "with an operator token: the whole answer (`Health`); without a token, or with an upstream, worker or metrics token: only `status`", body = Envelope<HealthView>),
        (status = 401, description = "an Authorization header that is not a valid token (1001)", body = ErrorEnvelope),
    )
)]
pub async fn health(State(st): State<AppState>, headers: HeaderMap) -> ApiResult<HealthView> {
    let caller = actor_of(&st, &headers)?;
    let th = AlertThresholds {
        worker_offline: st.settings.worker_offline_alert(),
        queued: st.settings.queued_alert(),
    };
    let mut h = health_at(st.store.as_ref(), th, st.clock.now()).await?;
    add_recorded_alerts(&st, &mut h).await?;
    // Reads answer while writes fail (a full disk): a monitor of `/health` saw `ok` while every
    // submit answered 503 (D-gateway-health-content).
    if st.store.ping().await.is_err() {
        h.writes_failing = true;
        h.status = "degraded".into();
    }
    Ok(Json(Envelope::ok(match caller {
        Some(a) if a.role == Role::Operator => HealthView::Full(h),
        _ => HealthView::Summary(HealthSummary { status: h.status }),
    })))
}

/// Alert kinds raised by events, not computed from the queue's state: only their stored records
/// know them. Each is listed from the open records, at most [`RECORDED_LISTED`] per kind.
const RECORDED_KINDS: [AlertKind; 4] = [
    AlertKind::TaskNeedsHuman,
    AlertKind::AccountLoggedOut,
    AlertKind::WebhookFailing,
    AlertKind::TaskStateContradictsOutcome,
];

/// Open records listed per recorded kind; past it one `more` entry counts the rest.
const RECORDED_LISTED: i64 = 20;

/// Adds the open alerts of [`RECORDED_KINDS`] to `h`, `degraded` when any is open: a monitor
/// watching `/health` saw `ok` while a logged-out shop session or dead webhooks were raised in
/// `/api/alerts` (D-gateway-health-content).
async fn add_recorded_alerts(st: &AppState, h: &mut Health) -> Result<(), ApiError> {
    for kind in RECORDED_KINDS {
        let page = st
            .ops
            .alert_list(AlertFilter {
                open_only: true,
                kind: Some(kind),
                limit: RECORDED_LISTED,
                offset: 0,
            })
            .await?;
        let unlisted = page.total - page.items.len() as i64;
        h.alerts.extend(page.items.into_iter().map(|a| Alert {
            kind: kind.as_str().into(),
            subject: a.subject,
            message: a.summary,
        }));
        if unlisted > 0 {
            h.alerts.push(Alert {
                kind: kind.as_str().into(),
                subject: "more".into(),
                message: format!(
                    "{unlisted} more open {} alerts are not listed",
                    kind.as_str()
                ),
            });
        }
    }
    if !h.alerts.is_empty() {
        h.status = "degraded".into();
    }
    Ok(())
}
