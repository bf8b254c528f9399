//! Roles: each role's allowed and refused routes, the `api` token, rotation,
//! the case-insensitive `Bearer` scheme.

use order_gateway::roles::NamedTokens;
use serde_json::{Value, json};

use crate::helpers::{Answer, TestApp, answer, spawn_app_with};

const UPSTREAM: &str = "up-token-0123456789";
const UPSTREAM_ROTATED: &str = "up-token-0123456780";
const WORKER: &str = "wk-token-0123456789";
const OPERATOR: &str = "op-token-0123456789";
const METRICS: &str = "metrics-token-0123456789";

fn tokens(s: &str) -> Option<NamedTokens> {
    Some(s.parse().unwrap())
}

async fn spawn_with_roles() -> TestApp {
    spawn_app_with(|s| {
        s.upstream_tokens = tokens(&format!("shop:{UPSTREAM},shop:{UPSTREAM_ROTATED}"));
        s.worker_tokens = tokens(&format!("pc-1:{WORKER}"));
        s.operator_tokens = tokens(&format!("alice:{OPERATOR}"));
        s.metrics_tokens = tokens(&format!("prometheus:{METRICS}"));
    })
    .await
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Who {
    Upstream,
    Worker,
    Operator,
}

/// Every `/api` route, with a body that passes validation, and the non-operator role it admits.
fn routes() -> Vec<(&'static str, String, Option<Value>, &'static [Who])> {
    let order = json!({"task_id": "po-r", "site": "rakuten", "intent": {"item_url": "https://item.rakuten.co.jp/shop/a/", "quantity": 1}});
    let query = json!({"query_id": "q-r", "site": "rakuten", "kind": "order_list", "params": {}});
    let holder = json!({"worker_id": "w1", "lease_token": "x"});
    let report = json!({"worker_id": "w1", "state": "running"});
    let result =
        json!({"worker_id": "w1", "lease_token": "x", "status": "succeeded", "result": {}});
    use Who::{Upstream, Worker};
    vec![
        ("POST", "/api/orders".into(), Some(order), &[Upstream]),
        ("GET", "/api/orders".into(), None, &[Upstream]),
        // A worker reads the task it holds; this one it does not: 404 (D-worker-reads-held-task).
        ("GET", "/api/orders/po-r".into(), None, &[Upstream, Worker]),
        (
            "GET",
            "/api/orders/lease?worker_id=w1&wait=0".into(),
            None,
            &[Worker],
        ),
        (
            "POST",
            "/api/orders/po-r/renew".into(),
            Some(holder),
            &[Worker],
        ),
        (
            "POST",
            "/api/orders/po-r/report".into(),
            Some(report),
            &[Worker],
        ),
        (
            "POST",
            "/api/orders/po-r/reclaim".into(),
            Some(json!({"worker_id": "w1"})),
            &[],
        ),
        (
            "POST",
            "/api/account/queries".into(),
            Some(query),
            &[Upstream],
        ),
        ("GET", "/api/account/queries".into(), None, &[Upstream]),
        ("GET", "/api/account/queries/q-r".into(), None, &[Upstream]),
        (
            "GET",
            "/api/account/queries/lease?worker_id=w1&wait=0".into(),
            None,
            &[Worker],
        ),
        (
            "POST",
            "/api/account/queries/q-r/result".into(),
            Some(result),
            &[Worker],
        ),
    ]
}

async fn call(
    app: &TestApp,
    token: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Answer {
    let mut rb = app
        .client
        .request(method.parse().unwrap(), app.url(path))
        .bearer_auth(token);
    if let Some(b) = body {
        rb = rb.json(b);
    }
    answer(rb.send().await.unwrap()).await
}

/// Calls every route with `token`; a route admitting `who` must not answer 401/403, every other
/// route must answer 403/1002.
async fn assert_routes_for(app: &TestApp, token: &str, who: Who) {
    for (method, path, body, admits) in routes() {
        let a = call(app, token, method, &path, body.as_ref()).await;
        if who == Who::Operator || admits.contains(&who) {
            assert!(
                a.status != 401 && a.status != 403,
                "{who:?} refused on {method} {path}: {:?}",
                a.body
            );
        } else {
            assert_eq!(
                (a.status, a.code()),
                (403, 1002),
                "{who:?} on {method} {path}: {:?}",
                a.body
            );
        }
    }
}

#[tokio::test]
async fn an_upstream_token_submits_and_reads_orders_and_queries_and_nothing_else() {
    let app = spawn_with_roles().await;
    assert_routes_for(&app, UPSTREAM, Who::Upstream).await;
}

#[tokio::test]
async fn a_worker_token_leases_renews_reports_reads_a_task_and_posts_query_results_and_nothing_else()
 {
    let app = spawn_with_roles().await;
    assert_routes_for(&app, WORKER, Who::Worker).await;
}

#[tokio::test]
async fn an_operator_token_may_call_every_route() {
    let app = spawn_with_roles().await;
    assert_routes_for(&app, OPERATOR, Who::Operator).await;
}

#[tokio::test]
async fn the_api_token_keeps_working_as_a_full_access_operator() {
    let app = spawn_with_roles().await;
    assert_routes_for(&app, &app.token, Who::Operator).await;
}

#[tokio::test]
async fn a_metrics_token_may_call_no_api_route() {
    let app = spawn_with_roles().await;
    for (method, path, body, _) in routes() {
        call(&app, METRICS, method, &path, body.as_ref())
            .await
            .assert_err(403, 1002);
    }
}

#[tokio::test]
async fn both_tokens_of_a_rotated_name_work() {
    let app = spawn_with_roles().await;
    for t in [UPSTREAM, UPSTREAM_ROTATED] {
        call(&app, t, "GET", "/api/orders", None).await.assert_ok();
    }
}

#[tokio::test]
async fn an_unknown_or_missing_token_is_401_whatever_the_route() {
    let app = spawn_with_roles().await;
    for (method, path, body, _) in routes() {
        call(&app, "not-a-token", method, &path, body.as_ref())
            .await
            .assert_err(401, 1001);
        let mut rb = app.client.request(method.parse().unwrap(), app.url(&path));
        if let Some(b) = &body {
            rb = rb.json(b);
        }
        answer(rb.send().await.unwrap()).await.assert_err(401, 1001);
    }
}

#[tokio::test]
async fn the_bearer_scheme_is_matched_case_insensitively() {
    let app = spawn_with_roles().await;
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let a = answer(
            app.client
                .get(app.url("/api/orders"))
                .header("Authorization", format!("{scheme} {UPSTREAM}"))
                .send()
                .await
                .unwrap(),
        )
        .await;
        a.assert_ok();
    }
    let a = answer(
        app.client
            .get(app.url("/api/orders"))
            .header("Authorization", format!("Basic {UPSTREAM}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    a.assert_err(401, 1001);
}
