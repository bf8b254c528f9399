//! The HTTP API: the envelope `{success,msg,data,code}`, Bearer tokens per account, bounded bodies.
//!
//! - [`error`]: the one error type and its status/code mapping.
//! - [`auth`]: the Bearer token extractors ([`auth::Auth`], and [`auth::Allowed`] for a route's rule).
//! - [`extract`]: JSON/query/path extractors whose rejections become envelope errors.
//! - [`openapi`]: the OpenAPI document of every route, derived from the handlers' `#[utoipa::path]`.
//! - [`schema`]: the request rules as OpenAPI schemas, built from the handlers' checks.
//! - [`envelope`]: the answer envelope as the OpenAPI components every route's responses name.
//! - [`routes`]: one file per resource.
//!
//! Who may call each route is one rule per route ([`auth::Allowed`] over
//! `domain::access::authorize`, the rule the console asks too); the README's table "Who may read
//! and do what" lists it per role.
//!
//! | method and path | who | what |
//! |---|---|---|
//! | `GET /openapi.json` | anyone | the OpenAPI document ([`openapi`]) |
//! | `GET /livez`, `GET /readyz` | anyone | the process answers; the database answers (else 503) |
//! | `GET /health` | anyone, agents: `{"status"}`; super_admin, platform: everything; enterprise: 403 | liveness with queue depths per task type and lane |
//! | `GET /api/task-types` | any account but enterprise | configured task types |
//! | `GET /metrics` | super_admin, platform | Prometheus text ([`crate::telemetry`]) |
//! | `POST /api/admin/import` | super_admin | shops, accounts, cards, devices, bindings (32 MiB) |
//! | `PUT`, `DELETE /api/admin/accounts/{id}/token` | super_admin | replace, revoke an account's token |
//! | `POST /api/orders` | super_admin, platform | unpaid package order |
//! | `POST /api/payments/callback` | super_admin, platform | settle an order (idempotent by payment id) |
//! | `POST /api/usages/{id}/activate` | super_admin, platform | queued main package → active |
//! | `POST /api/package-poll` | super_admin, platform | the package poll's verdict for an asset |
//! | `PUT /api/cards/{iccid}/polling`, `…/stop-lock`, `DELETE /api/cards/{iccid}` | super_admin, platform | card switches |
//! | `PUT /api/devices/{no}/polling`, `…/reported-slot`, `PUT /api/bindings` | super_admin, platform | device switches, bindings |
//! | `GET /api/priority-items`, `GET /api/priority-items/{id}` | manual trigger permission (scoped) | list, detail |
//! | `POST /api/priority-items` | manual trigger permission (scoped) | manual enqueue |
//! | `POST /api/priority-items/{id}/close` | super_admin, platform with card data permission | close |
//! | `POST /api/priority-items/{id}/retrigger` | manual trigger permission (scoped) | retrigger failed/expired |
//! | `POST /api/manual-triggers` | manual trigger permission (scoped) | ordinary manual trigger (quota, 24 h dedupe) |
//! | `GET /api/scheduler/last-cycle` | super_admin, platform | the last scheduling cycle's decisions and queue depths |

pub mod auth;
pub mod envelope;
pub mod error;
pub mod extract;
pub mod openapi;
pub mod routes;
pub mod schema;

use axum::Router;
use axum::extract::State;
use axum::http::Method;
use axum::routing::{MethodRouter, on};
use rakuten_edge::body::BodyLimit;
use rakuten_edge::query_guard::QueryAllowlist;
use serde::Serialize;

use rakuten_types::Envelope;

use crate::state::AppState;

/// Default request body bound, bytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Body bound of the bulk import, bytes.
pub const MAX_IMPORT_BYTES: usize = 32 * 1024 * 1024;

/// A success envelope as JSON.
pub fn ok<T: Serialize>(data: T) -> axum::Json<Envelope<T>> {
    axum::Json(Envelope::ok(data))
}

