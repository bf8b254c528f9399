//! The served OpenAPI document against the router: every API route (path and method) is in the
//! document and every documented operation is served, so a client generated from the document
//! reaches every route and calls nothing that is missing.

use std::collections::BTreeSet;

use reqwest::Method;
use serde_json::Value;

use serde_json::json;

use crate::helpers::{answer, spawn_app};

/// Methods a route could take; `HEAD` follows `GET` (and the lease routes refuse it on purpose).
const METHODS: [Method; 5] = [
    Method::GET,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
];

/// Served paths that are not the JSON API: the console's HTML pages and static files, and the
/// document itself.
fn outside_the_api() -> BTreeSet<&'static str> {
    order_gateway::console::routes()
        .into_iter()
        .map(|(path, _)| path)
        .chain(order_gateway::console::STATIC_PATHS)
        .chain(["/openapi.json"])
        .collect()
}

/// A concrete path for a pattern: each `{param}` segment becomes an id no record has.
fn concrete(pattern: &str) -> String {
    pattern
        .split('/')
        .map(|seg| {
            if seg.starts_with('{') {
                "no-such-id"
            } else {
                seg
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// A route added to the router without an `#[utoipa::path]` in `openapi::ApiDoc` was invisible
/// to generated clients and to schemathesis; a documented operation without a route would be
/// a 404 or 405 for a client that trusts the document. Each served API path is called with
/// every method (the router's 405 marks a method it lacks) and the (method, path) pairs it
/// serves must be the document's operations, no more and no fewer.
#[tokio::test]
async fn every_served_api_route_is_documented_and_every_documented_operation_is_served() {
    let app = spawn_app().await;
    let doc: Value = app
        .client
        .get(app.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            documented.insert((method.to_uppercase(), path.clone()));
        }
    }
    let outside = outside_the_api();
    let mut served = BTreeSet::new();
    for path in order_gateway::http::served_paths() {
        if outside.contains(path) {
            continue;
        }
        for method in METHODS {
            let status = app
                .client
                .request(method.clone(), app.url(&concrete(path)))
                .bearer_auth(&app.token)
                .send()
                .await
                .unwrap()
                .status();
            if status != reqwest::StatusCode::METHOD_NOT_ALLOWED {
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
    // The check itself sees routes: the order routes at least.
    assert!(served.contains(&("POST".to_owned(), "/api/orders".to_owned())));
}

/// The document's `maxLength` of `evidence_ref` counts characters, as JSON Schema does; the
/// server counted bytes, so a task with a Japanese id had its 256-character reference refused.
#[tokio::test]
async fn an_evidence_ref_is_bounded_in_characters_as_the_document_says() {
    let app = spawn_app().await;
    let task = "注文-1";
    let grant = app.leased(task, "w1").await;
    let token = grant["lease_token"].clone();
    let prefix = format!("{task}/01-");
    let at_bound = format!("{prefix}{}", "a".repeat(256 - prefix.chars().count()));
    assert!(at_bound.len() > 256, "more bytes than characters");
    let report = |e: &str| json!({"worker_id": "w1", "lease_token": token, "state": "created", "evidence_ref": e});
    let path = format!("/api/orders/{}/report", urlencoding(task));
    let a = answer(
        app.post(&path)
            .json(&report(&at_bound))
            .send()
            .await
            .unwrap(),
    )
    .await;
    a.assert_ok();
    let over = format!("{at_bound}a");
    let a = answer(app.post(&path).json(&report(&over)).send().await.unwrap()).await;
    a.assert_err(422, 1003);
}

fn urlencoding(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'-' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// What the server refuses, the document says: a client generated from it (and schemathesis)
/// sent `site: ""`, a negative `limit`, an empty `reason`, an id with a C1 control character or
/// edge whitespace, and was refused with 422. Each such rule is in the schema now.
#[tokio::test]
async fn the_document_states_the_rules_the_server_enforces() {
    let app = spawn_app().await;
    let doc: Value = app
        .client
        .get(app.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let schemas = &doc["components"]["schemas"];
    let param = |path: &str, method: &str, name: &str| -> Value {
        doc["paths"][path][method]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{method} {path} has no {name}"))
            .clone()
    };
    // Ids: the rules of `parse_id` (D-id-rules), in the body and in the path.
    let id_pattern = rakuten_types::schema::id_pattern();
    for id in ["TaskId", "QueryId", "WorkerId"] {
        assert_eq!(schemas[id]["pattern"], id_pattern.as_str(), "{id}");
        assert_eq!(schemas[id]["maxLength"], 128, "{id}");
    }
    assert_eq!(
        param("/api/orders/{task_id}", "get", "task_id")["schema"]["$ref"],
        "#/components/schemas/TaskId"
    );
    // Only `rakuten` is traded.
    assert_eq!(
        schemas["SubmitOrder"]["properties"]["site"]["enum"],
        json!(["rakuten"])
    );
    assert_eq!(schemas["Site"]["enum"], json!(["rakuten"]));
    // Pages: limit at least 1, offset not negative; every list.
    for path in ["/api/orders", "/api/account/queries", "/api/alerts"] {
        assert_eq!(
            param(path, "get", "limit")["schema"]["minimum"],
            1,
            "{path}"
        );
        assert_eq!(
            param(path, "get", "offset")["schema"]["minimum"],
            0,
            "{path}"
        );
    }
    // A reason is required where the server requires one, with its pattern.
    let retire = param("/api/workers/{worker_id}", "delete", "reason");
    assert_eq!(retire["required"], true, "{retire}");
    assert_eq!(
        schemas["Reason"]["pattern"],
        rakuten_types::schema::reason_pattern().as_str()
    );
    assert_eq!(
        schemas["CancelTask"]["properties"]["reason"]["minLength"],
        1
    );
    // The intent a worker can execute: `item_url` is required, `quantity` 1 to 99.
    let intent = &schemas["SubmitOrder"]["properties"]["intent"];
    assert_eq!(intent["required"], json!(["item_url"]), "{intent}");
    assert_eq!(
        intent["properties"]["quantity"]["maximum"], 99.0,
        "{intent}"
    );
    // Rules that tie one field to another: params by kind, result by success, outcome by state.
    for name in ["SubmitQuery", "QueryResultBody", "ResolveTask"] {
        assert_eq!(
            schemas[name]["oneOf"].as_array().map(Vec::len),
            Some(2),
            "{name}"
        );
    }
    // A report: `outcome` only on a terminal report, and one that fits its state
    // (D-report-outcome-must-fit-state); a terminal report without one needs a state implying it.
    let report = schemas["ReportState"]["oneOf"].as_array().unwrap();
    assert_eq!(report.len(), 5, "{report:?}");
    let states_of = |outcome: &str| {
        report
            .iter()
            .find(|b| b["properties"]["outcome"]["const"] == outcome)
            .map(|b| b["properties"]["state"]["enum"].clone())
    };
    assert_eq!(
        states_of("succeeded"),
        Some(json!([
            "ordered",
            "awaiting_payment",
            "paid",
            "shipped",
            "delivered"
        ]))
    );
    assert_eq!(
        states_of("failed"),
        Some(json!([
            "created",
            "in_cart",
            "ordered",
            "awaiting_payment",
            "cancelled"
        ]))
    );
    assert_eq!(
        report[4]["properties"]["state"]["enum"],
        json!(["paid", "shipped", "delivered", "cancelled"])
    );
    // Renew, report and reclaim take the holder in a required body, and name no query parameter
    // (D-holder-fields-in-body).
    for (path, schema) in [
        ("/api/orders/{task_id}/renew", "RenewLease"),
        ("/api/orders/{task_id}/report", "ReportState"),
        ("/api/orders/{task_id}/reclaim", "ReclaimTask"),
    ] {
        let op = &doc["paths"][path]["post"];
        assert_eq!(op["requestBody"]["required"], true, "{path}");
        let params = op["parameters"].as_array().unwrap();
        assert!(
            params.iter().all(|p| p["in"] == "path"),
            "{path}: {params:?}"
        );
        assert!(
            schemas[schema]["required"]
                .as_array()
                .unwrap()
                .contains(&json!("worker_id")),
            "{schema}"
        );
    }
    // A new task's deadline must lie ahead: said in words, JSON Schema having no "after now"
    // (D-task-not-after-expired).
    let not_after = schemas["SubmitOrder"]["properties"]["not_after"].to_string();
    assert!(
        not_after.contains("in the future when the task is created (else 422)"),
        "{not_after}"
    );
    // Every reference resolves (a schema named only by a parameter is registered too).
    let text = doc.to_string();
    for name in text.split("\"#/components/schemas/").skip(1) {
        let name = &name[..name.find('"').unwrap()];
        assert!(
            schemas[name].is_object(),
            "{name} is referenced but not defined"
        );
    }
}
