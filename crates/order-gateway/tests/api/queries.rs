//! The account read-only query channel (spec §11): every gateway line of the §11.6 checklist, plus
//! size limits, fencing details and bad input. Real HTTP, `ManualClock` for lease expiry, TTL and
//! retention.

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app, spawn_app_with};

/// Leases one query to `worker` and returns the grant.
async fn leased_query(app: &TestApp, worker: &str) -> Value {
    let g = app.lease_query(worker, 0.0).await;
    let data = g.assert_ok().clone();
    assert!(!data.is_null(), "nothing leased");
    data
}

fn success(worker: &str, grant: &Value, result: Value) -> Value {
    json!({"worker_id": worker, "lease_token": grant["lease_token"], "success": true, "result": result})
}

fn list_result(raw: Value) -> Value {
    json!({
        "kind": "order_list", "since": null, "max_pages": 2, "window_fully_covered": true,
        "orders": [{"order_number": "306087-20260813-0000000001", "order_date": "2026-08-13T01:00:00.000Z",
                    "shop_id": 306087, "shop_name": "sim", "items": []}],
        "raw_pages": [raw],
    })
}

#[tokio::test]
async fn submitting_the_same_query_id_twice_creates_one_query() {
    let app = spawn_app().await;
    let a = app.submit_list_query("aq-1").await;
    assert_eq!(
        a.assert_ok(),
        &json!({"query_id": "aq-1", "status": "queued", "created": true})
    );
    let b = app.submit_list_query("aq-1").await;
    assert_eq!(
        b.assert_ok(),
        &json!({"query_id": "aq-1", "status": "queued", "created": false})
    );
    let list = app.get("/api/account/queries").send().await.unwrap();
    let list = crate::helpers::answer(list).await;
    assert_eq!(list.assert_ok()["total"], 1);
    // Without a query_id the server makes one.
    let c = app
        .submit_query(
            json!({"site": "rakuten", "kind": "order_detail", "params": {"order_number": "1-2-3"}}),
        )
        .await;
    assert_eq!(c.assert_ok()["created"], true);
    assert!(!c.data()["query_id"].as_str().unwrap().is_empty());
}

#[tokio::test]
async fn unknown_kind_is_refused_at_submit_with_422() {
    let app = spawn_app().await;
    let cases = [
        json!({"site": "rakuten", "kind": "order_cancel", "params": {}}),
        json!({"site": "rakuten", "kind": "order_detail", "params": {}}),
        json!({"site": "rakuten", "kind": "order_detail", "params": {"order_number": ""}}),
        json!({"site": "rakuten", "kind": "order_list", "params": {"max_pages": 0}}),
        json!({"site": "rakuten", "kind": "order_list", "params": {"max_pages": 21}}),
        json!({"site": "rakuten", "kind": "order_list", "params": {"since": "last week"}}),
        json!({"site": "rakuten", "kind": "order_list", "params": {"maxPages": 3}}),
        json!({"site": "rakuten", "kind": "order_list", "params": [1, 2]}),
        json!({"site": "amazon", "kind": "order_list", "params": {}}),
        json!({"site": "rakuten", "params": {}}),
        json!({"query_id": "a/b", "site": "rakuten", "kind": "order_list"}),
        json!({"query_id": "lease", "site": "rakuten", "kind": "order_list"}),
    ];
    for body in cases {
        let a = app.submit_query(body.clone()).await;
        a.assert_err(422, 1003);
    }
    let big = "x".repeat(20 * 1024);
    app.submit_query(json!({"site": "rakuten", "kind": "order_detail", "params": {"order_number": "1", "pad": big}}))
        .await
        .assert_err(422, 1003);
    // Nothing was stored, nothing can be leased.
    assert!(app.lease_query("w1", 0.0).await.assert_ok().is_null());
    // The valid edges pass.
    for body in [
        json!({"site": "rakuten", "kind": "order_list", "params": {"max_pages": 1}}),
        json!({"site": "rakuten", "kind": "order_list", "params": {"max_pages": 20, "since": "2026-08-01T00:00:00+09:00"}}),
        json!({"site": "rakuten", "kind": "order_list"}),
    ] {
        app.submit_query(body).await.assert_ok();
    }
}

