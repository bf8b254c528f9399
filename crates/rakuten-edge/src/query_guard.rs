//! Unknown query parameters are refused: a typo such as `?wiat=30` used to be
//! ignored silently, so the long-poll did not wait at all. The parameters a route accepts are the
//! ones its OpenAPI document lists (`in: query`), so the document and the server cannot drift
//! apart: a parameter the document does not name is a 422 naming it. Routes the document does not
//! describe (the console's HTML pages) are not checked.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use serde_json::Value;

/// The query parameters of every documented operation, by `(method, path template)`.
#[derive(Debug, Clone, Default)]
pub struct QueryAllowlist {
    ops: Arc<HashMap<(String, String), BTreeSet<String>>>,
}

/// The operations' methods in an OpenAPI path item.
const METHODS: [&str; 6] = ["get", "put", "post", "delete", "patch", "head"];

/// The names of the `in: query` parameters of a `parameters` list; `$ref`s into
/// `#/components/parameters/` are followed.
fn query_names(doc: &Value, params: Option<&Value>, into: &mut BTreeSet<String>) {
    for p in params.and_then(Value::as_array).into_iter().flatten() {
        let p = match p.get("$ref").and_then(Value::as_str) {
            Some(r) => match r.strip_prefix('#').and_then(|pointer| doc.pointer(pointer)) {
                Some(target) => target,
                None => continue,
            },
            None => p,
        };
        if p["in"] == "query"
            && let Some(name) = p["name"].as_str()
        {
            into.insert(name.to_owned());
        }
    }
}

impl QueryAllowlist {
    /// Reads every operation's query parameters from `doc` (an OpenAPI 3 document as JSON).
    pub fn from_openapi(doc: &Value) -> Self {
        let mut ops = HashMap::new();
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            let mut shared = BTreeSet::new();
            query_names(doc, item.get("parameters"), &mut shared);
            for method in METHODS {
                if let Some(op) = item.get(method) {
                    let mut names = shared.clone();
                    query_names(doc, op.get("parameters"), &mut names);
                    ops.insert((method.to_owned(), path.clone()), names);
                }
            }
        }
        QueryAllowlist { ops: Arc::new(ops) }
    }

    /// Adds routes the document does not describe (probes, Prometheus text) as taking no query
    /// parameters, so a query sent to them is refused like any unknown one (D-unknown-query-parameters).
    #[must_use]
    pub fn with_undocumented(mut self, ops: &[(&str, &str)]) -> Self {
        let map = Arc::make_mut(&mut self.ops);
        for (method, path) in ops {
            map.entry((method.to_ascii_lowercase(), (*path).to_owned()))
                .or_default();
        }
        self
    }

    /// The first query parameter of `query` that the operation `(method, path)` does not list,
    /// with the names it does list; `None` when every name is listed or the operation is not in
    /// the document. `HEAD` is checked as the `GET` it runs.
    pub fn unknown(
        &self,
        method: &Method,
        path: &str,
        query: Option<&str>,
    ) -> Option<(String, Vec<String>)> {
        let query = query.filter(|q| !q.is_empty())?;
        let method = if method == Method::HEAD {
            "get".to_owned()
        } else {
            method.as_str().to_ascii_lowercase()
        };
        let allowed = self.ops.get(&(method, path.to_owned()))?;
        form_urlencoded::parse(query.as_bytes())
            .map(|(name, _)| name)
            .find(|name| !allowed.contains(name.as_ref()))
            .map(|name| {
                (
                    name.chars().take(64).collect(),
                    allowed.iter().cloned().collect(),
                )
            })
    }

    /// [`Self::unknown`] for a routed request (its [`MatchedPath`]), as the message of a 422:
    /// ``unknown query parameter `wiat`; this route accepts: wait, worker_id``; or
    /// [`not_utf8`]'s refusal of a query whose bytes are not UTF-8.
    pub fn refusal(&self, req: &Request) -> Option<String> {
        if let Some(msg) = req.uri().query().and_then(not_utf8) {
            return Some(msg);
        }
        let path = req.extensions().get::<MatchedPath>()?;
        let (name, allowed) = self.unknown(req.method(), path.as_str(), req.uri().query())?;
        Some(if allowed.is_empty() {
            format!("unknown query parameter `{name}`; this route takes no query parameters")
        } else {
            format!(
                "unknown query parameter `{name}`; this route accepts: {}",
                allowed.join(", ")
            )
        })
    }
}

