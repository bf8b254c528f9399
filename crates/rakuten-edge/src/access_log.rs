//! One `info` log line per request for a service without its own (card-polling; the gateway's
//! `http::access_log` also peeks at bodies for its worker id): method, route (the matched
//! pattern, never the raw path, so a query string never reaches the log), status, latency in
//! milliseconds, and the route's path parameters (`id=5`). Headers are never read, so a token
//! cannot reach the log.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;

/// Longest path parameter value written to the log, characters.
const VALUE_MAX_CHARS: usize = 128;

/// The `(name, value)` path parameters of `path` under the route pattern `route`, in route
/// order, each value clipped to [`VALUE_MAX_CHARS`].
fn params<'a>(route: &'a str, path: &'a str) -> impl Iterator<Item = (&'a str, String)> + 'a {
    route
        .split('/')
        .zip(path.split('/'))
        .filter_map(|(pat, value)| {
            let name = pat.strip_prefix('{')?.strip_suffix('}')?;
            Some((name, value.chars().take(VALUE_MAX_CHARS).collect()))
        })
}

/// The path parameters of `path` under the route pattern `route`, as `name=value` pairs joined
/// by spaces: `/api/priority-items/{id}` and `/api/priority-items/5` give `id=5`.
pub fn path_params(route: &str, path: &str) -> String {
    params(route, path)
        .map(|(name, value)| format!("{name}={value}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The value of the one path parameter `name` (without braces: `task_id`) of `path` under the
/// route pattern `route`, clipped to 128 characters; `None` when the route has no such
/// parameter. For a service that logs chosen parameters as fields of their own (the gateway's
/// `task_id` and `query_id`).
pub fn path_param(route: &str, path: &str, name: &str) -> Option<String> {
    params(route, path)
        .find(|(n, _)| *n == name)
        .map(|(_, value)| value)
}

/// The middleware (`axum::middleware::from_fn`), added as the router's outermost layer.
pub async fn access_log(matched: Option<MatchedPath>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let route = matched
        .as_ref()
        .map_or("(unmatched)", MatchedPath::as_str)
        .to_owned();
    let params = path_params(&route, req.uri().path());
    let res = next.run(req).await;
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    tracing::info!(
        method = %method,
        route = %route,
        status = res.status().as_u16(),
        latency_ms = (latency_ms * 10.0).round() / 10.0,
        params = %params,
        "request"
    );
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_parameters_are_named_and_clipped_and_the_rest_is_left_out() {
        assert_eq!(
            path_params(
                "/api/priority-items/{id}/close",
                "/api/priority-items/5/close"
            ),
            "id=5"
        );
        assert_eq!(path_params("/api/task-types", "/api/task-types"), "");
        assert_eq!(path_params("(unmatched)", "/nope/x"), "");
        assert_eq!(
            path_param(
                "/api/account/queries/{query_id}/result",
                "/api/account/queries/q1/result",
                "query_id"
            )
            .as_deref(),
            Some("q1")
        );
        assert_eq!(
            path_param("/api/orders/{task_id}", "/api/orders/t1", "query_id"),
            None
        );
        assert_eq!(path_param("(unmatched)", "/nope/x", "task_id"), None);
        let long = "9".repeat(300);
        assert_eq!(
            path_param("/a/{task_id}", &format!("/a/{long}"), "task_id").map(|v| v.len()),
            Some(VALUE_MAX_CHARS)
        );
        assert_eq!(
            path_params("/a/{id}", &format!("/a/{long}")).len(),
            "id=".len() + VALUE_MAX_CHARS
        );
    }
}
