//! The OpenAPI document at `/openapi.json` (unauthenticated, like the gateway's), derived from the
//! handlers' `#[utoipa::path]` attributes in `routes` and the request types' `ToSchema` /
//! `IntoParams` derives, whose fields carry the server's own rules ([`super::schema`],
//! D-openapi-states-server-rules). A little is added to it as JSON afterwards: the bearer scheme
//! and the edge's statuses (401/403/413/414/415/422/431/503, `rakuten_edge::openapi`), the
//! `Retry-After` header's bounds, the cross-field rules of an imported account, one `operationId`
//! per operation, and — in the served document — the configured task types as the `enum` of
//! `TaskTypeName` ([`with_task_types`]).

use axum::Router;
use axum::routing::get;
use serde_json::{Value, json};
use utoipa::OpenApi;

use super::envelope::{Envelope, ErrorEnvelope, HealthEnvelope, answer_schemas};
use super::routes::{admin, assets, health, items, manual_triggers, orders, scheduler};
use crate::state::AppState;

/// card-polling's API description.
#[derive(OpenApi)]
#[openapi(
    info(title = "card-polling", description = "Priority polling queue for IoT cards (spec priority-polling-queue.md)"),
    paths(
        health::health,
        health::livez,
        health::readyz,
        health::metrics,
        health::task_types,
        admin::import,
        admin::replace_token,
        admin::revoke_token,
        orders::create,
        orders::payment_callback,
        orders::activate_queued,
        orders::package_poll,
        assets::card_polling,
        assets::card_stop_lock,
        assets::card_delete,
        assets::device_polling,
        assets::device_reported_slot,
        assets::binding,
        items::list,
        items::enqueue,
        items::detail,
        items::close,
        items::retrigger,
        manual_triggers::create,
        scheduler::last_cycle,
    ),
    // Named only by `value_type`s, which utoipa does not collect.
    components(schemas(
        super::schema::TaskTypeName,
        super::schema::Key,
        super::schema::AccountId,
        super::schema::ItemId,
        crate::store::ImportExisting,
        Envelope, ErrorEnvelope, HealthEnvelope)),
    tags(
        (name = "health", description = "health, probes, metrics, task types"),
        (name = "admin", description = "import and account tokens (super_admin)"),
        (name = "orders", description = "package orders, payments, package poll"),
        (name = "assets", description = "card and device switches, bindings"),
        (name = "priority items", description = "the priority queue's items"),
        (name = "manual triggers", description = "the ordinary manual trigger"),
        (name = "scheduler", description = "the scheduling cycle")
    )
)]
pub struct ApiDoc;

/// The document without the configured task types: [`ApiDoc`] plus what utoipa does not say.
pub fn document() -> Value {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
    for (name, schema) in answer_schemas() {
        if let Some(s) = doc.pointer_mut(&format!("/components/schemas/{name}")) {
            *s = schema;
        }
    }
    rakuten_edge::openapi::add_bearer_scheme(&mut doc);
    rakuten_edge::openapi::add_edge_responses(
        &mut doc,
        "ErrorEnvelope",
        super::error::PollCode::UnsupportedMediaType.as_i32(),
    );
    for_each_operation(&mut doc, |method, path, op| {
        // One id per operation: the handlers' function names repeat across route files.
        op.insert("operationId".into(), json!(format!("{method} {path}")));
        let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
            return;
        };
        // The quota's 429 always says when to come back (D-ordinary-manual-trigger).
        if let Some(h) = responses
            .get_mut("429")
            .and_then(|r| r.pointer_mut("/headers/Retry-After"))
        {
            h["required"] = json!(true);
            h["schema"] = json!({"type": "integer", "minimum": 1});
        }
    });
    if let Some(account) = doc.pointer_mut("/components/schemas/AccountImport") {
        account["oneOf"] = account_role_rules();
    }
    doc
}

/// Every operation of `doc` as (method, path, operation object).
fn for_each_operation(
    doc: &mut Value,
    mut f: impl FnMut(&str, &str, &mut serde_json::Map<String, Value>),
) {
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        for (method, op) in item.as_object_mut().into_iter().flatten() {
            if let Some(op) = op.as_object_mut() {
                f(method, path, op);
            }
        }
    }
}

/// An imported account's `shop_id` by its role (`routes::admin`'s import check): an agent needs
/// one; a platform or super_admin account sees every shop and is refused one; an enterprise
/// account may have one or not.
fn account_role_rules() -> Value {
    json!([
        {"required": ["shop_id"], "properties": {"role": {"const": "agent"}, "shop_id": {"type": "string"}}},
        {"properties": {"role": {"enum": ["platform", "super_admin"]}, "shop_id": {"type": "null"}}},
        {"properties": {"role": {"const": "enterprise"}}},
    ])
}

/// The served document: [`document`] with `TaskTypeName` the enum of the task types this
/// instance is configured with, since a request naming any other is refused (1003).
pub fn with_task_types(mut doc: Value, names: &[String]) -> Value {
    if let Some(s) = doc.pointer_mut("/components/schemas/TaskTypeName") {
        *s = json!({"type": "string", "description": s["description"], "enum": names});
    }
    doc
}

/// The `/openapi.json` route, serving [`with_task_types`] of this instance's task types.
pub fn router(task_types: &[String]) -> Router<AppState> {
    let doc = with_task_types(document(), task_types);
    Router::new().route(
        "/openapi.json",
        get(move || {
            let doc = doc.clone();
            async move { axum::Json(doc) }
        }),
    )
}

#[cfg(test)]
mod tests {
    /// `v`, or the component schema it refers to (`$ref`).
    fn resolve<'a>(doc: &'a serde_json::Value, v: &'a serde_json::Value) -> &'a serde_json::Value {
        match v["$ref"].as_str().and_then(|r| r.strip_prefix('#')) {
            Some(pointer) => doc.pointer(pointer).unwrap_or(v),
            None => v,
        }
    }

