//! The rules of a gateway request body that tie one field to another, as JSON Schema `oneOf`
//! branches the service's document adds to a component ([`all`]). A derived schema states each
//! field alone ([`crate::schema`]); these come from the same checks the server runs, so the two
//! cannot drift (D-openapi-states-server-rules).

use crate::query::MAX_PAGES_LIMIT;

/// The rules of a body that tie one field to another, as the `oneOf` added to its component
/// schema (a derived schema states each field alone). Built from the checks the server runs.
///
/// - `ResolveTask`: `outcome` is `succeeded` or `failed`, and `state`, when given, is one that
///   [`Outcome::check_fits_state`](crate::Outcome::check_fits_state) allows with it.
/// - `SubmitQuery`: `params` by `kind` (§11.2): `order_list` takes `since` (RFC 3339) and
///   `max_pages` (1 to 20), `order_detail` needs `order_number` (1 to 64 of `[0-9A-Za-z-]`).
/// - `QueryResultBody`: `success: true` carries a §11.3 `result` of either kind and no error;
///   `success: false` carries no `result`.
/// - `ReportState`: `outcome` only with `terminal: true`, and then one that fits the `state`
///   ([`Outcome::check_fits_state`](crate::Outcome::check_fits_state)); a terminal report without
///   one needs a `state` that implies it ([`Outcome::implied_by`](crate::Outcome::implied_by)).
pub fn all() -> Vec<(&'static str, serde_json::Value)> {
    use serde_json::json;

    use crate::{OrderState, Outcome};
    let resolve = [Outcome::Succeeded, Outcome::Failed].map(|outcome| {
        let states: Vec<&str> = OrderState::ALL
            .into_iter()
            .filter(|s| outcome.check_fits_state(Some(*s)).is_ok())
            .map(OrderState::as_str)
            .collect();
        json!({"properties": {
            "outcome": {"const": outcome.as_str()},
            "state": {"enum": states.into_iter().map(Some).chain([None]).collect::<Vec<_>>()},
        }})
    });
    let submit_query = json!([
        {"properties": {
            "kind": {"const": "order_list"},
            "params": {"type": ["object", "null"], "additionalProperties": false, "properties": {
                "since": {"type": "string", "format": "date-time"},
                "max_pages": {"type": "integer", "minimum": 1, "maximum": MAX_PAGES_LIMIT},
            }},
        }},
        {"required": ["params"], "properties": {
            "kind": {"const": "order_detail"},
            "params": {"type": "object", "additionalProperties": false, "required": ["order_number"], "properties": {
                "order_number": {"type": "string", "pattern": "^[0-9A-Za-z-]{1,64}$"},
            }},
        }},
    ]);
    let result_of = |kind: &str, schema: &str| {
        json!({"allOf": [
            {"$ref": format!("#/components/schemas/{schema}")},
            {"properties": {"kind": {"const": kind}}},
        ]})
    };
    let query_result = json!([
        {"required": ["result"], "properties": {
            "success": {"const": true},
            "result": {"oneOf": [
                result_of("order_list", "OrderListResult"),
                result_of("order_detail", "OrderDetailResult"),
            ]},
            "error_code": {"type": "null"},
            "error_message": {"type": "null"},
        }},
        {"properties": {
            "success": {"const": false},
            "result": {"type": "null"},
        }},
    ]);
    let implying: Vec<&str> = OrderState::ALL
        .into_iter()
        .filter(|s| Outcome::implied_by(*s).is_some())
        .map(OrderState::as_str)
        .collect();
    // A terminal report's outcome must fit its state, as a resolve's does
    // (D-report-outcome-must-fit-state): one branch per outcome with the states it fits.
    let with_outcome = [Outcome::Succeeded, Outcome::Failed, Outcome::NeedsHuman].map(|outcome| {
        let states: Vec<&str> = OrderState::ALL
            .into_iter()
            .filter(|s| outcome.check_fits_state(Some(*s)).is_ok())
            .map(OrderState::as_str)
            .collect();
        json!({"required": ["terminal", "outcome"], "properties": {
            "terminal": {"const": true},
            "outcome": {"const": outcome.as_str()},
            "state": {"enum": states},
        }})
    });
    let [succeeded, failed, needs_human] = with_outcome;
    let report = json!([
        {"properties": {"terminal": {"const": false}, "outcome": {"type": "null"}}},
        succeeded,
        failed,
        needs_human,
        {"required": ["terminal"], "properties": {
            "terminal": {"const": true},
            "outcome": {"type": "null"},
            "state": {"enum": implying},
        }},
    ]);
    vec![
        ("ReportState", report),
        ("ResolveTask", json!(resolve)),
        ("SubmitQuery", submit_query),
        ("QueryResultBody", query_result),
    ]
}
