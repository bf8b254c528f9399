//! The OpenAPI document at `/openapi.json` (unauthenticated, like the gateway's): every route of
//! [`super::router`], its parameters, request body shape and every status it can answer, each
//! error in the envelope. Written as one table in this file (the handlers carry no `utoipa`
//! attributes: their request and answer types live in the store and domain modules); the edge's
//! statuses (401/403/413/422/503) are added by `rakuten_edge::openapi::add_edge_responses`.

use axum::Router;
use axum::routing::get;
use serde_json::{Value, json};

use crate::priority::TriggerType;
use crate::priority::item_status::ItemStatus;
use crate::state::AppState;

fn string() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": 128})
}

/// An optional key: [`string`], or `null`, which the server reads as absent (a top shop's
/// `parent_id`, an account without a shop, a device reporting no slot, an order without its own id,
/// an enqueue without an event id).
fn optional_string() -> Value {
    json!({"type": ["string", "null"], "minLength": 1, "maxLength": 128})
}

/// A request object: every body the API reads refuses a field it does not know (a typo is a 422,
/// never silently ignored), so the schema says so too.
fn object(required: &[&str], props: Value) -> Value {
    json!({"type": "object", "required": required, "properties": props, "additionalProperties": false})
}

fn asset() -> Value {
    object(
        &["asset_type", "asset_id"],
        json!({"asset_type": {"type": "string", "enum": ["card", "device"]}, "asset_id": string()}),
    )
}

fn reason() -> Value {
    object(
        &["reason"],
        json!({"reason": {"type": "string", "minLength": 1, "maxLength": 500}}),
    )
}

/// `base` with the properties of `extra` added, of which `required` are required too.
fn with(base: Value, extra: Value, required: &[&str]) -> Value {
    let mut v = base;
    if let (Some(props), Some(extra)) = (v["properties"].as_object_mut(), extra.as_object()) {
        for (k, s) in extra {
            props.insert(k.clone(), s.clone());
        }
    }
    if let Some(list) = v["required"].as_array_mut() {
        list.extend(required.iter().map(|r| json!(r)));
    }
    v
}

/// One operation: method, path, tag, summary, whether it needs a token, body schema, extra
/// error statuses beyond the edge's (404, 409, 429), query parameters, and the schema of the
/// 200's `data` where it is written down (`None`: any).
struct Op {
    method: &'static str,
    path: &'static str,
    tag: &'static str,
    summary: &'static str,
    auth: bool,
    body: Option<Value>,
    errors: &'static [(&'static str, &'static str)],
    query: Value,
    data: Option<Value>,
    /// The 200 answer is Prometheus text, not the JSON envelope (`/metrics`).
    plain_text: bool,
}

/// `/health`'s `data`: the status alone without a token, everything with one. Its `clock` and
/// `schedule_config` are written out in full (D-poll-clock-skew-no-claims, D-schedule-config-check); the other parts are
/// described by `routes::health`.
fn health_data() -> Value {
    let clock = json!({
        "type": "object",
        "description": "this instance's clock and its check against the shared database's (RAKUTEN_POLL_CLOCK_MAX_SKEW_SECS); never null",
        "required": ["status", "now", "max_skew_ms", "offset_ms", "skewed", "checked_at"],
        "properties": {
            "status": {"type": "string", "enum": ["off", "no_shared_clock", "not_yet_measured", "ok", "skewed"],
                "description": "off: the check is off; no_shared_clock: SQLite, nothing to compare with; not_yet_measured: no claim tried yet; ok / skewed: the last measurement (skewed: this instance makes no claims)"},
            "now": {"type": "string", "format": "date-time", "description": "this instance's clock when it answered"},
            "max_skew_ms": {"type": ["integer", "null"], "minimum": 0, "description": "the tolerance; null with the check off"},
            "offset_ms": {"type": ["integer", "null"], "description": "the database's clock minus this instance's at the last measurement; null before one"},
            "skewed": {"type": "boolean", "description": "the last measurement was beyond the tolerance"},
            "checked_at": {"type": ["string", "null"], "format": "date-time", "description": "when the last measurement was made; null before one"},
        },
    });
    let config = json!({"type": "object", "required": ["shards", "task_types"], "properties": {
        "shards": {"type": "integer", "minimum": 1},
        "task_types": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1},
            "description": "task type name → interval, seconds"},
    }});
    let schedule_config = json!({
        "type": "object",
        "description": "whether the ordinary polling schedule's configuration stored for every instance is still this instance's; checked every 30 s",
        "required": ["status", "checked_at", "instance", "stored"],
        "properties": {
            "status": {"type": "string", "enum": ["not_yet_checked", "same", "differs"],
                "description": "differs: another instance started with other RAKUTEN_POLL_TASK_TYPES / RAKUTEN_POLL_SHARDS rewrote it; this one schedules by its own until restarted"},
            "checked_at": {"type": ["string", "null"], "format": "date-time"},
            "instance": config.clone(),
            "stored": {"anyOf": [config, {"type": "null"}]},
        },
    });
    json!({"anyOf": [
        {"type": "object", "required": ["status", "database"], "properties": {
            "status": {"type": "string", "enum": ["ok", "unavailable"]},
            "database": {"type": "string", "enum": ["reachable", "unreachable"]},
        }},
        {"type": "object", "required": ["status", "database", "hint_backend", "hint_channel_reachable", "queues", "last_cycle_at", "clock", "schedule_config"], "properties": {
            "status": {"type": "string", "enum": ["ok", "unavailable"]},
            "database": {"type": "object"},
            "hint_backend": {"type": "string", "enum": ["memory", "redis"]},
            "hint_channel_reachable": {"type": "boolean"},
            "queues": {"type": "array"},
            "last_cycle_at": {"type": ["string", "null"], "format": "date-time"},
            "clock": clock,
            "schedule_config": schedule_config,
        }},
    ]})
}

