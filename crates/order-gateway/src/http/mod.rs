//! The HTTP layer: the router, and one module per concern. The state every handler shares is
//! [`crate::state::AppState`], outside this module so that the console does not import the
//! router; the router mounts the console's pages.
//!
//! - [`error`]: the one error type, its envelope rendering, and [`error::ApiResult`], what every
//!   handler returns.
//! - [`auth`]: Bearer token middleware for `/api/*`, the [`auth::Actor`] extractor, and
//!   [`auth::guarded`], which builds each router from its table of who may call what.
//! - [`checks`]: checks of request fields several route groups share (`reason`, `site`, `wait`).
//! - [`extract`]: extractors whose rejections are envelopes.
//! - [`openapi`]: the generated OpenAPI document at `/openapi.json`.
//! - [`page`]: the bounds of every list page (`limit`/`offset`, bytes).
//! - [`routes`]: one module per route group (`orders`, `queries` — the account-query channel —,
//!   `operator` — alerts, resolve, cancel, workers —, `health`).
//!
//! `/livez`, `/readyz`, `/health` and `/openapi.json` answer without a token (probes and
//! tooling; `/health` shows its detail only to a caller with a valid token); `/metrics` and
//! everything under `/api` need a token of a role the route's table allows (operators may call
//! everything).

pub mod auth;
pub mod checks;
pub mod error;
pub mod extract;
pub mod openapi;
pub mod page;
pub mod routes;

use axum::Router;
use axum::extract::State;
use axum::http::Uri;
use axum::middleware::from_fn_with_state;
use rakuten_edge::query_guard::QueryAllowlist;
use rakuten_types::order::MAX_INTENT_BYTES;
use tower_http::trace::TraceLayer;

use self::error::ApiError;
use crate::state::AppState;

/// Largest request body, bytes: the 64 KiB intent plus room for the envelope around it. An intent
/// over 64 KiB inside a smaller body is refused by the submit handler (413 as well). The query
/// result route has its own, larger limit (`Settings::query_result_body_limit`).
pub const MAX_BODY_BYTES: usize = MAX_INTENT_BYTES + 16 * 1024;

/// Every path pattern the service serves: the API's access tables, the public probes and
/// `/health`, `/openapi.json`, the console's pages and static files. The route × role matrix test
/// (`tests/api/access.rs`) fails for a path served here without rows of its own, so a route added
/// to a table cannot miss its check.
pub fn served_paths() -> Vec<&'static str> {
    let guarded = routes::orders::table()
        .into_iter()
        .chain(routes::queries::table(0))
        .chain(routes::operator::table())
        .chain(routes::probes::metrics_table())
        .map(|(path, _, _)| path);
    let public = routes::health::routes()
        .into_iter()
        .chain(routes::probes::routes())
        .chain(crate::console::routes())
        .map(|(path, _)| path);
    let mut all: Vec<&'static str> = guarded.chain(public).collect();
    all.push("/openapi.json");
    all.extend(crate::console::STATIC_PATHS);
    all.sort_unstable();
    all.dedup();
    all
}

/// The whole application router.
pub fn router(state: AppState) -> Router {
    // The query parameters each operation accepts are the ones the OpenAPI document lists; the
    // check runs after authentication (an anonymous caller gets 401, not a 422 about its query).
    let allow = QueryAllowlist::from_openapi(&openapi::document());
    let api = Router::new()
        .merge(routes::orders::router())
        .merge(routes::queries::router(&state.settings))
        .merge(routes::operator::router())
        .merge(routes::probes::metrics_router())
        .route_layer(from_fn_with_state(allow.clone(), refuse_unknown_query))
        .route_layer(from_fn_with_state(state.clone(), auth::require_bearer));
    let public = Router::new()
        .merge(routes::health::router())
        .merge(routes::probes::router())
        .route_layer(from_fn_with_state(allow, refuse_unknown_query));
    Router::new()
        .merge(public)
        .merge(openapi::router())
        .merge(crate::console::router())
        .merge(api)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(rakuten_edge::body::BodyLimit::layer(MAX_BODY_BYTES))
        .layer(TraceLayer::new_for_http())
        .layer(axum::middleware::from_fn(
            rakuten_edge::access_log::access_log,
        ))
        .with_state(state)
}

/// 422 naming the first query parameter the operation does not list in the OpenAPI document
/// (`?wiat=30` would silently mean no wait); a holder field sent in the query string of renew,
/// report or reclaim is told where it goes instead (D-holder-fields-in-body).
async fn refuse_unknown_query(
    State(allow): State<QueryAllowlist>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let body_field = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .filter(|_| req.method() == axum::http::Method::POST)
        .and_then(|path| routes::orders::body_field_in_query(path.as_str(), req.uri().query()));
    match body_field.or_else(|| allow.refusal(&req)) {
        Some(msg) => ApiError::Validation(msg).into_response(),
        None => next.run(req).await,
    }
}

async fn not_found(uri: Uri) -> ApiError {
    let path: String = uri.path().chars().take(200).collect();
    ApiError::NotFound(path)
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

/// The `HEAD` handler of the lease routes: 405. axum answers `HEAD` with the `GET` handler and
/// drops the body, and a request that cannot see the answer must never take a lease.
pub(crate) async fn head_takes_no_lease() -> ApiError {
    ApiError::MethodNotAllowed
}