/// One route: method, path pattern, and the handler for that method.
pub(crate) type Route = (Method, &'static str, MethodRouter<AppState>);

/// The API's routes (method, path, handler; each method of a path its own row): the router is
/// built from this list, and [`served_routes`] lists it.
fn api_routes() -> Vec<Route> {
    use axum::routing::MethodFilter as M;
    use routes::{admin, assets, health, items, manual_triggers, orders, scheduler};
    vec![
        (Method::GET, "/health", on(M::GET, health::health)),
        (Method::GET, "/livez", on(M::GET, health::livez)),
        (Method::GET, "/readyz", on(M::GET, health::readyz)),
        (Method::GET, "/metrics", on(M::GET, health::metrics)),
        (
            Method::GET,
            "/api/task-types",
            on(M::GET, health::task_types),
        ),
        (
            Method::POST,
            "/api/admin/import",
            on(M::POST, admin::import).layer(BodyLimit::layer(MAX_IMPORT_BYTES)),
        ),
        (
            Method::PUT,
            "/api/admin/accounts/{id}/token",
            on(M::PUT, admin::replace_token),
        ),
        (
            Method::DELETE,
            "/api/admin/accounts/{id}/token",
            on(M::DELETE, admin::revoke_token),
        ),
        (Method::POST, "/api/orders", on(M::POST, orders::create)),
        (
            Method::POST,
            "/api/payments/callback",
            on(M::POST, orders::payment_callback),
        ),
        (
            Method::POST,
            "/api/usages/{id}/activate",
            on(M::POST, orders::activate_queued),
        ),
        (
            Method::POST,
            "/api/package-poll",
            on(M::POST, orders::package_poll),
        ),
        (
            Method::PUT,
            "/api/cards/{iccid}/polling",
            on(M::PUT, assets::card_polling),
        ),
        (
            Method::PUT,
            "/api/cards/{iccid}/stop-lock",
            on(M::PUT, assets::card_stop_lock),
        ),
        (
            Method::DELETE,
            "/api/cards/{iccid}",
            on(M::DELETE, assets::card_delete),
        ),
        (
            Method::PUT,
            "/api/devices/{device_no}/polling",
            on(M::PUT, assets::device_polling),
        ),
        (
            Method::PUT,
            "/api/devices/{device_no}/reported-slot",
            on(M::PUT, assets::device_reported_slot),
        ),
        (Method::PUT, "/api/bindings", on(M::PUT, assets::binding)),
        (Method::GET, "/api/priority-items", on(M::GET, items::list)),
        (
            Method::POST,
            "/api/priority-items",
            on(M::POST, items::enqueue),
        ),
        (
            Method::GET,
            "/api/priority-items/{id}",
            on(M::GET, items::detail),
        ),
        (
            Method::POST,
            "/api/priority-items/{id}/close",
            on(M::POST, items::close),
        ),
        (
            Method::POST,
            "/api/priority-items/{id}/retrigger",
            on(M::POST, items::retrigger),
        ),
        (
            Method::POST,
            "/api/manual-triggers",
            on(M::POST, manual_triggers::create),
        ),
        (
            Method::GET,
            "/api/scheduler/last-cycle",
            on(M::GET, scheduler::last_cycle),
        ),
    ]
}

/// Every route the service serves, as (method, path pattern): the API's, `/openapi.json`, the
/// console's pages and static files. The access matrix test (`tests/api/access.rs`) fails for a
/// route served here without a row of its own, and checks that the OpenAPI document lists every
/// route outside the console.
pub fn served_routes() -> Vec<(Method, &'static str)> {
    let mut all: Vec<(Method, &'static str)> = api_routes()
        .into_iter()
        .chain(crate::console::routes())
        .map(|(m, p, _)| (m, p))
        .collect();
    all.push((Method::GET, "/openapi.json"));
    all.extend(
        crate::console::STATIC_ROUTES
            .iter()
            .map(|p| (Method::GET, *p)),
    );
    all
}

/// The router.
pub fn router(state: AppState) -> Router {
    let task_types = state.task_types.names();
    api_routes()
        .into_iter()
        .fold(Router::new(), |r, (_, path, handler)| {
            r.route(path, handler)
        })
        // The query parameters each operation accepts are the ones the OpenAPI document lists
        // (a misspelt parameter is refused, not ignored); the routes above only, not the console or
        // `/openapi.json`.
        .route_layer(axum::middleware::from_fn_with_state(
            QueryAllowlist::from_openapi(&openapi::document()),
            refuse_unknown_query,
        ))
        .merge(openapi::router(&task_types))
        .merge(crate::console::router())
        .fallback(error::not_found_route)
        .method_not_allowed_fallback(error::method_not_allowed)
        .layer(BodyLimit::layer(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(
            rakuten_edge::access_log::access_log,
        ))
        .with_state(state)
}

/// 422 naming the first query parameter the operation does not list in the OpenAPI document
/// (a typo must not be ignored silently). It runs before the handler's token
/// check, so an anonymous request with an unknown parameter is a 422 rather than a 401.
async fn refuse_unknown_query(
    State(allow): State<QueryAllowlist>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    match allow.refusal(&req) {
        Some(msg) => error::ApiError::invalid(msg).into_response(),
        None => next.run(req).await,
    }
}
