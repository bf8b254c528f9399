//! Requirement "优先轮询触发场景与入队事实".

use serde_json::json;

use super::helpers::*;

const DAY: u64 = 86_400;

#[super::lane]
#[tokio::test]
async fn main_package_paid_and_active_enqueues_purchase_activated() {
    let app = spawn_seeded().await;
    let out = app.buy("card", "CA1", "main").await;
    assert_eq!(out["usage_active"], true);
    assert_eq!(out["trigger_type"], "purchase_activated");
    let items = app.list("iccid=CA1").await;
    assert_eq!(items.len(), 3, "one item per configured task type");
    for i in &items {
        assert_eq!(i["trigger_type"], "purchase_activated");
        assert_eq!(i["status"], "pending");
        assert_eq!(i["asset_type"], "card");
        assert_eq!(i["asset_id"], "CA1");
    }
    let mut types: Vec<_> = items
        .iter()
        .map(|i| i["task_type"].as_str().unwrap())
        .collect();
    types.sort();
    assert_eq!(types, ["card_status", "data_usage", "package"]);
}

#[super::lane]
#[tokio::test]
async fn repurchase_after_expiry_enqueues_renewal_activated() {
    let app = spawn_seeded().await;
    app.buy("card", "CA1", "main").await;
    app.run_executor().await;
    app.advance(31 * DAY);
    let poll = app
        .post_ok(
            "/api/package-poll",
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CA1"}),
        )
        .await;
    assert_eq!(poll["usages_expired"], 1);
    let out = app.buy("card", "CA1", "main").await;
    assert_eq!(out["usage_active"], true);
    assert_eq!(out["trigger_type"], "renewal_activated");
    let items = app.list("iccid=CA1&status=pending").await;
    assert_eq!(items.len(), 3);
    assert!(
        items
            .iter()
            .all(|i| i["trigger_type"] == "renewal_activated")
    );
}

#[super::lane]
#[tokio::test]
async fn queued_main_package_activation_enqueues_queue_activated() {
    let app = spawn_seeded().await;
    app.buy("card", "CA1", "main").await;
    app.run_executor().await;
    let queued = app.buy("card", "CA1", "main").await;
    assert_eq!(
        queued["usage_active"], false,
        "queued behind the active main package"
    );
    assert_eq!(queued["items"].as_array().unwrap().len(), 0);
    assert_eq!(app.active_count().await, 0);
    let usage = queued["usage_id"].as_str().unwrap();
    let path = format!("/api/usages/{usage}/activate");
    let act = app.post_ok(&path, PLATFORM, json!({})).await;
    assert_eq!(act["items"].as_array().unwrap().len(), 3);
    let items = app.list("iccid=CA1&status=pending").await;
    assert!(items.iter().all(|i| i["trigger_type"] == "queue_activated"));
    // The conditional update must hit one row: a second activation is a conflict, no new items.
    let (s, v) = app.post(&path, PLATFORM, json!({})).await;
    assert_eq!(s, 409, "{v}");
    assert_eq!(app.active_count().await, 3);
}

#[super::lane]
#[tokio::test]
async fn addon_activation_enqueues_addon_activated() {
    let app = spawn_seeded().await;
    let out = app.buy("card", "CA1", "addon").await;
    assert_eq!(out["trigger_type"], "addon_activated");
    let items = app.list("iccid=CA1").await;
    assert_eq!(items.len(), 3);
    assert!(items.iter().all(|i| i["trigger_type"] == "addon_activated"));
}

