//! The served OpenAPI document against the router: every API route (path and method) is in the
//! document and every documented operation is served, so a client generated from the document
//! reaches every route and calls nothing that is missing; and the rules the document states are
//! the server's (D-openapi-states-server-rules).

use std::collections::BTreeSet;

use reqwest::Method;
use serde_json::{Value, json};

use super::helpers::{ADMIN, spawn_app, spawn_seeded};

/// Methods a route could take; `HEAD` follows `GET`.
const METHODS: [Method; 5] = [
    Method::GET,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
];

/// A concrete path for a pattern: each `{param}` segment becomes an id no record has (a number
/// for a priority item, whose id is one).
fn concrete(pattern: &str) -> String {
    pattern
        .split('/')
        .map(|seg| match seg {
            "{id}" if pattern.starts_with("/api/priority-items/") => "999999",
            s if s.starts_with('{') => "no-such-id",
            s => s,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// A route added to the router without an `#[utoipa::path]` in `openapi::ApiDoc` is invisible
/// to generated clients and to schemathesis; a documented operation without a route is a 404 or
/// 405 for a client that trusts the document. Each served path outside the console and the
/// document itself is called with every method (the router's 405 marks a method it lacks) and
/// the (method, path) pairs it serves must be the document's operations, no more and no fewer.
#[super::lane]
#[tokio::test]
async fn every_served_api_route_is_documented_and_every_documented_operation_is_served() {
    let app = spawn_app().await;
    let (s, text) = app.raw(Method::GET, "/openapi.json", None).await;
    assert_eq!(s, 200, "{text}");
    let doc: Value = serde_json::from_str(&text).unwrap();
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            documented.insert((method.to_uppercase(), path.clone()));
        }
    }
    let paths: BTreeSet<&str> = card_polling::http::served_routes()
        .into_iter()
        .map(|(_, p)| p)
        .filter(|p| !p.starts_with("/console") && *p != "/openapi.json")
        .collect();
    let mut served = BTreeSet::new();
    for path in paths {
        for method in METHODS {
            let (status, _) = app.raw(method.clone(), &concrete(path), Some(ADMIN)).await;
            if status != 405 {
                served.insert((method.as_str().to_owned(), path.to_owned()));
            }
        }
    }
    let undocumented: Vec<_> = served.difference(&documented).collect();
    let unserved: Vec<_> = documented.difference(&served).collect();
    assert!(
        undocumented.is_empty() && unserved.is_empty(),
        "served but not in /openapi.json: {undocumented:?}; documented but not served: {unserved:?}"
    );
    // The check itself sees routes.
    assert!(served.contains(&("POST".to_owned(), "/api/priority-items".to_owned())));
}

/// schemathesis sent requests the document allowed and the server refused with 422 (inputs
/// below): ids with a C1 control character in a path (`/api/admin/accounts/%C2%A6%C2%81/token`,
/// `/api/cards/…`, `/api/usages/…/activate`, `/api/devices/…`) and in a body (`order_id`), an
/// empty `task_type` filter, empty task type names, a reason of U+0091, a token the server took
/// for one with a space. Each such field now carries the server's own rule, and the only task type
/// names a request may use are the configured ones.
#[super::lane]
#[tokio::test]
async fn the_served_document_states_the_rules_the_server_enforces() {
    let app = spawn_app().await;
    let (_, text) = app.raw(Method::GET, "/openapi.json", None).await;
    let doc: Value = serde_json::from_str(&text).unwrap();
    let schemas = &doc["components"]["schemas"];
    let param = |path: &str, method: &str, name: &str| -> Value {
        doc["paths"][path][method]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{method} {path} has no {name}"))["schema"]
            .clone()
    };
    let key = json!("#/components/schemas/Key");
    // Keys in paths: `domain::parse_key`'s rules (D-id-rules); an account id also refuses `admin`.
    let id_pattern = rakuten_types::schema::id_pattern();
    assert_eq!(schemas["Key"]["pattern"], id_pattern.as_str());
    // The inputs refused, refused by the predicate the pattern is built from.
    for bad in ["\u{a6}\u{81}", "\u{81}", " a", "a/b", "a..b", "\u{200b}"] {
        assert!(card_polling::domain::parse_key("id", bad).is_err(), "{bad:?}");
    }
    for (path, method, name) in [
        ("/api/cards/{iccid}", "delete", "iccid"),
        ("/api/cards/{iccid}/polling", "put", "iccid"),
        ("/api/cards/{iccid}/stop-lock", "put", "iccid"),
        ("/api/devices/{device_no}/polling", "put", "device_no"),
        ("/api/devices/{device_no}/reported-slot", "put", "device_no"),
        ("/api/usages/{id}/activate", "post", "id"),
    ] {
        assert_eq!(param(path, method, name)["$ref"], key, "{method} {path}");
    }
    for method in ["put", "delete"] {
        assert_eq!(
            param("/api/admin/accounts/{id}/token", method, "id")["$ref"],
            "#/components/schemas/AccountId"
        );
    }
    assert!(schemas["AccountId"]["pattern"].as_str().unwrap().starts_with("^(?!admin$)"));
    assert_eq!(schemas["PaymentCallback"]["properties"]["order_id"]["pattern"], id_pattern.as_str());
    assert_eq!(param("/api/priority-items", "get", "iccid")["pattern"], id_pattern.as_str());
    // Task types: the configured names, in the filter and in both bodies.
    let configured = app.settings.task_types.names();
    assert_eq!(schemas["TaskTypeName"]["enum"], json!(configured));
    let name = json!("#/components/schemas/TaskTypeName");
    assert_eq!(param("/api/priority-items", "get", "task_type")["$ref"], name);
    for body in ["EnqueueBody", "TriggerBody"] {
        let list = &schemas[body]["properties"]["task_types"];
        assert_eq!(list["items"]["$ref"], name, "{body}");
        assert_eq!((&list["minItems"], &list["maxItems"]), (&json!(1), &json!(32)), "{body}");
    }
    // Reasons: one line (`parse_reason`), in close and retrigger and the manual enqueue.
    let reason = rakuten_types::schema::line_reason_pattern();
    for body in ["ReasonBody", "EnqueueBody"] {
        assert_eq!(schemas[body]["properties"]["reason"]["pattern"], reason.as_str(), "{body}");
        assert_eq!(schemas[body]["properties"]["reason"]["maxLength"], 500, "{body}");
    }
    assert!(card_polling::priority::manual::parse_reason(Some("\u{91}")).is_err());
    // Tokens: 16 to 256 characters without a space or control character.
    for token in [&schemas["NewToken"]["properties"]["token"], &schemas["AccountImport"]["properties"]["token"]] {
        assert_eq!((&token["minLength"], &token["maxLength"]), (&json!(16), &json!(256)), "{token}");
        assert!(token["pattern"].as_str().unwrap().contains("\\u0020"), "{token}");
    }
    // An imported account's shop by its role.
    assert_eq!(schemas["AccountImport"]["oneOf"].as_array().map(Vec::len), Some(3));
    // Every reference resolves (a schema named only by a parameter is registered too).
    let text = doc.to_string();
    for name in text.split("\"#/components/schemas/").skip(1) {
        let name = &name[..name.find('"').unwrap()];
        assert!(schemas[name].is_object(), "{name} is referenced but not defined");
    }
}

/// An order for an asset, a binding of a card or device, an import row naming a parent shop, that
/// does not exist were refused with 422 (1003), the answer of a malformed request, though only
/// the stored state made them wrong: they are 404 now (7006 for a card or device, 1005 for a
/// shop), naming what is missing (D-unknown-reference-is-404). Inputs from schemathesis.
#[super::lane]
#[tokio::test]
async fn a_request_naming_something_that_does_not_exist_is_a_404_not_a_422() {
    let app = spawn_seeded().await;
    let (s, v) = app
        .send(
            Method::POST,
            "/api/orders",
            Some(ADMIN),
            Some(json!({"asset_id": "0", "asset_type": "card", "id": "0", "kind": "addon"})),
        )
        .await;
    assert_eq!((s, &v["code"], &v["msg"]), (404, &json!(7006), &json!("unknown card 0")), "{v}");
    let (s, v) = app
        .send(
            Method::PUT,
            "/api/bindings",
            Some(ADMIN),
            Some(json!({"active": false, "device_no": "0", "iccid": "00"})),
        )
        .await;
    assert_eq!((s, &v["code"]), (404, &json!(7006)), "{v}");
    assert_eq!(v["msg"], "device 0 and card 00 are unknown");
    let (s, v) = app
        .send(
            Method::POST,
            "/api/admin/import?existing=refuse",
            Some(ADMIN),
            Some(json!({"accounts": [], "bindings": [], "cards": [], "devices": [], "shops": [{"id": "0", "name": "0", "parent_id": "00"}]})),
        )
        .await;
    assert_eq!((s, &v["code"]), (404, &json!(1005)), "{v}");
    assert_eq!(v["msg"], "shops row 1 (id 0): shop 0 has an unknown parent 00");
}
