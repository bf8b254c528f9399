//! The answers the edge itself can give, added to a service's OpenAPI document so a client (and
//! schemathesis) sees every status an operation can return. Works on the
//! document as JSON, so it serves a `utoipa`-generated document and a hand-written one alike.

use serde_json::{Value, json};

/// The `bearer` security scheme the operations' `security` names: HTTP `Authorization: Bearer`.
pub fn add_bearer_scheme(doc: &mut Value) {
    if let Some(doc) = doc.as_object_mut() {
        let components = doc.entry("components").or_insert_with(|| json!({}));
        if let Some(components) = components.as_object_mut() {
            let schemes = components
                .entry("securitySchemes")
                .or_insert_with(|| json!({}));
            schemes["bearer"] = json!({"type": "http", "scheme": "bearer"});
        }
    }
}

/// Adds, where missing, to every operation of `doc` (an OpenAPI 3 document as JSON): 503
/// (connection cap, storage unavailable); 401 and 403 when it needs a token; 413 and 415 when it
/// takes a body (415 is [`crate::body`]'s refusal, answered with the service's code
/// `media_type_code`); 422 always (an unknown query parameter; also an invalid body or
/// parameter); 414 and 431 always (an oversized request head, `serve`). Each answers the envelope
/// described by the component schema `error_schema`.
pub fn add_edge_responses(doc: &mut Value, error_schema: &str, media_type_code: i32) {
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    let content = json!({"application/json": {"schema": {"$ref": format!("#/components/schemas/{error_schema}")}}});
    for (path, item) in paths.iter_mut() {
        let path_params = path.contains('{');
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, op) in item.iter_mut() {
            if !["get", "put", "post", "delete", "patch", "head"].contains(&method.as_str()) {
                continue;
            }
            let secured = op["security"].as_array().is_some_and(|s| !s.is_empty());
            let body = op.get("requestBody").is_some();
            let params = path_params || op["parameters"].as_array().is_some_and(|p| !p.is_empty());
            let mut add = |status: &str, what: &str| {
                if let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) {
                    responses
                        .entry(status)
                        .or_insert_with(|| json!({"description": what, "content": content}));
                }
            };
            add(
                "503",
                "too many open connections, or storage unavailable (1503); `Retry-After`",
            );
            if secured {
                add("401", "missing or wrong Bearer token (1001)");
                add("403", "the token's role may not do this (1002)");
            }
            if body {
                add(
                    "413",
                    "request body over the route's limit; `msg` states the limit in bytes (1004)",
                );
                add(
                    "415",
                    &format!(
                        "a Content-Encoding other than identity, or a body not sent as \
                         `Content-Type: application/json` ({media_type_code}); \
                         `Accept-Encoding: identity`"
                    ),
                );
            }
            // Every documented operation refuses a query parameter it does not list
            // (`query_guard`), so each can answer 422.
            add(
                "422",
                if body || params {
                    "invalid body, query or path: JSON, types, ranges, duplicate keys, an unknown \
                     query parameter (1003)"
                } else {
                    "an unknown query parameter (1003)"
                },
            );
            add(
                "414",
                "request target over the edge's bound (1004; hyper itself answers a bare 414 past 65,534 bytes)",
            );
            add(
                "431",
                "header section over the edge's bound (1004; hyper itself answers a bare 431 past its own)",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_added_by_what_an_operation_takes() {
        let mut doc = json!({"paths": {
            "/health": {"get": {"responses": {"200": {"description": "ok"}}}},
            "/api/x/{id}": {"post": {"security": [{"bearer": []}], "requestBody": {},
                "responses": {"200": {"description": "ok"}, "422": {"description": "mine"}}}},
        }});
        add_edge_responses(&mut doc, "E", 1007);
        let health = doc["paths"]["/health"]["get"]["responses"]
            .as_object()
            .unwrap();
        assert_eq!(
            health.keys().collect::<Vec<_>>(),
            ["200", "414", "422", "431", "503"]
        );
        let x = doc["paths"]["/api/x/{id}"]["post"]["responses"]
            .as_object()
            .unwrap();
        assert_eq!(
            x.keys().collect::<Vec<_>>(),
            [
                "200", "401", "403", "413", "414", "415", "422", "431", "503"
            ]
        );
        assert_eq!(x["422"]["description"], "mine");
        assert!(x["415"]["description"].as_str().unwrap().contains("(1007)"));
        assert_eq!(
            x["401"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/E"
        );
    }
}