const NOT_FOUND: (&str, &str) = ("404", "not found (1005, or 7001 for a priority item)");
/// The 404 of a manual enqueue / manual trigger naming an unknown or out-of-scope card or device.
const ASSET_NOT_FOUND: (&str, &str) = ("404", "unknown or out-of-scope card or device (7006)");
/// The 404 of an admin route naming an unknown card or device (D-poll-error-codes): the same code as
/// [`ASSET_NOT_FOUND`]; an admin has no scope to be outside of.
const UNKNOWN_ASSET: (&str, &str) = ("404", "unknown card or device (7006)");
const CONFLICT: (&str, &str) = ("409", "conflicting state (1006, 7002, 7003, 7005)");
/// Every operation with a body: bodies are read uncompressed (D-body-coding-type-and-size) and must be sent as
/// JSON (D-body-coding-type-and-size).
const UNSUPPORTED_ENCODING: (&str, &str) = (
    "415",
    "a Content-Encoding other than identity, or a body not sent as `Content-Type: \
     application/json` (7007); `Accept-Encoding: identity`",
);

fn ops() -> Vec<Op> {
    let switch = object(&["enabled"], json!({"enabled": {"type": "boolean"}}));
    // `null` is read as absent (every task type), as for any optional key.
    let task_types = json!({"type": ["array", "null"], "items": {"type": "string"}, "minItems": 1,
        "maxItems": crate::http::routes::MAX_TASK_TYPES});
    let list_query = json!([
        {"name": "status", "in": "query", "schema": {"type": "string", "enum": ItemStatus::ALL.map(ItemStatus::as_str)}},
        {"name": "task_type", "in": "query", "schema": {"type": "string"},
         "description": "a configured task type (`GET /api/task-types`); any other is a 422 (1003), as in the manual enqueue"},
        {"name": "trigger_type", "in": "query", "schema": {"type": "string", "enum": TriggerType::ALL.map(TriggerType::as_str)}},
        {"name": "iccid", "in": "query", "schema": {"type": "string"}},
        {"name": "enqueued_from", "in": "query", "schema": {"type": "string", "format": "date-time"}},
        {"name": "enqueued_to", "in": "query", "schema": {"type": "string", "format": "date-time"}},
        {"name": "exception", "in": "query", "schema": {"type": "string"},
         "description": "a comma list of `any`, `failed`, `expired`, `attempts_at_max`, `has_failure_reason`"},
        {"name": "before_id", "in": "query", "schema": {"type": "integer", "format": "int64", "minimum": 1},
         "description": "keyset cursor: the last id of the previous page (`next_before_id`); below 1 is a 422 (1003)"},
        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 200}},
    ]);
    let rows = |required: &[&str], props: Value| json!({"type": "array", "items": object(required, props)});
    let import = json!({"type": "object", "additionalProperties": false, "properties": {
        "shops": rows(&["id", "name"], json!({"id": string(), "parent_id": optional_string(), "name": {"type": "string", "minLength": 1, "maxLength": 200}})),
        "accounts": rows(&["id", "role", "token"], json!({"id": string(), "role": {"type": "string", "enum": ["super_admin", "platform", "agent", "enterprise"]}, "shop_id": optional_string(), "token": {"type": "string", "minLength": 16, "maxLength": 256}, "perm_card_data": {"type": "boolean"}, "perm_manual_trigger": {"type": "boolean"}})),
        "cards": rows(&["iccid", "shop_id"], json!({"iccid": string(), "shop_id": string(), "polling_enabled": {"type": "boolean"}, "stop_locked": {"type": "boolean"}})),
        "devices": rows(&["device_no", "shop_id"], json!({"device_no": string(), "shop_id": string(), "polling_enabled": {"type": "boolean"}, "reported_slot_iccid": optional_string()})),
        "bindings": rows(&["device_no", "iccid"], json!({"device_no": string(), "iccid": string(), "active": {"type": "boolean"}})),
    }});
    let op = |method, path, tag, summary, body: Option<Value>, errors| Op {
        method,
        path,
        tag,
        summary,
        auth: true,
        body,
        errors,
        query: json!([]),
        data: None,
        plain_text: false,
    };
    vec![
        Op {
            auth: false,
            data: Some(health_data()),
            ..op(
                "get",
                "/health",
                "health",
                "database reachability (503 when it cannot be read); with a super_admin or platform token also open items by status, oldest pending age, queue depths (an agent's token: the status alone)",
                None,
                &[
                    ("401", "a token was sent and is not an account's (1001)"),
                    ("403", "an enterprise account's token (1002)"),
                ],
            )
        },
        Op {
            auth: false,
            ..op(
                "get",
                "/livez",
                "health",
                "the process answers (no database, no channel)",
                None,
                &[],
            )
        },
        Op {
            auth: false,
            ..op(
                "get",
                "/readyz",
                "health",
                "the database answers within 2 s and takes writes (else 503, code 1503)",
                None,
                &[],
            )
        },
        Op {
            plain_text: true,
            ..op(
                "get",
                "/metrics",
                "health",
                "Prometheus text (`text/plain; version=0.0.4`), not the envelope: open items, lane depths, cycles, carrier calls (super_admin, platform)",
                None,
                &[],
            )
        },
        op(
            "get",
            "/api/task-types",
            "health",
            "configured task types (any account but enterprise)",
            None,
            &[],
        ),
        Op {
            query: json!([
                {"name": "existing", "in": "query", "schema": {"type": "string", "enum": ["refuse", "skip"]},
                 "description": "a shop, account, card or device whose key is stored: `refuse` (default, 409) or `skip` when the stored row has the same values (counted in `skipped`; a row that differs is still a 409 naming the fields)"},
            ]),
            ..op(
                "post",
                "/api/admin/import",
                "admin",
                "import shops, accounts, cards, devices, bindings (32 MiB)",
                Some(import),
                &[CONFLICT],
            )
        },
        op(
            "put",
            "/api/admin/accounts/{id}/token",
            "admin",
            "replace an imported account's token: the old one signs nothing in any more and the console sessions it opened end; gives a revoked account a token again (super_admin)",
            Some(object(
                &["token"],
                json!({"token": {"type": "string", "minLength": 16, "maxLength": 256}}),
            )),
            &[
                ("404", "unknown account (1005)"),
                ("409", "the token is another account's (1006)"),
            ],
        ),
        op(
            "delete",
            "/api/admin/accounts/{id}/token",
            "admin",
            "revoke an imported account's token: it signs nothing in any more and the console sessions it opened end (super_admin)",
            None,
            &[("404", "unknown account (1005)")],
        ),
        op(
            "post",
            "/api/orders",
            "orders",
            "create an unpaid package order",
            Some(with(
                asset(),
                json!({"id": optional_string(), "kind": {"type": "string", "enum": ["main", "addon"]}}),
                &["kind"],
            )),
            &[NOT_FOUND, CONFLICT],
        ),
        op(
            "post",
            "/api/payments/callback",
            "orders",
            "settle an order (idempotent by payment id)",
            Some(object(
                &["payment_id", "order_id", "status"],
                json!({"payment_id": string(), "order_id": string(), "status": {"type": "string", "enum": ["paid", "failed", "cancelled"]}}),
            )),
            &[NOT_FOUND, CONFLICT],
        ),
        op(
            "post",
            "/api/usages/{id}/activate",
            "orders",
            "activate a queued main package",
            None,
            &[NOT_FOUND, CONFLICT],
        ),
        op(
            "post",
            "/api/package-poll",
            "orders",
            "the ordinary package poll's verdict for an asset",
            Some(asset()),
            &[UNKNOWN_ASSET, CONFLICT],
        ),
        op(
            "put",
            "/api/cards/{iccid}/polling",
            "assets",
            "card polling switch",
            Some(switch.clone()),
            &[UNKNOWN_ASSET],
        ),
        op(
            "put",
            "/api/cards/{iccid}/stop-lock",
            "assets",
            "carrier stop lock",
            Some(object(&["locked"], json!({"locked": {"type": "boolean"}}))),
            &[UNKNOWN_ASSET],
        ),
        op(
            "delete",
            "/api/cards/{iccid}",
            "assets",
            "delete a card",
            None,
            &[UNKNOWN_ASSET],
        ),
        op(
            "put",
            "/api/devices/{device_no}/polling",
            "assets",
            "device polling switch",
            Some(switch),
            &[UNKNOWN_ASSET],
        ),
        op(
            "put",
            "/api/devices/{device_no}/reported-slot",
            "assets",
            "the slot the device reports",
            Some(object(&[], json!({"iccid": optional_string()}))),
            &[UNKNOWN_ASSET],
        ),
        op(
            "put",
            "/api/bindings",
            "assets",
            "bind or unbind a card and a device",
            Some(object(
                &["device_no", "iccid"],
                json!({"device_no": string(), "iccid": string(), "active": {"type": "boolean"}}),
            )),
            &[NOT_FOUND],
        ),
        Op {
            query: list_query,
            ..op(
                "get",
                "/api/priority-items",
                "priority items",
                "list (scoped to the caller's shops)",
                None,
                &[],
            )
        },
        op(
            "post",
            "/api/priority-items",
            "priority items",
            "manual enqueue",
            Some(with(
                asset(),
                json!({"task_types": task_types, "reason": {"type": "string", "minLength": 1, "maxLength": 500}, "event_id": optional_string()}),
                // A manual enqueue without a reason is a 422 (the spec asks for one).
                &["reason"],
            )),
            // No 429: a manual enqueue is never refused for the manual trigger's quota.
            &[ASSET_NOT_FOUND, CONFLICT],
        ),
        op(
            "get",
            "/api/priority-items/{id}",
            "priority items",
            "detail",
            None,
            &[NOT_FOUND],
        ),
        op(
            "post",
            "/api/priority-items/{id}/close",
            "priority items",
            "close",
            Some(reason()),
            &[NOT_FOUND, CONFLICT],
        ),
        op(
            "post",
            "/api/priority-items/{id}/retrigger",
            "priority items",
            "retrigger a failed or expired item",
            Some(reason()),
            &[NOT_FOUND, CONFLICT],
        ),
        op(
            "post",
            "/api/manual-triggers",
            "manual triggers",
            "ordinary manual trigger (quota, 24 h dedupe)",
            Some(object(
                &["iccid"],
                json!({"iccid": string(), "task_types": task_types}),
            )),
            &[
                ASSET_NOT_FOUND,
                CONFLICT,
                (
                    "429",
                    "daily quota used up (7004); `Retry-After`: seconds until it resets at 00:00 UTC",
                ),
            ],
        ),
        op(
            "get",
            "/api/scheduler/last-cycle",
            "scheduler",
            "the last scheduling cycle",
            None,
            &[],
        ),
    ]
}

