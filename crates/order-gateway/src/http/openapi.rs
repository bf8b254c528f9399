//! The OpenAPI document, generated from the handlers' `#[utoipa::path]` attributes and served
//! unauthenticated at `/openapi.json`.

use axum::routing::get;
use axum::{Json, Router};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::AppState;
use super::routes::{health, operator, orders, probes, queries};

/// The gateway's API description.
#[derive(OpenApi)]
#[openapi(
    info(title = "order-gateway", description = "Leased, at-most-once order task queue and account read-only query channel (spec order-gateway.md)"),
    paths(
        orders::submit,
        orders::lease,
        orders::renew,
        orders::report,
        orders::reclaim,
        orders::get_task,
        orders::list,
        queries::submit,
        queries::lease,
        queries::result,
        queries::get_query,
        queries::list,
        health::health,
        operator::list_alerts,
        operator::resolve,
        operator::cancel,
        operator::list_workers,
        operator::retire,
        probes::livez,
        probes::readyz,
        probes::metrics,
    ),
    modifiers(&BearerAuth),
    tags(
        (name = "orders", description = "order tasks (§4.2–§4.6, §5)"),
        (name = "account queries", description = "account read-only query channel (§11)"),
        (name = "health", description = "§4.6, §4.7; probes and metrics (issue #10)"),
        (name = "operator", description = "alerts, audited operator actions, workers (issue #10)")
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The `/openapi.json` route.
pub fn router() -> Router<AppState> {
    Router::new().route("/openapi.json", get(|| async { Json(ApiDoc::openapi()) }))
}