    /// The request body schema of an operation, its `$ref` resolved.
    fn body<'a>(doc: &'a serde_json::Value, method: &str, path: &str) -> &'a serde_json::Value {
        resolve(
            doc,
            &doc["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"],
        )
    }

    /// The `required` list of a body schema.
    fn required_of(body: &serde_json::Value) -> Vec<&str> {
        body["required"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| r.as_str().unwrap())
            .collect()
    }

    #[test]
    fn the_document_lists_every_route_with_the_edge_statuses() {
        let doc = super::document();
        let paths = doc["paths"].as_object().unwrap();
        // Every route outside the console (`tests/api/access.rs` compares them with the router).
        assert_eq!(paths.len(), 23);
        let import = &doc["paths"]["/api/admin/import"]["post"]["responses"];
        for s in ["200", "401", "403", "409", "413", "422", "503"] {
            assert!(import.get(s).is_some(), "import lacks {s}");
        }
        let health = &doc["paths"]["/health"]["get"]["responses"];
        assert!(health.get("503").is_some() && health.get("401").is_some());
        assert!(doc["paths"]["/health"]["get"].get("security").is_none());
        // A body may be refused for its content coding; a route without one never is.
        assert!(import.get("415").is_some());
        assert!(health.get("415").is_none());
    }

    /// `/health`'s `clock` is documented as an object whose `status` names every state (never
    /// `null`, D-poll-clock-skew-no-claims).
    #[test]
    fn a_new_order_requires_its_kind_as_the_server_does() {
        let doc = super::document();
        let body = body(&doc, "post", "/api/orders");
        let required = required_of(body);
        assert_eq!(required, ["asset_type", "asset_id", "kind"], "{body}");
    }

    /// An optional key sent as `null` is read as absent by the server (its field is an `Option`),
    /// so the document allows `null` there; a client generated from it may send one.
    #[test]
    fn optional_keys_the_server_reads_as_absent_when_null_are_documented_nullable() {
        let doc = super::document();
        let body = |method: &str, path: &str| body(&doc, method, path).clone();
        for (method, path, key) in [
            ("post", "/api/orders", "id"),
            ("post", "/api/priority-items", "task_types"),
            ("post", "/api/priority-items", "event_id"),
            ("post", "/api/manual-triggers", "task_types"),
            ("put", "/api/devices/{device_no}/reported-slot", "iccid"),
        ] {
            let b = body(method, path);
            let types = b["properties"][key]["type"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            assert!(
                types.contains(&serde_json::json!("null")),
                "{method} {path}: {key} is not nullable: {b}"
            );
            assert!(
                !required_of(&b).contains(&key),
                "{method} {path}: {key} is required"
            );
        }
    }

    /// The manual enqueue's schema left `reason` optional
    /// and capped `task_types` at 16, while the server requires a reason and takes 32.
    #[test]
    fn the_manual_enqueue_documents_its_required_reason_and_task_type_limit() {
        let doc = super::document();
        let body = body(&doc, "post", "/api/priority-items");
        let required = required_of(body);
        assert_eq!(required, ["asset_type", "asset_id", "reason"], "{body}");
        assert_eq!(
            body["properties"]["task_types"]["maxItems"],
            crate::http::routes::MAX_TASK_TYPES,
            "{body}"
        );
    }

    /// `/metrics` answers Prometheus text; documented as the JSON envelope, every answer broke
    /// the document (schemathesis: undocumented content type).
    #[test]
    fn metrics_is_documented_as_prometheus_text() {
        let doc = super::document();
        let ok = &doc["paths"]["/metrics"]["get"]["responses"]["200"]["content"];
        assert!(ok["text/plain"].is_object(), "{ok}");
        assert!(ok.get("application/json").is_none(), "{ok}");
    }

    #[test]
    fn health_documents_the_clock_states() {
        let doc = super::document();
        let ok = resolve(
            &doc,
            &doc["paths"]["/health"]["get"]["responses"]["200"]["content"]["application/json"]["schema"],
        );
        let ok = &ok["allOf"][1]["properties"]["data"]["anyOf"][1]["properties"];
        assert_eq!(
            ok["clock"]["properties"]["status"]["enum"],
            serde_json::json!(["off", "no_shared_clock", "not_yet_measured", "ok", "skewed"])
        );
        assert_eq!(ok["clock"]["type"], "object");
        assert_eq!(
            ok["schedule_config"]["properties"]["status"]["enum"],
            serde_json::json!(["not_yet_checked", "same", "differs"])
        );
    }

    /// Every operation naming a card or device — the manual enqueue, the manual trigger
    /// (D-poll-error-codes), the admin switches and the package poll (D-poll-error-codes) — documents its own
    /// 404 code (7006), not 1005.
    #[test]
    fn routes_naming_a_card_or_device_document_code_7006_for_an_unknown_one() {
        let doc = super::document();
        for (path, method) in [
            ("/api/priority-items", "post"),
            ("/api/manual-triggers", "post"),
            ("/api/package-poll", "post"),
            ("/api/cards/{iccid}/polling", "put"),
            ("/api/cards/{iccid}/stop-lock", "put"),
            ("/api/cards/{iccid}", "delete"),
            ("/api/devices/{device_no}/polling", "put"),
            ("/api/devices/{device_no}/reported-slot", "put"),
        ] {
            let d = doc["paths"][path][method]["responses"]["404"]["description"]
                .as_str()
                .unwrap_or_default();
            assert!(d.contains("7006") && !d.contains("1005"), "{path}: {d}");
        }
    }
}