fn path_params(path: &str) -> Vec<Value> {
    path.split('/')
        .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| {
            let schema = if path.starts_with("/api/priority-items/") && name == "id" {
                // Canonical decimal, 1..=i64::MAX (D-item-ids-and-list-filters); anything else is a 422.
                json!({"type": "string", "pattern": "^[1-9][0-9]{0,18}$"})
            } else {
                string()
            };
            json!({"name": name, "in": "path", "required": true, "schema": schema})
        })
        .collect()
}

/// The document as written in the table (without the edge's statuses).
pub fn document() -> Value {
    let mut paths = serde_json::Map::new();
    for o in ops() {
        let envelope = json!({"$ref": "#/components/schemas/Envelope"});
        let ok = match &o.data {
            Some(data) => json!({"allOf": [envelope, {"properties": {"data": data}}]}),
            None => envelope,
        };
        let mut responses = if o.plain_text {
            json!({"200": {"description": "ok", "content": {"text/plain": {"schema": {"type": "string"}}}}})
        } else {
            json!({"200": {"description": "ok", "content": {"application/json": {"schema": ok}}}})
        };
        let mut errors = o.errors.to_vec();
        if o.body.is_some() {
            errors.push(UNSUPPORTED_ENCODING);
        }
        for (status, what) in errors {
            responses[status] = json!({"description": what, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}}});
            if status == "429" {
                // The quota's 429 says when to come back (D-ordinary-manual-trigger).
                responses[status]["headers"] = json!({"Retry-After": {
                    "description": "seconds until the daily quota resets (00:00 UTC)",
                    "required": true,
                    "schema": {"type": "integer", "minimum": 1},
                }});
            }
        }
        let mut params = path_params(o.path);
        params.extend(o.query.as_array().cloned().unwrap_or_default());
        let mut operation = json!({
            "tags": [o.tag],
            "summary": o.summary,
            "operationId": format!("{} {}", o.method, o.path),
            "responses": responses,
        });
        if !params.is_empty() {
            operation["parameters"] = Value::Array(params);
        }
        if let Some(body) = o.body {
            operation["requestBody"] =
                json!({"required": true, "content": {"application/json": {"schema": body}}});
        }
        if o.auth {
            operation["security"] = json!([{"bearer": []}]);
        }
        paths
            .entry(o.path)
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .map(|item| item.insert(o.method.to_owned(), operation));
    }
    json!({
        "openapi": "3.1.0",
        "info": {"title": "card-polling", "version": env!("CARGO_PKG_VERSION"), "description": "Priority polling queue for IoT cards (spec priority-polling-queue.md)"},
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Envelope": {"type": "object", "required": ["success", "msg", "data", "code"], "properties": {
                    "success": {"type": "boolean", "const": true}, "msg": {"type": "string"}, "data": {}, "code": {"type": "integer"}}},
                "ErrorEnvelope": {"type": "object", "required": ["success", "msg", "data", "code"], "properties": {
                    "success": {"type": "boolean", "const": false}, "msg": {"type": "string", "minLength": 1}, "data": {"type": "null"}, "code": {"type": "integer"}}},
            },
        },
    })
}

