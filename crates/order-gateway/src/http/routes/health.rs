//! `GET /health` (§4.6, §4.7): counts, active tasks, workers and raised alerts. Unauthenticated,
//! like probes expect; it shows ids and counts, no intents or tokens.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use rakuten_types::Envelope;
use rakuten_types::order::Health;

use crate::http::AppState;
use crate::http::routes::orders::ApiResult;
use crate::jobs::alerts::{AlertThresholds, health_at};

/// The health route.
pub fn router() -> Router<AppState> {
    Router::new().route("/health", get(health))
}

/// Health and alerts; `status` is `degraded` while any alert is raised (HTTP 200 either way).
#[utoipa::path(
    get, path = "/health", tag = "health",
    responses((status = 200, body = Envelope<Health>))
)]
pub async fn health(State(st): State<AppState>) -> ApiResult<Health> {
    let th = AlertThresholds {
        worker_offline: st.settings.worker_offline_alert(),
        queued: st.settings.queued_alert(),
    };
    let h = health_at(st.store.as_ref(), th, st.clock.now()).await?;
    Ok(Json(Envelope::ok(h)))
}
