//! The recovery branch (§5) and the local idempotency gate (§6).

use std::sync::atomic::Ordering;

use rakuten_types::TaskId;
use serde_json::{Value, json};
use shop_sim::page::extract_state;

use crate::helpers::{Harness, TOKEN, run_until_handled};

/// Takes a lease as `test-worker` and drops the answer: a lease whose response was lost.
pub(crate) async fn lose_a_lease(h: &Harness) -> Value {
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

/// Places an order on the shop directly (as an earlier, forgotten execution would have, with the
/// task id as the remark; or by a human, with none).
pub(crate) async fn order_on_the_shop(h: &Harness, item_id: i64, note: Option<&str>) -> String {
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
        .json(&json!({"expected_payable_yen": payable, "note": note}))
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
    let existing = order_on_the_shop(&h, 1001, Some("t-recover")).await;
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

/// The site order ids a task's reports carried (distinct, in order).
async fn reported_order_ids(h: &Harness, task_id: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for r in h.task(task_id).await["history"].as_array().unwrap() {
        if let Some(id) = r["site_order_id"].as_str()
            && !ids.iter().any(|i| i == id)
        {
            ids.push(id.to_owned());
        }
    }
    ids
}

/// docs/RELIABILITY.md, "A recovered task claimed another task's order" (D-recovery-verdicts): two
/// tasks of the same item; the first is ordered and paid,
/// the second's lease lapses before its submit; after the reclaim the recovery check sees exactly
/// one order of the item in the window — the first task's — and must not take it as its own.
#[tokio::test]
async fn a_recovered_task_does_not_claim_another_tasks_order() {
    let h = Harness::new().await;
    let w = h.worker().await;
    h.submit_tea("t-first").await;
    run_until_handled(&w).await;
    assert_eq!(h.task("t-first").await["status"], "succeeded");
    h.submit_tea("t-second").await;
    // The renewal right before the submit finds the lease lapsed (6002): nothing is submitted.
    h.proxy.expire_before_renew.store(true, Ordering::SeqCst);
    run_until_handled(&w).await;
    assert_eq!(h.task("t-second").await["status"], "stale");
    assert_eq!(h.submissions(), 1, "the second task did not submit");
    let r = h.reclaim("t-second", "test-worker").await;
    assert_eq!(r["code"], 0, "{r}");
    run_until_handled(&w).await;

    let second = h.task("t-second").await;
    assert_eq!(second["status"], "succeeded", "{second}");
    assert!(second["lease_count"].as_i64().unwrap() > 1, "{second}");
    assert_eq!(h.submissions(), 2, "the second task placed its own order");
    let subs = h.shop.submissions();
    assert_eq!(subs[0].note.as_deref(), Some("t-first"));
    assert_eq!(subs[1].note.as_deref(), Some("t-second"));
    let first_ids = reported_order_ids(&h, "t-first").await;
    let second_ids = reported_order_ids(&h, "t-second").await;
    assert_eq!(first_ids, [subs[0].order_number.clone()]);
    assert_eq!(
        second_ids,
        [subs[1].order_number.clone()],
        "the second task reports its own order, never the first's"
    );
    let events = w
        .ctx()
        .journal
        .events(&TaskId::parse("t-second").unwrap())
        .await
        .unwrap();
    let verdict = events
        .iter()
        .find(|e| {
            e.detail
                .as_deref()
                .is_some_and(|d| d.contains("not ordered on the site"))
        })
        .unwrap_or_else(|| panic!("a NotOrdered verdict: {events:?}"));
    assert!(
        verdict.detail.as_deref().unwrap().contains("t-first"),
        "the first task's order was excluded: {verdict:?}"
    );
}

/// The same, with a worker whose journal knows nothing of the first task (a fresh journal): the
/// remark on the site (the other task's id) is what excludes the order.
#[tokio::test]
async fn the_remark_excludes_another_tasks_order_the_journal_does_not_know() {
    let h = Harness::new().await;
    h.submit_tea("t-other").await;
    run_until_handled(&h.worker().await).await;
    assert_eq!(h.submissions(), 1);
    h.submit_tea("t-mine").await;
    lose_a_lease(&h).await;
    let fresh = h.dir.path().join("fresh-trading.db");
    let w = h.worker_with(|s| s.db_path = fresh).await;
    run_until_handled(&w).await;
    let t = h.task("t-mine").await;
    assert_eq!(t["status"], "succeeded", "{t}");
    assert_eq!(h.submissions(), 2);
    let subs = h.shop.submissions();
    assert_eq!(subs[1].note.as_deref(), Some("t-mine"));
    assert_eq!(
        reported_order_ids(&h, "t-mine").await,
        [subs[1].order_number.clone()]
    );
}

/// An order of the item in the window with no remark (placed by hand, or the remark lost) cannot
/// be attributed: the task is handed to a human, neither claimed nor ordered again.
#[tokio::test]
async fn an_order_without_a_remark_in_the_window_ends_needs_human() {
    let h = Harness::new().await;
    h.submit_tea("t-no-remark").await;
    lose_a_lease(&h).await;
    let by_hand = order_on_the_shop(&h, 1001, None).await;
    run_until_handled(&h.worker().await).await;
    let t = h.task("t-no-remark").await;
    assert_eq!(t["status"], "needs_human", "{t}");
    assert_eq!(h.submissions(), 1, "not ordered again");
    assert!(reported_order_ids(&h, "t-no-remark").await.is_empty());
    let last = t["history"].as_array().unwrap().last().unwrap().clone();
    assert!(
        last["detail"].as_str().unwrap().contains(&by_hand),
        "{last}"
    );
}

/// An order of the item whose remark names another task does not stop the recovery: it is not
/// this task's, and this task is executed.
#[tokio::test]
async fn an_order_whose_remark_names_another_task_is_not_claimed() {
    let h = Harness::new().await;
    h.submit_tea("t-claim").await;
    lose_a_lease(&h).await;
    order_on_the_shop(&h, 1001, Some("t-somebody-else")).await;
    run_until_handled(&h.worker().await).await;
    let t = h.task("t-claim").await;
    assert_eq!(t["status"], "succeeded", "{t}");
    assert_eq!(h.submissions(), 2);
    let subs = h.shop.submissions();
    assert_eq!(subs[1].note.as_deref(), Some("t-claim"));
    assert_eq!(
        reported_order_ids(&h, "t-claim").await,
        [subs[1].order_number.clone()]
    );
}

/// docs/RELIABILITY.md, "A transient gateway error during recovery ended in `needs_human`"
/// (D-recovery-retries-task-read): the gateway fails the task read of the recovery branch a few
/// times (restarting); the worker retries within its lease and the task completes normally.
#[tokio::test]
async fn recovery_retries_a_failing_task_read_and_completes() {
    let h = Harness::new().await;
    h.submit_tea("t-read-retry").await;
    lose_a_lease(&h).await;
    h.proxy.fail_task_reads.store(3, Ordering::SeqCst);
    let w = h.worker().await;
    run_until_handled(&w).await;
    assert_eq!(h.proxy.failed_task_reads.load(Ordering::SeqCst), 3);
    let t = h.task("t-read-retry").await;
    assert_eq!(t["status"], "succeeded", "{t}");
    assert_eq!(t["latest_state"], "paid");
    assert_eq!(h.submissions(), 1);
    let events = w
        .ctx()
        .journal
        .events(&TaskId::parse("t-read-retry").unwrap())
        .await
        .unwrap();
    assert!(events[0].step.starts_with("verify-"), "{events:?}");
}