/// The refusal of a query with a name or value whose percent-decoded bytes are not UTF-8, naming
/// the pair's position (1-based); `None` when every pair decodes.
///
/// axum's `Query` (serde_urlencoded, form_urlencoded) decodes bad bytes lossily into U+FFFD, so
/// `?worker_id=%ff` was leased a real order under the name "\u{FFFD}":
/// ids must arrive as the bytes that were sent, or not at all. The bytes are not echoed.
pub fn not_utf8(query: &str) -> Option<String> {
    let decodes = |part: &str| {
        let plus_as_space = part.replace('+', " ");
        percent_encoding::percent_decode_str(&plus_as_space)
            .decode_utf8()
            .is_ok()
    };
    query
        .split('&')
        .enumerate()
        .find(|(_, pair)| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            !decodes(name) || !decodes(value)
        })
        .map(|(i, _)| {
            format!(
                "query parameter {} is not valid UTF-8 once percent-decoded",
                i + 1
            )
        })
}

/// The message of a query string axum's `Query` could not read, from its rejection's
/// `body_text()` (`Failed to deserialize query string: limit: invalid digit found in string`):
/// which parameter is wrong and what it takes, without serde's or Rust's wording (`i64`,
/// `u32`, "deserialize"; D-query-refusal-wording). Bounded: nothing of the value is echoed but an enum's
/// unknown variant, as serde quotes it.
pub fn rejection_message(body_text: &str) -> String {
    let detail = body_text
        .strip_prefix("Failed to deserialize query string: ")
        .unwrap_or(body_text);
    // serde_path_to_error puts the parameter first (`limit: …`); `.` when it has no path.
    let (param, reason) = match detail.split_once(": ") {
        Some((p, r)) if !p.is_empty() && p != "." && !p.contains(' ') => (Some(p), r),
        _ => (None, detail),
    };
    // serde names a repeated parameter only in its reason ("duplicate field `limit`").
    if let Some(field) = reason.strip_prefix("duplicate field ") {
        return format!("query parameter {field} is given twice: give it once");
    }
    let expected = expectation(reason);
    let msg = match param {
        Some(p) => format!("query parameter `{p}` {expected}"),
        None => format!("query string: {expected}"),
    };
    msg.chars().take(300).collect()
}

/// The 422 message for a query parameter whose value is outside its vocabulary: the parameter,
/// the value (at most 64 characters) and every allowed value, so the caller can correct it
/// without reading the document (D-query-refusal-wording):
/// ``query parameter `status` cannot be `bogus`: use one of `pending`, `running` ``.
pub fn unknown_value(param: &str, got: &str, allowed: &[&str]) -> String {
    let got: String = got.chars().take(64).collect();
    let list = allowed
        .iter()
        .map(|a| format!("`{a}`"))
        .collect::<Vec<_>>()
        .join(", ");
    format!("query parameter `{param}` cannot be `{got}`: use one of {list}")
}

