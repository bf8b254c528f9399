//! The HTTP API: the envelope `{success,msg,data,code}`, Bearer tokens per account, bounded bodies.
//!
//! - [`error`]: the one error type and its status/code mapping.
//! - [`auth`]: the Bearer token extractor.
//! - [`extract`]: JSON/query/path extractors whose rejections become envelope errors.
//! - [`openapi`]: the OpenAPI document of every route.
//! - [`routes`]: one file per resource.
//!
//! | method and path | who | what |
//! |---|---|---|
//! | `GET /openapi.json` | anyone | the OpenAPI document ([`openapi`]) |
//! | `GET /livez`, `GET /readyz` | anyone | the process answers; the database answers (else 503) |
//! | `GET /health` | anyone: `{"status"}`; any valid token: everything | liveness with queue depths per task type and lane |
//! | `GET /api/task-types` | anyone | configured task types |
//! | `GET /metrics` | super_admin, platform | Prometheus text ([`crate::telemetry`]) |
//! | `POST /api/admin/import` | super_admin | shops, accounts, cards, devices, bindings (32 MiB) |
//! | `POST /api/orders` | super_admin, platform | unpaid package order |
//! | `POST /api/payments/callback` | super_admin, platform | settle an order (idempotent by payment id) |
//! | `POST /api/usages/{id}/activate` | super_admin, platform | queued main package → active |
//! | `POST /api/package-poll` | super_admin, platform | the package poll's verdict for an asset |
//! | `PUT /api/cards/{iccid}/polling`, `…/stop-lock`, `DELETE /api/cards/{iccid}` | super_admin, platform | card switches |
//! | `PUT /api/devices/{no}/polling`, `…/reported-slot`, `PUT /api/bindings` | super_admin, platform | device switches, bindings |
//! | `GET /api/priority-items`, `GET /api/priority-items/{id}` | super_admin, platform, agent (scoped) | list, detail |
//! | `POST /api/priority-items` | manual trigger permission (scoped) | manual enqueue |
//! | `POST /api/priority-items/{id}/close` | super_admin, platform with card data | close |
//! | `POST /api/priority-items/{id}/retrigger` | manual trigger permission (scoped) | retrigger failed/expired |
//! | `POST /api/manual-triggers` | manual trigger permission (scoped) | ordinary manual trigger (quota, 24 h dedupe) |
//! | `GET /api/scheduler/last-cycle` | super_admin, platform | the last scheduling cycle's decisions and queue depths |

pub mod auth;
pub mod error;
pub mod extract;
pub mod openapi;
pub mod routes;

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::routing::{delete, get, post, put};
use rakuten_edge::body::BodyLimit;
use rakuten_edge::query_guard::QueryAllowlist;
use serde::Serialize;

use rakuten_types::{Clock, Envelope};

use crate::domain::{TaskTypes, TokenHash};
use crate::hints::Hints;
use crate::scheduler::Scheduler;
use crate::store::Store;

/// Default request body bound, bytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Body bound of the bulk import, bytes.
pub const MAX_IMPORT_BYTES: usize = 32 * 1024 * 1024;

/// Shared state of the handlers.
#[derive(Clone)]
pub struct AppState {
    /// Storage.
    pub store: Arc<dyn Store>,
    /// Clock.
    pub clock: Arc<dyn Clock>,
    /// Configured task types.
    pub task_types: TaskTypes,
    /// Hash of the bootstrap admin token.
    pub admin_token_hash: Arc<TokenHash>,
    /// Where committed enqueues announce their items, and manual triggers queue.
    pub hints: Hints,
    /// The scheduler (last cycle, queue depths).
    pub scheduler: Scheduler,
    /// The schedule configuration check (`/health`'s `schedule_config`).
    pub schedule_config: crate::jobs::schedule_config::ScheduleConfigJob,
    /// Accepted ordinary manual triggers per operator per UTC day.
    pub manual_daily_quota: u32,
    /// Signs the console's session cookies.
    pub console_key: web_console::ConsoleKey,
}

/// A success envelope as JSON.
pub fn ok<T: Serialize>(data: T) -> axum::Json<Envelope<T>> {
    axum::Json(Envelope::ok(data))
}

/// The router.
pub fn router(state: AppState) -> Router {
    use routes::{admin, assets, health, items, manual_triggers, orders, scheduler};
    Router::new()
        .route("/health", get(health::health))
        .route("/livez", get(health::livez))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .route("/api/task-types", get(health::task_types))
        .route(
            "/api/admin/import",
            post(admin::import).layer(BodyLimit::layer(MAX_IMPORT_BYTES)),
        )
        .route("/api/orders", post(orders::create))
        .route("/api/payments/callback", post(orders::payment_callback))
        .route("/api/usages/{id}/activate", post(orders::activate_queued))
        .route("/api/package-poll", post(orders::package_poll))
        .route("/api/cards/{iccid}/polling", put(assets::card_polling))
        .route("/api/cards/{iccid}/stop-lock", put(assets::card_stop_lock))
        .route("/api/cards/{iccid}", delete(assets::card_delete))
        .route(
            "/api/devices/{device_no}/polling",
            put(assets::device_polling),
        )
        .route(
            "/api/devices/{device_no}/reported-slot",
            put(assets::device_reported_slot),
        )
        .route("/api/bindings", put(assets::binding))
        .route("/api/priority-items", get(items::list).post(items::enqueue))
        .route("/api/priority-items/{id}", get(items::detail))
        .route("/api/priority-items/{id}/close", post(items::close))
        .route("/api/priority-items/{id}/retrigger", post(items::retrigger))
        .route("/api/manual-triggers", post(manual_triggers::create))
        .route("/api/scheduler/last-cycle", get(scheduler::last_cycle))
        // The query parameters each operation accepts are the ones the OpenAPI document lists:
        // the routes above only, not the console or `/openapi.json`.
        .route_layer(axum::middleware::from_fn_with_state(
            QueryAllowlist::from_openapi(&openapi::document()).with_undocumented(&[
                ("get", "/livez"),
                ("get", "/readyz"),
                ("get", "/metrics"),
            ]),
            refuse_unknown_query,
        ))
        .merge(openapi::router())
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