#[super::lane]
#[tokio::test]
async fn no_valid_package_with_a_pending_usage_enqueues_no_valid_package() {
    let app = spawn_seeded().await;
    app.buy("card", "CA1", "main").await;
    app.run_executor().await;
    let queued = app.buy("card", "CA1", "main").await;
    assert_eq!(queued["usage_active"], false);
    app.advance(31 * DAY);
    let body = json!({"asset_type": "card", "asset_id": "CA1"});
    let poll = app
        .post_ok("/api/package-poll", PLATFORM, body.clone())
        .await;
    assert_eq!(poll["no_valid_package"], true);
    assert_eq!(poll["pending_usage"], true);
    let created = poll["items"].as_array().unwrap();
    assert_eq!(created.len(), 3);
    assert!(created.iter().all(|i| i["action"] == "created"));
    let items = app.list("iccid=CA1&status=pending").await;
    assert!(
        items
            .iter()
            .all(|i| i["trigger_type"] == "no_valid_package")
    );
    // The next package poll sees the same state: a replay, nothing new.
    let again = app.post_ok("/api/package-poll", PLATFORM, body).await;
    assert!(
        again["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["action"] == "replayed")
    );
    assert_eq!(app.active_count().await, 3);
    app.assert_invariants().await;
}

#[super::lane]
#[tokio::test]
async fn no_valid_package_without_a_pending_usage_enqueues_nothing() {
    let app = spawn_seeded().await;
    app.buy("card", "CA1", "main").await;
    app.run_executor().await;
    app.advance(31 * DAY);
    let poll = app
        .post_ok(
            "/api/package-poll",
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CA1"}),
        )
        .await;
    assert_eq!(poll["no_valid_package"], true);
    assert_eq!(poll["pending_usage"], false);
    assert_eq!(poll["items"].as_array().unwrap().len(), 0);
    assert_eq!(app.active_count().await, 0);
}

#[super::lane]
#[tokio::test]
async fn failed_cancelled_or_unpaid_orders_enqueue_nothing() {
    let app = spawn_seeded().await;
    let failed = app.order("card", "CA1", "main").await;
    let out = app.pay(&failed, "pay-f", "failed").await;
    assert_eq!(out["status"], "failed");
    let cancelled = app.order("card", "CA1", "addon").await;
    let out = app.pay(&cancelled, "pay-c", "cancelled").await;
    assert_eq!(out["status"], "cancelled");
    let _unpaid = app.order("device", "DEV1", "main").await;
    assert_eq!(app.list("").await.len(), 0);
    // A later "paid" callback for the failed order is refused and enqueues nothing.
    let (s, v) = app
        .post(
            "/api/payments/callback",
            PLATFORM,
            json!({"payment_id": "pay-late", "order_id": failed, "status": "paid"}),
        )
        .await;
    assert_eq!(s, 409, "{v}");
    assert_eq!(app.list("").await.len(), 0);
    assert_eq!(app.run_executor().await.due, 0);
}

#[super::lane]
#[tokio::test]
async fn a_payment_callback_replayed_with_a_different_status_is_a_409_naming_both_values() {
    // `failed` then the same payment id `paid` was a silent 200 replay.
    let app = spawn_seeded().await;
    let order = app.order("card", "CA1", "main").await;
    let out = app.pay(&order, "P29", "failed").await;
    assert_eq!(out["status"], "failed");
    let (s, v) = app
        .post(
            "/api/payments/callback",
            PLATFORM,
            json!({"payment_id": "P29", "order_id": order, "status": "paid"}),
        )
        .await;
    assert_eq!(s, 409, "{v}");
    assert_eq!(v["success"], false);
    assert_eq!(
        v["msg"],
        "payment P29 was already applied with status failed, not paid"
    );
    assert_eq!(app.list("").await.len(), 0, "nothing enqueued");
    assert_eq!(app.run_executor().await.due, 0);
    // The same content again is still a replay, and the order is still failed.
    let again = app.pay(&order, "P29", "failed").await;
    assert_eq!(again["replayed"], true);
    assert_eq!(again["status"], "failed");
    // The same payment id for another order names both orders.
    let other = app.order("card", "CB1", "main").await;
    let (s, v) = app
        .post(
            "/api/payments/callback",
            PLATFORM,
            json!({"payment_id": "P29", "order_id": other, "status": "failed"}),
        )
        .await;
    assert_eq!(s, 409, "{v}");
    assert_eq!(
        v["msg"],
        format!("payment P29 was already applied to order {order}, not order {other}")
    );
}

#[super::lane]
#[tokio::test]
async fn repeated_payment_callback_enqueues_nothing_new() {
    let app = spawn_seeded().await;
    let order = app.order("card", "CA1", "main").await;
    let first = app.pay(&order, "pay-1", "paid").await;
    assert_eq!(first["replayed"], false);
    assert_eq!(app.run_executor().await.completed, 3);
    assert_eq!(app.sim.poll_calls_for_card("CA1"), 3);
    let again = app.pay(&order, "pay-1", "paid").await;
    assert_eq!(again["replayed"], true);
    assert_eq!(again["items"].as_array().unwrap().len(), 0);
    assert_eq!(app.run_executor().await.due, 0);
    assert_eq!(
        app.sim.poll_calls_for_card("CA1"),
        3,
        "no second upstream call"
    );
    assert_eq!(app.list("iccid=CA1").await.len(), 3);
    // Repeated while the items are still active: still nothing new.
    let o2 = app.order("card", "CB1", "addon").await;
    app.pay(&o2, "pay-2", "paid").await;
    app.pay(&o2, "pay-2", "paid").await;
    let items = app.list("iccid=CB1").await;
    assert_eq!(items.len(), 3);
    assert!(items.iter().all(|i| i["trigger_count"] == 1));
    app.assert_invariants().await;
}