/// What a parameter takes, read from serde's `reason`.
fn expectation(reason: &str) -> String {
    const WHOLE: &str = "must be a whole number written in digits (e.g. 50)";
    const NUMBER: &str = "must be a number written in digits (e.g. 1.5)";
    const BOOL: &str = "must be true or false";
    let integer = [
        "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128", "usize",
    ];
    if reason.contains("invalid digit")
        || reason.contains("cannot parse integer")
        || reason.contains("number too large")
        || reason.contains("number too small")
    {
        return format!("{WHOLE}, within range");
    }
    if reason.contains("float") {
        return NUMBER.into();
    }
    if reason.contains("`true` or `false`") {
        return BOOL.into();
    }
    if let Some(rest) = reason.strip_prefix("unknown variant ") {
        // "unknown variant `x`, expected one of `a`, `b`"
        return match rest.split_once(", expected ") {
            Some((value, allowed)) => format!("cannot be {value}: use {allowed}"),
            None => format!("cannot be {rest}"),
        };
    }
    if let Some(field) = reason.strip_prefix("missing field ") {
        return format!("is missing: {field} is required");
    }
    // The id rules' own words (`rakuten_types::ids::IdError`, "worker_id is longer than 128
    // characters"): the rule without the repeated name, and nothing of the value (a
    // 3,000-character or U+202E `worker_id` is told which rule, not "a value this route does not
    // accept").
    for rule in [
        " must not be empty",
        " is longer than ",
        " contains a forbidden character",
        " must not be a route word",
    ] {
        if let Some(i) = reason.find(rule) {
            return reason[i + 1..].to_owned();
        }
    }
    // "invalid type: string \"x\", expected i64" and the like: name only what is expected.
    if let Some((_, wanted)) = reason.rsplit_once("expected ") {
        let wanted = wanted.trim();
        if integer.contains(&wanted) {
            return WHOLE.into();
        }
        if wanted == "f32" || wanted == "f64" {
            return NUMBER.into();
        }
        if wanted == "a boolean" || wanted == "bool" {
            return BOOL.into();
        }
    }
    "has a value this route does not accept".into()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Q {
        limit: Option<i64>,
        wait: Option<f64>,
        full: Option<bool>,
        kind: Option<Kind>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Kind {
        Main,
        AddOn,
    }

    fn refused(query: &str) -> String {
        let uri: axum::http::Uri = format!("/x?{query}").parse().unwrap();
        let r = axum::extract::Query::<Q>::try_from_uri(&uri).unwrap_err();
        rejection_message(&r.body_text())
    }

    /// D-query-refusal-wording: `?status=bogus` said only "unknown status"; the answer lists the values.
    #[test]
    fn an_unknown_value_is_named_with_every_allowed_one() {
        assert_eq!(
            unknown_value("status", "bogus", &["pending", "running"]),
            "query parameter `status` cannot be `bogus`: use one of `pending`, `running`"
        );
        let long = "x".repeat(100);
        assert!(unknown_value("kind", &long, &["a"]).len() < 120);
    }

    #[test]
    fn a_query_rejection_names_the_parameter_and_what_it_takes_without_rust_types() {
        let cases = [
            (
                "limit=abc",
                "query parameter `limit` must be a whole number written in digits (e.g. 50), within range",
            ),
            (
                "limit=99999999999999999999",
                "query parameter `limit` must be a whole number written in digits (e.g. 50), within range",
            ),
            (
                "limit=",
                "query parameter `limit` must be a whole number written in digits (e.g. 50), within range",
            ),
            (
                "wait=soon",
                "query parameter `wait` must be a number written in digits (e.g. 1.5)",
            ),
            ("full=yes", "query parameter `full` must be true or false"),
            // Not serde's "query string: is given more than once (`limit`)".
            (
                "limit=1&limit=2",
                "query parameter `limit` is given twice: give it once",
            ),
            (
                "kind=extra",
                "query parameter `kind` cannot be `extra`: use `main` or `add_on`",
            ),
        ];
        for (query, want) in cases {
            let got = refused(query);
            assert_eq!(got, want, "{query}");
            for rust in ["deserialize", "i64", "f64", "bool", "Kind", "variant"] {
                assert!(!got.contains(rust), "{query}: {got}");
            }
        }
    }

    /// An id parameter that breaks an id rule says which rule.
    #[test]
    fn an_id_parameter_names_the_rule_it_breaks() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Lease {
            worker_id: rakuten_types::WorkerId,
        }
        let refused = |query: &str| {
            let uri: axum::http::Uri = format!("/x?{query}").parse().unwrap();
            let r = axum::extract::Query::<Lease>::try_from_uri(&uri).unwrap_err();
            rejection_message(&r.body_text())
        };
        assert_eq!(
            refused(&format!("worker_id={}", "w".repeat(3000))),
            "query parameter `worker_id` is longer than 128 characters"
        );
        assert_eq!(
            refused("worker_id=w%E2%80%AEB"),
            "query parameter `worker_id` contains a forbidden character (control, invisible, \
             path separator, '..', edge whitespace)"
        );
    }

    fn doc() -> Value {
        json!({
            "paths": {
                "/api/orders/lease": {"get": {"parameters": [
                    {"name": "worker_id", "in": "query"}, {"name": "wait", "in": "query"}]}},
                "/api/orders/{task_id}": {
                    "parameters": [{"name": "task_id", "in": "path"}],
                    "get": {},
                    "post": {"parameters": [{"$ref": "#/components/parameters/Reason"}]}},
            },
            "components": {"parameters": {"Reason": {"name": "reason", "in": "query"}}}
        })
    }

    #[test]
    fn a_typo_in_a_query_parameter_is_named() {
        let a = QueryAllowlist::from_openapi(&doc());
        let (name, allowed) = a
            .unknown(
                &Method::GET,
                "/api/orders/lease",
                Some("worker_id=w&wiat=30"),
            )
            .unwrap();
        assert_eq!(name, "wiat");
        assert_eq!(allowed, ["wait", "worker_id"]);
        assert!(
            a.unknown(
                &Method::HEAD,
                "/api/orders/lease",
                Some("wait=1&worker_id=w")
            )
            .is_none()
        );
    }

    #[test]
    fn path_parameters_are_not_query_parameters_and_refs_are_followed() {
        let a = QueryAllowlist::from_openapi(&doc());
        assert_eq!(
            a.unknown(&Method::GET, "/api/orders/{task_id}", Some("task_id=x"))
                .unwrap()
                .0,
            "task_id"
        );
        assert!(
            a.unknown(&Method::POST, "/api/orders/{task_id}", Some("reason=r"))
                .is_none()
        );
        // Percent-encoded names are decoded before the check.
        assert_eq!(
            a.unknown(
                &Method::POST,
                "/api/orders/{task_id}",
                Some("re%61son=r&x%20y=1")
            )
            .unwrap()
            .0,
            "x y"
        );
    }

    #[test]
    fn percent_encoded_bytes_that_are_not_utf8_are_refused_without_echoing_them() {
        // The input that leased an order to "\u{FFFD}": `GET /api/orders/lease?worker_id=%ff&wait=0`.
        let msg = not_utf8("worker_id=%ff&wait=0").unwrap();
        assert_eq!(
            msg,
            "query parameter 1 is not valid UTF-8 once percent-decoded"
        );
        assert_eq!(
            not_utf8("status=queued&x%fe%ff=1").unwrap(),
            "query parameter 2 is not valid UTF-8 once percent-decoded"
        );
        assert!(not_utf8("worker_id=%E3%83%AF&wait=0&q=a+b&flag").is_none());
        assert!(not_utf8("").is_none());
    }

    #[test]
    fn an_undocumented_route_or_an_empty_query_is_not_checked() {
        let a = QueryAllowlist::from_openapi(&doc());
        assert!(
            a.unknown(&Method::GET, "/console", Some("anything=1"))
                .is_none()
        );
        assert!(
            a.unknown(&Method::GET, "/api/orders/lease", Some(""))
                .is_none()
        );
        assert!(a.unknown(&Method::GET, "/api/orders/lease", None).is_none());
    }

    /// `/metrics?x=1` answered 200 on card-polling, whose OpenAPI document
    /// leaves out the probes and `/metrics`. Added as undocumented, they take no parameters.
    #[test]
    fn an_undocumented_route_added_without_parameters_refuses_any() {
        let a = QueryAllowlist::from_openapi(&doc()).with_undocumented(&[("GET", "/metrics")]);
        assert_eq!(
            a.unknown(&Method::GET, "/metrics", Some("x=1")),
            Some(("x".to_owned(), vec![]))
        );
        assert!(a.unknown(&Method::GET, "/metrics", None).is_none());
        assert!(a.unknown(&Method::GET, "/console", Some("x=1")).is_none());
        assert!(
            a.unknown(&Method::GET, "/api/orders/lease", Some("wait=1"))
                .is_none(),
            "documented operations keep their parameters"
        );
    }
}
