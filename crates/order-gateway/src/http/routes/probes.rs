//! Probes and metrics: `GET /livez` (the process answers; no database
//! access), `GET /readyz` (the database answers within [`READY_TIMEOUT`], else 503/1503), and
//! `GET /metrics` (Prometheus text, [`crate::telemetry`]; operator or metrics tokens).

use std::time::Duration;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::{MethodRouter, get};
use axum::{Json, Router};
use rakuten_types::Envelope;
use serde::Serialize;

use crate::http::auth::{Guarded, Role, guarded};
use crate::http::error::{ApiError, ErrorEnvelope};
use crate::state::AppState;
use crate::store::StoreError;

/// Longest wait for the database in `/readyz`.
pub const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// What a probe answers.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ProbeStatus {
    /// `alive` (`/livez`) or `ready` (`/readyz`).
    pub status: &'static str,
}

/// `/livez` and `/readyz` (no token).
pub fn router() -> Router<AppState> {
    routes()
        .into_iter()
        .fold(Router::new(), |r, (path, handler)| r.route(path, handler))
}

/// The routes of [`router`] (path, handlers).
pub fn routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    vec![("/livez", get(livez)), ("/readyz", get(readyz))]
}

/// `/metrics`, behind the Bearer middleware: operators and metrics tokens (D-metrics).
pub fn metrics_router() -> Router<AppState> {
    guarded(metrics_table())
}

/// The access table of [`metrics_router`].
pub fn metrics_table() -> Vec<Guarded> {
    vec![("/metrics", get(metrics), &[Role::Metrics])]
}

/// Liveness: the process answers HTTP. Never touches the database.
#[utoipa::path(
    get, path = "/livez", tag = "health",
    responses((status = 200, body = Envelope<ProbeStatus>))
)]
pub async fn livez() -> Json<Envelope<ProbeStatus>> {
    Json(Envelope::ok(ProbeStatus { status: "alive" }))
}

/// Readiness: the database answers (`SELECT 1`; SQLite: and the writer runs).
#[utoipa::path(
    get, path = "/readyz", tag = "health",
    responses(
        (status = 200, body = Envelope<ProbeStatus>),
        (status = 503, description = "the database does not answer (1503)", body = ErrorEnvelope),
    )
)]
pub async fn readyz(State(st): State<AppState>) -> Result<Json<Envelope<ProbeStatus>>, ApiError> {
    match tokio::time::timeout(READY_TIMEOUT, st.store.ping()).await {
        Ok(Ok(())) => Ok(Json(Envelope::ok(ProbeStatus { status: "ready" }))),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readiness: the database does not take requests");
            Err(StoreError::Closed.into())
        }
        Err(_) => {
            tracing::warn!("readiness: the database did not answer in time");
            Err(StoreError::Closed.into())
        }
    }
}

/// Prometheus text format: scrape-time counts from the database, then in-process counters.
#[utoipa::path(
    get, path = "/metrics", tag = "health",
    responses(
        (status = 200, description = "Prometheus text format 0.0.4", content_type = "text/plain", body = String),
        (status = 401, description = "no or unknown token (1001)", body = ErrorEnvelope),
        (status = 403, description = "neither an operator nor a metrics token (1002)", body = ErrorEnvelope),
    ),
    security(("bearer" = []))
)]
pub async fn metrics(State(st): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    let body = crate::telemetry::scrape(st.store.as_ref(), &st.metrics, st.clock.now()).await?;
    Ok(([(CONTENT_TYPE, crate::telemetry::CONTENT_TYPE)], body))
}
