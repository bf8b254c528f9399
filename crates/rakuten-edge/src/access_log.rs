//! The one access log of every service: one `info` line per request with its method, route (the
//! matched pattern, never the raw path, so a query string never reaches the log), status, latency
//! in milliseconds, the route's path parameters (`params`, `id=5`), and the `task_id`,
//! `query_id` and `worker_id` the request is about (empty when it names none): from the path,
//! from a `worker_id` query parameter or a small JSON body's `worker_id`, or named by the handler
//! ([`name_task`], [`name_query`]: the id a submit stored or a lease handed out,
//! D-gateway-access-log). Headers are never read, so a token cannot reach the log; of the query
//! string only the `worker_id` value is read.

use std::time::Instant;

use axum::body::{Body, to_bytes};
use axum::extract::{MatchedPath, Request};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::Response;

/// Longest path parameter value or id written to the log, characters.
const VALUE_MAX_CHARS: usize = 128;

/// Bodies up to this size (declared in `Content-Length`) are read for their `worker_id`; larger
/// ones (query results, imports) are passed on untouched.
const PEEK_MAX_BYTES: u64 = 64 * 1024;

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

#[derive(serde::Deserialize)]
struct WorkerField {
    worker_id: Option<String>,
}

fn clip(s: &str) -> String {
    s.chars().take(VALUE_MAX_CHARS).collect()
}

/// Ids a handler named for this request's log line.
#[derive(Debug, Default)]
struct Named {
    task_id: Option<String>,
    query_id: Option<String>,
}

tokio::task_local! {
    // The request's own: the middleware runs the handler inside this scope, in the same task.
    static NAMED: std::cell::RefCell<Named>;
}

/// Names the order task this request is about when its path does not (a submit's stored id, a
/// lease's grant). Outside a request (a unit test calling a handler) it does nothing.
pub fn name_task(task_id: &str) {
    let _ = NAMED.try_with(|n| n.borrow_mut().task_id = Some(clip(task_id)));
}

/// [`name_task`] for an account query.
pub fn name_query(query_id: &str) {
    let _ = NAMED.try_with(|n| n.borrow_mut().query_id = Some(clip(query_id)));
}

/// The `worker_id` of a query string, decoded as the route's own query parser decodes it, so
/// that one worker has one spelling in the log whether it sent its id in the query (lease) or in
/// the body (report) (D-gateway-access-log).
fn query_worker(query: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "worker_id")
        .map(|(_, v)| clip(&v))
}

/// The middleware (`axum::middleware::from_fn`), added as the router's outermost layer.
pub async fn access_log(matched: Option<MatchedPath>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let route = matched
        .as_ref()
        .map_or("(unmatched)", MatchedPath::as_str)
        .to_owned();
    let path = req.uri().path();
    let params = path_params(&route, path);
    let (task_id, query_id) = (
        path_param(&route, path, "task_id"),
        path_param(&route, path, "query_id"),
    );
    let mut worker = req.uri().query().and_then(query_worker);
    let small_json = method == Method::POST
        && req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
            .is_some_and(|n| n <= PEEK_MAX_BYTES);
    let req = if small_json && worker.is_none() {
        let (parts, body) = req.into_parts();
        match to_bytes(body, PEEK_MAX_BYTES as usize).await {
            Ok(bytes) => {
                worker = serde_json::from_slice::<WorkerField>(&bytes)
                    .ok()
                    .and_then(|w| w.worker_id)
                    .map(|w| clip(&w));
                Request::from_parts(parts, Body::from(bytes))
            }
            // The client lied about the length or the connection broke: the handler answers.
            Err(_) => Request::from_parts(parts, Body::empty()),
        }
    } else {
        req
    };
    let (res, named) = NAMED
        .scope(std::cell::RefCell::new(Named::default()), async move {
            let res = next.run(req).await;
            (res, NAMED.with(std::cell::RefCell::take))
        })
        .await;
    let task_id = task_id.or(named.task_id);
    let query_id = query_id.or(named.query_id);
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    tracing::info!(
        method = %method,
        route = %route,
        status = res.status().as_u16(),
        latency_ms = (latency_ms * 10.0).round() / 10.0,
        params = %params,
        task_id = task_id.as_deref().unwrap_or(""),
        query_id = query_id.as_deref().unwrap_or(""),
        worker_id = worker.as_deref().unwrap_or(""),
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

    #[test]
    fn a_worker_id_in_the_query_is_logged_decoded_as_the_route_reads_it() {
        assert_eq!(
            query_worker("wait=0&worker_id=%e4%bd%9c%e6%a5%ad%e8%80%85-1").as_deref(),
            Some("作業者-1")
        );
        // The literal id `w%E2%80%8B1`, encoded once by its client.
        assert_eq!(
            query_worker("worker_id=w%25E2%2580%258B1").as_deref(),
            Some("w%E2%80%8B1")
        );
        assert_eq!(query_worker("worker_id=a+b").as_deref(), Some("a b"));
        assert_eq!(query_worker("wait=0"), None);
    }
}
