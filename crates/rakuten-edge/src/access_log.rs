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

/// The path parameters of `path` under the route pattern `route`, as `name=value` pairs joined
/// by spaces: `/api/priority-items/{id}` and `/api/priority-items/5` give `id=5`.
pub fn path_params(route: &str, path: &str) -> String {
    route
        .split('/')
        .zip(path.split('/'))
        .filter_map(|(pat, value)| {
            let name = pat.strip_prefix('{')?.strip_suffix('}')?;
            let value: String = value.chars().take(VALUE_MAX_CHARS).collect();
            Some(format!("{name}={value}"))
        })
        .collect::<Vec<_>>()
        .join(" ")
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
        let long = "9".repeat(300);
        assert_eq!(
            path_params("/a/{id}", &format!("/a/{long}")).len(),
            "id=".len() + VALUE_MAX_CHARS
        );
    }
}
