//! The recovery branch (§5) and the local idempotency gate (§6).

use rakuten_types::TaskId;
use serde_json::{Value, json};
use shop_sim::page::extract_state;

use crate::helpers::{Harness, TOKEN, run_until_handled};

/// Takes a lease as `test-worker` and drops the answer: a lease whose response was lost.
async fn lose_a_lease(h: &Harness) -> Value {
    let v: Value = h
        .client
        .get(format!(
            "{}/api/orders/lease?worker_id=test-worker&wait=1",
            h.gw_address
        ))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["data"]["lease_count"], 1, "{v}");
    v
}

/// Places an order on the shop directly (as an earlier, forgotten execution would have).
async fn order_on_the_shop(h: &Harness, item_id: i64) -> String {
    let c = &h.client;
    let base = &h.shop.base_url;
    c.post(format!("{base}/cart/add"))
        .header("cookie", "session=sim-session")
        .json(&json!({"item_id": item_id}))
        .send()
        .await
        .unwrap();
    let html = c
        .get(format!("{base}/order/confirm"))
        .header("cookie", "session=sim-session")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let payable = extract_state(&html).unwrap()["confirm"]["payable_yen"]
        .as_i64()
        .unwrap();
    let html = c
        .post(format!("{base}/order/submit"))
        .header("cookie", "session=sim-session")
        .json(&json!({"expected_payable_yen": payable}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    extract_state(&html).unwrap()["order"]["order_number"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn recovery_lease_goes_through_verification_not_execution() {
    let h = Harness::new().await;
    h.submit_tea("t-recover").await;
    lose_a_lease(&h).await;
    let existing = order_on_the_shop(&h, 1001).await;
    let w = h.worker().await;
    run_until_handled(&w).await;
    assert_eq!(h.submissions(), 1, "the worker did not submit again");
    let t = h.task("t-recover").await;
    assert_eq!(t["lease_count"], 2);
    assert_eq!(t["status"], "succeeded", "{t}");
    assert_eq!(t["latest_state"], "paid");
    let hist = t["history"].as_array().unwrap();
    assert!(
        hist.iter()
            .all(|r| r["site_order_id"].is_null() || r["site_order_id"] == existing.as_str())
    );
    assert!(
        !h.evidence_dir.join("t-recover/01-cart-add.html").exists(),
        "no cart step ran"
    );
    let events = w
        .ctx()
        .journal
        .events(&TaskId::parse("t-recover").unwrap())
        .await
        .unwrap();
    assert!(
        events[0].step.starts_with("verify-"),
        "verification first: {events:?}"
    );
    assert!(
        events
            .iter()
            .all(|e| e.step != "cart-add" && e.step != "order-submit")
    );
}

#[tokio::test]
async fn recovery_that_finds_no_order_executes_once() {
    let h = Harness::new().await;
    h.submit_tea("t-recover-none").await;
    lose_a_lease(&h).await;
    let w = h.worker().await;
    run_until_handled(&w).await;
    let events = w
        .ctx()
        .journal
        .events(&TaskId::parse("t-recover-none").unwrap())
        .await
        .unwrap();
    assert!(events[0].step.starts_with("verify-"), "{events:?}");
    assert_eq!(h.submissions(), 1);
    assert_eq!(h.task("t-recover-none").await["status"], "succeeded");
}

#[tokio::test]
async fn recovery_with_an_unreadable_order_list_ends_needs_human() {
    let h = Harness::new().await;
    h.submit_tea("t-unknown").await;
    lose_a_lease(&h).await;
    h.set_faults(json!({"order_list_changed": true})).await;
    run_until_handled(&h.worker().await).await;
    let t = h.task("t-unknown").await;
    assert_eq!(t["status"], "needs_human", "{t}");
    let last = t["history"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["error_code"], 5002, "{last}");
    assert!(
        last["evidence_ref"]
            .as_str()
            .unwrap()
            .contains("verify-list-p1")
    );
    assert_eq!(h.submissions(), 0);
}

#[tokio::test]
async fn locally_finished_task_is_rereported_not_reordered() {
    let h = Harness::new().await;
    h.submit_tea("t-gate").await;
    // The lease lapses just before the terminal report: the order is paid and finished locally,
    // the gateway turns the task stale and refuses the report (6002).
    *h.proxy.expire_before_report.lock().unwrap() = Some("paid".into());
    let w = h.worker().await;
    run_until_handled(&w).await;
    assert_eq!(h.task("t-gate").await["status"], "stale");
    assert_eq!(h.submissions(), 1);
    let r = h.reclaim("t-gate", "test-worker").await;
    assert_eq!(r["code"], 0, "{r}");
    run_until_handled(&w).await;
    let t = h.task("t-gate").await;
    assert_eq!(t["status"], "succeeded", "{t}");
    assert_eq!(t["latest_state"], "paid");
    assert_eq!(h.submissions(), 1, "not ordered again");
    let events = w
        .ctx()
        .journal
        .events(&TaskId::parse("t-gate").unwrap())
        .await
        .unwrap();
    assert_eq!(events.last().unwrap().step, "rereport", "{events:?}");
    assert_eq!(events.iter().filter(|e| e.step == "cart-add").count(), 1);
}
