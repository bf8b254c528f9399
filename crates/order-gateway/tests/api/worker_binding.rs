//! A worker token acts only for the worker ids bound to it (D-worker-id-bound-to-token), and reads
//! only the task such a worker holds (D-worker-reads-held-task); operators act for any worker.

use order_gateway::roles::NamedTokens;
use serde_json::{Value, json};

use crate::helpers::{Answer, Engine, TestApp, answer};

const UPSTREAM: &str = "upstream-token-0123456789";
const WORKER1: &str = "worker1-token-0123456789";
const WORKER2: &str = "worker2-token-0123456789";

async fn spawn(engine: Engine) -> TestApp {
    engine
        .spawn(|s| {
            s.upstream_tokens = Some(format!("shop:{UPSTREAM}").parse::<NamedTokens>().unwrap());
            s.worker_tokens = Some(
                format!("w1:{WORKER1},w2:{WORKER2}")
                    .parse::<NamedTokens>()
                    .unwrap(),
            );
        })
        .await
}

async fn call(app: &TestApp, token: &str, method: &str, path: &str, body: Option<Value>) -> Answer {
    let mut rb = app
        .client
        .request(method.parse().unwrap(), app.url(path))
        .bearer_auth(token);
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    answer(rb.send().await.unwrap()).await
}

/// Token w2 naming pc-1 (bound to w1 by its first lease) neither re-grants
/// pc-1's live task to itself nor ends it; w1's grant stays valid and the task unchanged.
async fn a_worker_token_cannot_take_over_another_tokens_worker_id(engine: Engine) {
    let app = spawn(engine).await;
    let order = json!({"task_id": "t2", "site": "rakuten",
        "intent": {"item_url": "https://item.rakuten.co.jp/simshop/sample-tea/", "quantity": 1}});
    call(&app, UPSTREAM, "POST", "/api/orders", Some(order))
        .await
        .assert_ok();
    let lease = "/api/orders/lease?worker_id=pc-1&wait=0";
    let grant = call(&app, WORKER1, "GET", lease, None).await;
    let grant = grant.assert_ok().clone();
    assert_eq!(grant["lease_count"], 1);
    let token = grant["lease_token"].as_str().unwrap().to_owned();

    call(&app, WORKER2, "GET", lease, None)
        .await
        .assert_err(403, 1002);
    let end = json!({"worker_id": "pc-1", "state": "cancelled", "terminal": true});
    call(&app, WORKER2, "POST", "/api/orders/t2/report", Some(end))
        .await
        .assert_err(403, 1002);
    let renew = json!({"worker_id": "pc-1"});
    call(&app, WORKER2, "POST", "/api/orders/t2/renew", Some(renew))
        .await
        .assert_err(403, 1002);
    // Outside its scope, the task reads like one that does not exist.
    call(&app, WORKER2, "GET", "/api/orders/t2", None)
        .await
        .assert_err(404, 6001);

    let detail = app.task("t2").await;
    let d = detail.assert_ok();
    assert_eq!(d["status"], "leased");
    assert_eq!(d["lease_count"], 1);
    assert!(d["history"].as_array().unwrap().is_empty(), "{d}");
    let holder = json!({"worker_id": "pc-1", "lease_token": token});
    call(&app, WORKER1, "POST", "/api/orders/t2/renew", Some(holder))
        .await
        .assert_ok();
    let in_cart = json!({"worker_id": "pc-1", "lease_token": token, "state": "in_cart"});
    call(
        &app,
        WORKER1,
        "POST",
        "/api/orders/t2/report",
        Some(in_cart),
    )
    .await
    .assert_ok();
    // The holder's token reads the task its worker holds (the recovery branch's read).
    let mine = call(&app, WORKER1, "GET", "/api/orders/t2", None).await;
    assert_eq!(mine.assert_ok()["task_id"], "t2");
}

/// The account-query lease and result are bound the same way.
async fn a_worker_token_cannot_lease_or_answer_queries_for_another_tokens_worker_id(
    engine: Engine,
) {
    let app = spawn(engine).await;
    let q = json!({"query_id": "aq-1", "site": "rakuten", "kind": "order_list", "params": {}});
    call(&app, UPSTREAM, "POST", "/api/account/queries", Some(q))
        .await
        .assert_ok();
    let lease = "/api/account/queries/lease?worker_id=pc-1&wait=0";
    let grant = call(&app, WORKER1, "GET", lease, None).await;
    let token = grant.assert_ok()["lease_token"]
        .as_str()
        .unwrap()
        .to_owned();
    call(&app, WORKER2, "GET", lease, None)
        .await
        .assert_err(403, 1002);
    let result = json!({"worker_id": "pc-1", "lease_token": token, "success": true, "result": {
        "kind": "order_list", "since": null, "max_pages": 2, "window_fully_covered": true,
        "orders": [], "raw_pages": [],
    }});
    call(
        &app,
        WORKER2,
        "POST",
        "/api/account/queries/aq-1/result",
        Some(result.clone()),
    )
    .await
    .assert_err(403, 1002);
    assert_eq!(app.query_status("aq-1").await, "leased");
    call(
        &app,
        WORKER1,
        "POST",
        "/api/account/queries/aq-1/result",
        Some(result),
    )
    .await
    .assert_ok();
}

/// An operator's retire frees the worker id (and records which token it was bound to); operator
/// tokens act for any worker id without binding it.
async fn retiring_a_worker_frees_its_id_for_another_token(engine: Engine) {
    let app = spawn(engine).await;
    let lease = "/api/orders/lease?worker_id=pc-1&wait=0";
    call(&app, WORKER1, "GET", lease, None).await.assert_ok();
    call(&app, WORKER2, "GET", lease, None)
        .await
        .assert_err(403, 1002);
    // The operator (the single `RAKUTEN_API_TOKEN`) may poll as pc-1.
    app.lease("pc-1", 0.0).await.assert_ok();

    let retire = answer(
        app.client
            .delete(app.url("/api/workers/pc-1?reason=moved%20to%20another%20pc"))
            .bearer_auth(&app.token)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(retire.assert_ok()["detail"]["unbound_token"], "w1");
    call(&app, WORKER2, "GET", lease, None).await.assert_ok();
    call(&app, WORKER1, "GET", lease, None)
        .await
        .assert_err(403, 1002);
}

crate::on_both_engines!(
    a_worker_token_cannot_take_over_another_tokens_worker_id,
    a_worker_token_cannot_lease_or_answer_queries_for_another_tokens_worker_id,
    retiring_a_worker_frees_its_id_for_another_token,
);
