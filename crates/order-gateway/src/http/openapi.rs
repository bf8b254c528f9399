//! The OpenAPI document, generated from the handlers' `#[utoipa::path]` attributes (plus the
//! edge's statuses) and served unauthenticated at `/openapi.json`.

use axum::routing::get;
use axum::{Json, Router};
use utoipa::OpenApi;

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
    // Named only by query parameters' `value_type` and by the body rules added in `document`,
    // which utoipa does not collect.
    components(schemas(
        rakuten_types::schema::Site,
        rakuten_types::schema::Reason,
        rakuten_types::schema::LeaseToken,
        rakuten_types::query::OrderListResult,
        rakuten_types::query::OrderDetailResult
    )),
    tags(
        (name = "orders", description = "order tasks (§4.2–§4.6, §5)"),
        (name = "account queries", description = "account read-only query channel (§11)"),
        (name = "health", description = "§4.6, §4.7; probes and metrics"),
        (name = "operator", description = "alerts, audited operator actions, workers")
    )
)]
pub struct ApiDoc;

/// The served document: [`ApiDoc`] plus the statuses the edge and the extractors can answer on
/// any operation (401/403/413/414/415/422/431/503, `rakuten_edge::openapi`).
pub fn document() -> serde_json::Value {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
    rakuten_edge::openapi::add_bearer_scheme(&mut doc);
    rakuten_edge::openapi::add_edge_responses(
        &mut doc,
        "ErrorEnvelope",
        rakuten_types::ErrorCode::UnsupportedMediaType.as_i32(),
    );
    nullable_envelope_data(&mut doc);
    add_body_rules(&mut doc);
    doc
}

/// The rules tying one body field to another ([`rakuten_types::body_rules::all`]): without
/// them a client sends `kind: order_detail` without an `order_number`, or a failure with a
/// `result`, and is refused with 422.
fn add_body_rules(doc: &mut serde_json::Value) {
    for (name, one_of) in rakuten_types::body_rules::all() {
        if let Some(schema) = doc
            .pointer_mut(&format!("/components/schemas/{name}"))
            .and_then(serde_json::Value::as_object_mut)
        {
            schema.insert("oneOf".into(), one_of);
        }
    }
}

/// utoipa describes the generic `Envelope<T>::data: Option<T>` as a bare `T`, but an empty
/// long-poll answers `data: null` (schemathesis found the mismatch): every
/// `Envelope_*` schema's `data` becomes `T` or `null`.
fn nullable_envelope_data(doc: &mut serde_json::Value) {
    let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(serde_json::Value::as_object_mut)
    else {
        return;
    };
    for (name, schema) in schemas.iter_mut() {
        if let (true, Some(data)) = (
            name.starts_with("Envelope"),
            schema.pointer_mut("/properties/data"),
        ) {
            let inner = data.take();
            *data = serde_json::json!({"oneOf": [inner, {"type": "null"}]});
        }
    }
}

/// The `/openapi.json` route.
pub fn router() -> Router<AppState> {
    let doc = document();
    Router::new().route(
        "/openapi.json",
        get(move || {
            let doc = doc.clone();
            async move { Json(doc) }
        }),
    )
}