#[tokio::test]
async fn order_lease_works_while_queries_are_in_flight() {
    let app = spawn_app().await;
    app.submit_list_query("aq-1").await.assert_ok();
    leased_query(&app, "w1").await;
    // An order task is leased although a query is in flight…
    app.leased("po-1", "w1").await;
    // …and a query is leased although an order task is active.
    app.submit_list_query("aq-2").await.assert_ok();
    assert_eq!(leased_query(&app, "w1").await["query_id"], "aq-2");
    assert_eq!(app.status_of("po-1").await, "leased");
}

#[tokio::test]
async fn several_queries_can_be_in_flight_at_once() {
    let app = spawn_app().await;
    for i in 0..5 {
        app.submit_list_query(&format!("aq-{i}")).await.assert_ok();
    }
    let mut ids = Vec::new();
    for i in 0..5 {
        let g = leased_query(&app, &format!("w{}", i % 2)).await;
        assert_eq!(g["attempt"], 1);
        ids.push(g["query_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(ids, ["aq-0", "aq-1", "aq-2", "aq-3", "aq-4"]);
    for id in &ids {
        assert_eq!(app.query_status(id).await, "leased");
    }
    let a = crate::helpers::answer(
        app.get("/api/account/queries?status=leased")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(a.assert_ok()["total"], 5);
}

#[tokio::test]
async fn expired_query_lease_returns_to_queued_and_attempt_increments() {
    let app = spawn_app().await;
    app.submit_list_query("aq-1").await.assert_ok();
    let first = leased_query(&app, "w1").await;
    assert_eq!(first["attempt"], 1);
    app.expire_query_leases();
    let sweep = app.sweep_queries().await;
    assert_eq!(sweep.lapsed.len(), 1);
    assert_eq!(app.query_status("aq-1").await, "queued");
    let second = leased_query(&app, "w2").await;
    assert_eq!(second["query_id"], "aq-1");
    assert_eq!(second["attempt"], 2);
    assert_ne!(second["lease_token"], first["lease_token"]);
    let v = app.query("aq-1").await;
    assert_eq!(v.assert_ok()["attempt"], 2);
    assert_eq!(v.data()["lease_owner"], "w2");
}

#[tokio::test]
async fn exhausted_attempts_end_failed() {
    let app = spawn_app().await;
    app.submit_list_query("aq-1").await.assert_ok();
    for attempt in 1..=3 {
        let g = leased_query(&app, "w1").await;
        assert_eq!(g["attempt"], attempt);
        app.expire_query_leases();
        app.sweep_queries().await;
    }
    let v = app.query("aq-1").await;
    let d = v.assert_ok();
    assert_eq!(d["status"], "failed");
    assert_eq!(d["attempt"], 3);
    assert!(
        d["error_message"]
            .as_str()
            .unwrap()
            .contains("attempts exhausted"),
        "{d}"
    );
    assert!(d["finished_at"].is_string());
    assert!(app.lease_query("w1", 0.0).await.assert_ok().is_null());
}

#[tokio::test]
async fn query_older_than_ttl_expires_and_is_never_leased() {
    let app = spawn_app().await;
    app.submit_list_query("aq-queued").await.assert_ok();
    app.submit_list_query("aq-leased").await.assert_ok();
    app.submit_list_query("aq-ignored").await.assert_ok();
    leased_query(&app, "w1").await;
    app.clock.advance(Duration::from_secs(60));
    leased_query(&app, "w1").await;
    // Past the TTL, before any sweep: the lease itself refuses the old query.
    app.clock
        .advance(Duration::from_secs_f64(app.settings.query_ttl_seconds));
    assert!(app.lease_query("w2", 0.0).await.assert_ok().is_null());
    let sweep = app.sweep_queries().await;
    assert_eq!(sweep.expired.len(), 3, "{sweep:?}");
    for id in ["aq-queued", "aq-leased", "aq-ignored"] {
        assert_eq!(app.query_status(id).await, "expired");
    }
    assert!(app.lease_query("w2", 0.0).await.assert_ok().is_null());
    // A result for an expired query is refused.
    app.query_result(
        "aq-queued",
        json!({"worker_id": "w1", "success": false, "error_code": 5001, "error_message": "x"}),
    )
    .await
    .assert_err(409, 6006);
}

#[tokio::test]
async fn late_result_from_previous_holder_is_refused_with_6006() {
    let app = spawn_app().await;
    app.submit_list_query("aq-1").await.assert_ok();
    let old = leased_query(&app, "w1").await;
    app.expire_query_leases();
    app.sweep_queries().await;
    let new = leased_query(&app, "w2").await;
    app.query_result("aq-1", success("w2", &new, list_result(json!({"page": 1}))))
        .await
        .assert_ok();
    // The previous holder's late result: refused, the new result stays.
    app.query_result(
        "aq-1",
        success("w1", &old, list_result(json!({"page": "old"}))),
    )
    .await
    .assert_err(409, 6006);
    // The same worker with a superseded token is refused too.
    app.submit_list_query("aq-2").await.assert_ok();
    let a = leased_query(&app, "w3").await;
    app.expire_query_leases();
    app.sweep_queries().await;
    let b = leased_query(&app, "w3").await;
    app.query_result("aq-2", success("w3", &a, list_result(json!({}))))
        .await
        .assert_err(409, 6006);
    // A lapsed lease is refused even before the sweeper ran.
    app.expire_query_leases();
    app.query_result("aq-2", success("w3", &b, list_result(json!({}))))
        .await
        .assert_err(409, 6006);
    let v = app.query("aq-1").await;
    let d = v.assert_ok();
    assert_eq!(d["status"], "succeeded");
    assert_eq!(d["result"]["raw_pages"], json!([{"page": 1}]));
    assert_eq!(d["lease_owner"], "w2");
}

#[tokio::test]
async fn identical_result_repeat_from_the_same_lease_is_acknowledged_as_duplicate() {
    let app = spawn_app().await;
    app.submit_list_query("aq-1").await.assert_ok();
    let g = leased_query(&app, "w1").await;
    let body = success("w1", &g, list_result(json!({"p": 1})));
    let first = app.query_result("aq-1", body.clone()).await;
    assert_eq!(first.assert_ok()["duplicate"], false);
    assert_eq!(first.data()["status"], "succeeded");
    let again = app.query_result("aq-1", body).await;
    assert_eq!(again.assert_ok()["duplicate"], true);
    assert_eq!(again.data()["status"], "succeeded");
    // A different verdict from the same lease is not a repeat.
    app.query_result(
        "aq-1",
        json!({"worker_id": "w1", "lease_token": g["lease_token"], "success": false, "error_message": "x"}),
    )
    .await
    .assert_err(409, 6006);
}

#[tokio::test]
async fn terminal_queries_past_retention_are_purged_in_flight_ones_kept() {
    let app = spawn_app_with(|s| {
        // Long TTL so only retention acts here.
        s.query_ttl_seconds = 30.0 * 24.0 * 3600.0;
    })
    .await;
    app.submit_list_query("aq-done").await.assert_ok();
    let g = leased_query(&app, "w1").await;
    app.query_result("aq-done", success("w1", &g, list_result(json!({}))))
        .await
        .assert_ok();
    app.submit_list_query("aq-failed").await.assert_ok();
    let g = leased_query(&app, "w1").await;
    app.query_result(
        "aq-failed",
        json!({"worker_id": "w1", "lease_token": g["lease_token"], "success": false, "error_code": 5001, "error_message": "login lost"}),
    )
    .await
    .assert_ok();
    app.submit_list_query("aq-leased").await.assert_ok();
    assert_eq!(leased_query(&app, "w1").await["query_id"], "aq-leased");
    app.submit_list_query("aq-queued").await.assert_ok();
    let retention = Duration::from_secs_f64(app.settings.query_retention_seconds);
    app.clock.advance(retention - Duration::from_secs(10));
    assert_eq!(app.sweep_queries().await.purged, 0);
    app.clock.advance(Duration::from_secs(20));
    let sweep = app.sweep_queries().await;
    assert_eq!(sweep.purged, 2, "{sweep:?}");
    app.query("aq-done").await.assert_err(404, 6005);
    app.query("aq-failed").await.assert_err(404, 6005);
    app.query_result(
        "aq-done",
        json!({"worker_id": "w1", "success": true, "result": list_result(json!({}))}),
    )
    .await
    .assert_err(404, 6005);
    // In flight (queued or leased, redelivered by the lapse): untouched by the purge.
    for id in ["aq-queued", "aq-leased"] {
        let s = app.query_status(id).await;
        assert!(s == "queued" || s == "leased", "{id}: {s}");
    }
}

#[tokio::test]
async fn raw_site_json_appears_in_full_and_page_limit_is_reported() {
    let app = spawn_app().await;
    app.submit_list_query("aq-1").await.assert_ok();
    let g = leased_query(&app, "w1").await;
    assert_eq!(g["kind"], "order_list");
    assert_eq!(g["params"], json!({"max_pages": 2}));
    let raw = json!({"page": 1, "total_pages": 9, "orders": [{"order_number": "a", "extra": {"配送": "宅配便", "amount": 1234}}],
                     "unmodelled": [1, 2, {"deep": true}]});
    let mut result = list_result(raw.clone());
    result["window_fully_covered"] = json!(false);
    result["raw_pages"] = json!([raw.clone(), {"page": 2}]);
    let ack = app
        .query_result("aq-1", success("w1", &g, result.clone()))
        .await;
    assert_eq!(ack.assert_ok()["raw_omitted"], false);
    let v = app.query("aq-1").await;
    let d = v.assert_ok();
    assert_eq!(
        d["result"], result,
        "stored result differs from what was sent"
    );
    assert_eq!(d["result"]["window_fully_covered"], false);
    assert_eq!(d["result"]["max_pages"], 2);
    assert_eq!(d["raw_omitted"], false);
}

#[tokio::test]
async fn site_error_codes_are_passed_through() {
    let app = spawn_app().await;
    for (i, code) in [5001, 5002, 5003, 5007, 4242].into_iter().enumerate() {
        let id = format!("aq-{i}");
        app.submit_list_query(&id).await.assert_ok();
        let g = leased_query(&app, "w1").await;
        let ack = app
            .query_result(
                &id,
                json!({"worker_id": "w1", "lease_token": g["lease_token"], "success": false,
                       "error_code": code, "error_message": format!("site said {code}")}),
            )
            .await;
        assert_eq!(ack.assert_ok()["status"], "failed");
        let v = app.query(&id).await;
        let d = v.assert_ok();
        assert_eq!(d["status"], "failed");
        assert_eq!(d["error_code"], code);
        assert_eq!(d["error_message"], format!("site said {code}"));
        assert!(d["result"].is_null());
    }
}

#[tokio::test]
async fn oversized_result_drops_raw_pages_and_sets_raw_omitted() {
    let app = spawn_app_with(|s| s.query_result_max_bytes = 4096).await;
    app.submit_list_query("aq-1").await.assert_ok();
    let g = leased_query(&app, "w1").await;
    let raw = json!({"blob": "x".repeat(6000)});
    let ack = app
        .query_result("aq-1", success("w1", &g, list_result(raw)))
        .await;
    let a = ack.assert_ok();
    assert_eq!(a["status"], "succeeded");
    assert_eq!(a["raw_omitted"], true);
    let v = app.query("aq-1").await;
    let d = v.assert_ok();
    assert_eq!(d["raw_omitted"], true);
    assert_eq!(d["result"]["raw_omitted"], true);
    assert_eq!(d["result"]["raw_pages"], json!([]));
    assert_eq!(d["result"]["orders"].as_array().unwrap().len(), 1);

    // order_detail: `raw` is dropped.
    app.submit_query(json!({"query_id": "aq-2", "site": "rakuten", "kind": "order_detail", "params": {"order_number": "1-2-3"}}))
        .await
        .assert_ok();
    let g = leased_query(&app, "w1").await;
    let detail = json!({"kind": "order_detail", "order_number": "1-2-3", "found": true, "stage_label": "出荷",
                        "order_state": "shipped", "raw": {"blob": "y".repeat(6000)}, "raw_available": true});
    app.query_result("aq-2", success("w1", &g, detail))
        .await
        .assert_ok();
    let v = app.query("aq-2").await;
    let d = v.assert_ok();
    assert!(d["result"]["raw"].is_null());
    assert_eq!(d["result"]["order_state"], "shipped");
    assert_eq!(d["raw_omitted"], true);
}

#[tokio::test]
async fn result_still_too_big_without_raw_fails_the_query_with_a_clear_error() {
    let app = spawn_app_with(|s| s.query_result_max_bytes = 4096).await;
    app.submit_list_query("aq-1").await.assert_ok();
    let g = leased_query(&app, "w1").await;
    let orders: Vec<Value> = (0..100)
        .map(|i| json!({"order_number": format!("306087-20260813-{i:010}"), "order_date": "2026-08-13T00:00:00Z",
                        "shop_id": 1, "shop_name": "a shop with a long name", "items": []}))
        .collect();
    let mut result = list_result(json!({}));
    result["orders"] = json!(orders);
    let ack = app.query_result("aq-1", success("w1", &g, result)).await;
    let a = ack.assert_ok();
    assert_eq!(a["status"], "failed");
    assert_eq!(a["error_code"], 1004);
    let v = app.query("aq-1").await;
    let d = v.assert_ok();
    assert_eq!(d["status"], "failed");
    assert!(d["result"].is_null());
    let msg = d["error_message"].as_str().unwrap();
    assert!(
        msg.contains("result too large") && msg.contains("RAKUTEN_QUERY_RESULT_MAX_BYTES"),
        "{msg}"
    );
}

#[tokio::test]
async fn a_result_body_over_the_route_limit_is_a_413_envelope() {
    let app = spawn_app_with(|s| s.query_result_max_bytes = 4096).await;
    app.submit_list_query("aq-1").await.assert_ok();
    let g = leased_query(&app, "w1").await;
    let huge = list_result(json!({"blob": "z".repeat(200 * 1024)}));
    app.query_result("aq-1", success("w1", &g, huge))
        .await
        .assert_err(413, 1004);
    // The default limit takes a 1 MiB result: larger than the order routes' bodies.
    let app = spawn_app().await;
    app.submit_list_query("aq-1").await.assert_ok();
    let g = leased_query(&app, "w1").await;
    let big = list_result(json!({"blob": "z".repeat(900 * 1024)}));
    let a = app.query_result("aq-1", success("w1", &g, big)).await;
    assert_eq!(a.assert_ok()["raw_omitted"], false);
}

#[tokio::test]
async fn bad_results_are_422_and_change_nothing() {
    let app = spawn_app().await;
    app.submit_list_query("aq-1").await.assert_ok();
    let g = leased_query(&app, "w1").await;
    let t = g["lease_token"].clone();
    for body in [
        json!({"worker_id": "w1", "lease_token": t, "success": true}),
        json!({"worker_id": "w1", "lease_token": t, "success": true, "result": [1]}),
        json!({"worker_id": "w1", "lease_token": t, "success": true, "result": {}, "error_code": 5001}),
        json!({"worker_id": "w1", "lease_token": t, "success": false, "result": {"a": 1}}),
        json!({"lease_token": t, "success": false}),
        json!({"worker_id": "w1", "lease_token": "", "success": false}),
        json!({"worker_id": "w1", "success": "yes"}),
        // A success without the §11.3 fields was accepted.
        json!({"worker_id": "w1", "lease_token": t, "success": true, "result": {"kind": "order_list"}}),
        json!({"worker_id": "w1", "lease_token": t, "success": true, "result": {"kind": "order_detail", "found": true}}),
        json!({"worker_id": "w1", "lease_token": t, "success": true, "result": {"kind": "other"}}),
    ] {
        app.query_result("aq-1", body.clone())
            .await
            .assert_err(422, 1003);
    }
    assert_eq!(app.query_status("aq-1").await, "leased");
    app.query("no-such").await.assert_err(404, 6005);
    app.query_result("no-such", json!({"worker_id": "w1", "success": false}))
        .await
        .assert_err(404, 6005);
    for q in ["?status=done", "?kind=x", "?limit=0", "?offset=-1"] {
        let a = crate::helpers::answer(
            app.get(&format!("/api/account/queries{q}"))
                .send()
                .await
                .unwrap(),
        )
        .await;
        a.assert_err(422, 1003);
    }
    app.lease_query("w%2F1", 0.0).await.assert_err(422, 1003);
    let a = crate::helpers::answer(
        app.get("/api/account/queries/lease?worker_id=w1&wait=-1")
            .send()
            .await
            .unwrap(),
    )
    .await;
    a.assert_err(422, 1003);
}

#[tokio::test]
async fn query_lease_does_not_refresh_the_worker_heartbeat() {
    let app = spawn_app().await;
    app.submit_list_query("aq-1").await.assert_ok();
    leased_query(&app, "query-only-worker").await;
    app.lease_query("query-only-worker", 0.0).await.assert_ok();
    let h = app.health().await;
    let workers = h.body["data"]["workers"].as_array().unwrap().clone();
    assert!(
        workers
            .iter()
            .all(|w| w["worker_id"] != "query-only-worker"),
        "{workers:?}"
    );
}

#[tokio::test]
async fn list_filters_by_status_and_kind_without_result_bodies() {
    let app = spawn_app().await;
    app.submit_list_query("aq-1").await.assert_ok();
    app.submit_query(json!({"query_id": "aq-2", "site": "rakuten", "kind": "order_detail", "params": {"order_number": "1-2"}}))
        .await
        .assert_ok();
    let g = leased_query(&app, "w1").await;
    app.query_result("aq-1", success("w1", &g, list_result(json!({}))))
        .await
        .assert_ok();
    let get = |q: &'static str| {
        let app = &app;
        async move {
            crate::helpers::answer(
                app.get(&format!("/api/account/queries{q}"))
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        }
    };
    let all = get("").await;
    let d = all.assert_ok();
    assert_eq!(d["total"], 2);
    assert_eq!(d["limit"], 50);
    assert!(d["items"][0].get("result").is_none());
    assert_eq!(get("?status=succeeded").await.assert_ok()["total"], 1);
    assert_eq!(
        get("?kind=order_detail").await.assert_ok()["items"][0]["query_id"],
        "aq-2"
    );
    assert_eq!(
        get("?limit=1&offset=1").await.assert_ok()["items"][0]["query_id"],
        "aq-2"
    );
    assert_eq!(get("?limit=1000").await.assert_ok()["limit"], 200);
}

#[tokio::test]
async fn a_waiting_query_long_poll_wakes_when_a_query_is_submitted() {
    let app = spawn_app().await;
    let waiter = {
        let app_url = app.url("/api/account/queries/lease?worker_id=w1&wait=10");
        let client = app.client.clone();
        let token = app.token.clone();
        tokio::spawn(async move {
            let t = std::time::Instant::now();
            let r = client.get(app_url).bearer_auth(token).send().await.unwrap();
            (crate::helpers::answer(r).await, t.elapsed())
        })
    };
    app.wait_for_long_polls("queries", 1).await;
    // An order task does not wake the query poll into a grant.
    app.submit("po-1").await.assert_ok();
    app.submit_list_query("aq-1").await.assert_ok();
    let (a, took) = waiter.await.unwrap();
    assert_eq!(a.assert_ok()["query_id"], "aq-1");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[tokio::test]
async fn openapi_lists_the_query_paths() {
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
    for p in [
        "/api/account/queries",
        "/api/account/queries/lease",
        "/api/account/queries/{query_id}",
        "/api/account/queries/{query_id}/result",
    ] {
        assert!(doc["paths"].get(p).is_some(), "{p} missing");
    }
}

#[tokio::test]
async fn the_schema_ties_query_status_to_lease_result_and_timestamps() {
    use std::str::FromStr;

    use sqlx::ConnectOptions;
    let app = spawn_app().await;
    app.submit_list_query("aq-1").await.assert_ok();
    leased_query(&app, "w1").await;
    // Bypass the code: raw SQL against the file.
    let mut conn = sqlx::sqlite::SqliteConnectOptions::from_str(&format!(
        "sqlite://{}",
        app.settings.db_path.display()
    ))
    .unwrap()
    .busy_timeout(Duration::from_secs(5))
    .connect()
    .await
    .unwrap();
    for (what, sql) in [
        (
            "leased without a token",
            "UPDATE account_queries SET lease_token = NULL WHERE query_id = 'aq-1'",
        ),
        (
            "queued still holding a lease",
            "UPDATE account_queries SET status = 'queued' WHERE query_id = 'aq-1'",
        ),
        (
            "succeeded without result and finished_at",
            "UPDATE account_queries SET status = 'succeeded' WHERE query_id = 'aq-1'",
        ),
        (
            "failed without a message",
            "UPDATE account_queries SET status = 'failed', finished_at = updated_at WHERE query_id = 'aq-1'",
        ),
        (
            "more attempts than allowed",
            "UPDATE account_queries SET attempt = 4 WHERE query_id = 'aq-1'",
        ),
        (
            "unknown kind",
            "UPDATE account_queries SET kind = 'order_cancel' WHERE query_id = 'aq-1'",
        ),
        (
            "an error on an open query",
            "UPDATE account_queries SET error_code = 5001 WHERE query_id = 'aq-1'",
        ),
    ] {
        let r = sqlx::query(sql).execute(&mut conn).await;
        assert!(r.is_err(), "{what}: the schema accepted it");
    }
    assert_eq!(app.query_status("aq-1").await, "leased");
}

#[tokio::test]
async fn reusing_a_query_id_with_different_params_is_a_409_naming_the_field() {
    let app = spawn_app().await;
    app.submit_list_query("aq-1").await.assert_ok();
    assert_eq!(
        app.submit_list_query("aq-1").await.assert_ok()["created"],
        false
    );
    for (body, field) in [
        (
            json!({"query_id": "aq-1", "site": "rakuten", "kind": "order_list", "params": {"max_pages": 3}}),
            "params.max_pages",
        ),
        (
            json!({"query_id": "aq-1", "site": "rakuten", "kind": "order_detail", "params": {"order_number": "1-2-3"}}),
            "kind",
        ),
    ] {
        let a = app.submit_query(body).await;
        a.assert_err(409, 1006);
        let msg = a.body["msg"].as_str().unwrap();
        assert!(msg.contains(field), "{msg}");
    }
}

#[tokio::test]
async fn order_detail_refuses_path_like_order_numbers() {
    let app = spawn_app().await;
    for n in [
        "../../etc/passwd",
        "a/b",
        "1 2",
        "1%2F2",
        "x.y",
        &"9".repeat(65),
    ] {
        app.submit_query(
            json!({"site": "rakuten", "kind": "order_detail", "params": {"order_number": n}}),
        )
        .await
        .assert_err(422, 1003);
    }
    app.submit_query(json!({"site": "rakuten", "kind": "order_detail",
        "params": {"order_number": "306087-20260801-0000000001"}}))
        .await
        .assert_ok();
}