/// The served document: the table with the edge's statuses added.
pub fn openapi() -> Value {
    let mut doc = document();
    rakuten_edge::openapi::add_edge_responses(&mut doc, "ErrorEnvelope");
    doc
}

/// The `/openapi.json` route.
pub fn router() -> Router<AppState> {
    let doc = openapi();
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
    /// The `required` list of a body schema.
    fn required_of(body: &serde_json::Value) -> Vec<&str> {
        body["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect()
    }

    #[test]
    fn the_document_lists_every_route_with_the_edge_statuses() {
        let doc = super::openapi();
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
        let doc = super::openapi();
        let body = &doc["paths"]["/api/orders"]["post"]["requestBody"]["content"]["application/json"]
            ["schema"];
        let required = required_of(body);
        assert_eq!(required, ["asset_type", "asset_id", "kind"], "{body}");
    }

    /// An optional key sent as `null` is read as absent by the server (its field is an `Option`),
    /// so the document allows `null` there; a client generated from it may send one.
    #[test]
    fn optional_keys_the_server_reads_as_absent_when_null_are_documented_nullable() {
        let doc = super::openapi();
        let body = |method: &str, path: &str| {
            doc["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]
                .clone()
        };
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
        let doc = super::openapi();
        let body = &doc["paths"]["/api/priority-items"]["post"]["requestBody"]["content"]["application/json"]
            ["schema"];
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
        let doc = super::openapi();
        let ok = &doc["paths"]["/metrics"]["get"]["responses"]["200"]["content"];
        assert!(ok["text/plain"].is_object(), "{ok}");
        assert!(ok.get("application/json").is_none(), "{ok}");
    }

    #[test]
    fn health_documents_the_clock_states() {
        let doc = super::openapi();
        let ok = &doc["paths"]["/health"]["get"]["responses"]["200"]["content"]["application/json"]
            ["schema"]["allOf"][1]["properties"]["data"]["anyOf"][1]["properties"];
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
        let doc = super::openapi();
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
