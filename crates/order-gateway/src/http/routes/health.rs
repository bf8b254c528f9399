//! `GET /health` (§4.6, §4.7): counts, active tasks, workers and raised alerts for a caller with
//! a valid token of any role; an anonymous caller gets only the overall `status` (issue #10
//! item 8: ids are not for everyone). A wrong token is 401.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::get;
use axum::{Json, Router};
use rakuten_types::Envelope;
use rakuten_types::order::Health;

use crate::http::AppState;
use crate::http::auth::actor_of;
use crate::http::error::ErrorEnvelope;
use crate::http::routes::orders::ApiResult;
use crate::jobs::alerts::{AlertThresholds, health_at};

/// The health route.
pub fn router() -> Router<AppState> {
    Router::new().route("/health", get(health))
}

/// What `/health` shows: everything to a caller with a token, the status alone otherwise.
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
pub enum HealthView {
    /// The spec's content (§4.6).
    Full(Health),
    /// `{"status": "ok" | "degraded"}`.
    Summary {
        /// `ok` or `degraded`.
        status: String,
    },
}

/// Health and alerts; `status` is `degraded` while any alert is raised (HTTP 200 either way).
#[utoipa::path(
    get, path = "/health", tag = "health",
    responses(
        (status = 200, description = "with a valid token: the whole answer; without: only `status`", body = Envelope<Health>),
        (status = 401, description = "an Authorization header that is not a valid token (1001)", body = ErrorEnvelope),
    )
)]
pub async fn health(State(st): State<AppState>, headers: HeaderMap) -> ApiResult<HealthView> {
    let caller = actor_of(&st, &headers)?;
    let th = AlertThresholds {
        worker_offline: st.settings.worker_offline_alert(),
        queued: st.settings.queued_alert(),
    };
    let h = health_at(st.store.as_ref(), th, st.clock.now()).await?;
    Ok(Json(Envelope::ok(match caller {
        Some(_) => HealthView::Full(h),
        None => HealthView::Summary { status: h.status },
    })))
}
