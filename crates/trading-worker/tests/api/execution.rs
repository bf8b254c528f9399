//! The normal path and its stops: steps, evidence, amount guard, challenges, faults.

use std::sync::atomic::Ordering;
use std::time::Duration;

use rakuten_types::TaskId;
use serde_json::json;
use shop_sim::{Faults, PaymentMethod, ShopConfig};
use trading_worker::settings::SiteKind;

use crate::helpers::{CAMERA_URL, Harness, TEA_URL, run_until_handled};

fn tid(s: &str) -> TaskId {
    TaskId::parse(s).unwrap()
}

#[tokio::test]
async fn an_order_walks_to_paid_with_every_state_reported() {
    let h = Harness::new().await;
    h.submit_tea("t-happy").await;
    let w = h.worker().await;
    run_until_handled(&w).await;
    let t = h.task("t-happy").await;
    assert_eq!(t["status"], "succeeded", "{t}");
    assert_eq!(t["latest_state"], "paid");
    assert_eq!(
        h.history_states("t-happy").await,
        ["in_cart", "ordered", "paid"]
    );
    let last = t["history"].as_array().unwrap().last().unwrap().clone();
    assert!(
        last["site_order_id"]
            .as_str()
            .unwrap()
            .starts_with("306087-")
    );
    assert_eq!(last["payable_yen"], 2980 + 500);
    assert_eq!(h.submissions(), 1);
    assert_eq!(h.shop.submissions()[0].note.as_deref(), Some("t-happy"));
    for f in [
        "01-cart-add",
        "02-cart-check",
        "03-order-confirm",
        "04-order-submit",
        "05-payment",
    ] {
        assert!(
            h.evidence_dir
                .join("t-happy")
                .join(format!("{f}.html"))
                .exists(),
            "{f}.html"
        );
        assert!(
            h.evidence_dir
                .join("t-happy")
                .join(format!("{f}.meta.json"))
                .exists(),
            "{f}.meta.json"
        );
        assert!(
            !h.evidence_dir
                .join("t-happy")
                .join(format!("{f}.png"))
                .exists(),
            "no png for the sim"
        );
    }
    let meta: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(h.evidence_dir.join("t-happy/04-order-submit.meta.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(meta["method"], "POST");
    assert_eq!(meta["http_status"], 200);
    assert_eq!(meta["local_order_state"], "ordered");
    assert!(meta["url"].as_str().unwrap().ends_with("/order/submit"));
    assert!(meta["timestamp"].is_string());
}

#[tokio::test]
async fn each_state_is_reported_once_with_the_evidence_of_the_same_step_every_run() {
    let h = Harness::new().await;
    let shirt = "https://item.rakuten.co.jp/simshop/sample-shirt/";
    h.submit(
        "t-once",
        serde_json::json!({"item_url": shirt, "quantity": 1, "variant_id": "blue-m"}),
    )
    .await;
    let w = h.worker().await;
    run_until_handled(&w).await;
    let sent: Vec<(String, String)> = h
        .reports()
        .iter()
        .map(|r| {
            (
                r.body["state"].as_str().unwrap().to_owned(),
                r.body["evidence_ref"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let want = [
        ("in_cart", "t-once/03-order-confirm"),
        ("ordered", "t-once/04-order-submit"),
        ("paid", "t-once/05-payment"),
    ]
    .map(|(s, e)| (s.to_owned(), e.to_owned()));
    assert_eq!(sent, want);
    // Nothing a person reads shows Rust's debug formatting.
    let t = h.task("t-once").await;
    for row in t["history"].as_array().unwrap() {
        let detail = row["detail"].as_str().unwrap_or_default();
        assert!(
            !detail.contains("Some(") && !detail.contains("None"),
            "{detail}"
        );
    }
    for e in w.ctx().journal.events(&tid("t-once")).await.unwrap() {
        let d = e.detail.unwrap_or_default();
        assert!(!d.contains("Some(") && !d.contains("None"), "{d}");
    }
    let cart_add =
        std::fs::read_to_string(h.evidence_dir.join("t-once/01-cart-add.meta.json")).unwrap();
    assert!(cart_add.contains("item 1002, variant blue-m"), "{cart_add}");
}

#[tokio::test]
async fn evidence_files_exist_before_the_gateway_sees_the_report() {
    let h = Harness::new().await;
    h.submit_tea("t-evidence").await;
    let w = h.worker().await;
    run_until_handled(&w).await;
    let reports = h.reports();
    assert!(reports.len() >= 3, "{reports:?}");
    for r in &reports {
        let eref = r.body["evidence_ref"]
            .as_str()
            .expect("every report names its evidence");
        assert!(eref.starts_with("t-evidence/"), "{eref}");
        assert!(
            r.meta_exists && r.files_exist,
            "evidence of {eref} missing when the report arrived"
        );
    }
}

#[tokio::test]
async fn amount_over_limit_stops_with_needs_human_and_no_submit() {
    let h = Harness::new().await;
    h.submit("t-camera", json!({"item_url": CAMERA_URL})).await;
    h.submit(
        "t-tea-limit",
        json!({"item_url": TEA_URL, "quantity": 2, "max_total_yen": 5000}),
    )
    .await;
    let w = h.worker().await;
    run_until_handled(&w).await;
    run_until_handled(&w).await;
    for (id, payable) in [("t-camera", 58000), ("t-tea-limit", 5960)] {
        let t = h.task(id).await;
        assert_eq!(t["status"], "needs_human", "{t}");
        assert_eq!(t["latest_state"], "in_cart");
        let last = t["history"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["error_code"], 5004, "{last}");
        assert_eq!(last["payable_yen"], payable);
        assert_eq!(last["evidence_ref"], format!("{id}/03-order-confirm"));
    }
    assert_eq!(h.submissions(), 0, "the shop saw no submit");
}

#[tokio::test]
async fn price_change_between_cart_and_confirm_stops_with_needs_human() {
    let h = Harness::with_shop(ShopConfig {
        faults: Faults {
            price_change_yen: 300,
            ..Faults::default()
        },
        ..ShopConfig::default()
    })
    .await;
    h.submit_tea("t-price").await;
    run_until_handled(&h.worker().await).await;
    let t = h.task("t-price").await;
    assert_eq!(t["status"], "needs_human");
    assert_eq!(
        t["history"].as_array().unwrap().last().unwrap()["error_code"],
        5004
    );
    assert_eq!(h.submissions(), 0);
}

#[tokio::test]
async fn three_d_secure_challenge_ends_awaiting_payment_and_needs_human() {
    let h = Harness::with_shop(ShopConfig {
        faults: Faults {
            three_d_secure: true,
            ..Faults::default()
        },
        ..ShopConfig::default()
    })
    .await;
    h.submit_tea("t-3ds").await;
    let w = h.worker().await;
    run_until_handled(&w).await;
    let t = h.task("t-3ds").await;
    assert_eq!(t["status"], "needs_human", "{t}");
    assert_eq!(t["latest_state"], "awaiting_payment", "{t}");
    assert_eq!(
        t["history"].as_array().unwrap().last().unwrap()["error_code"],
        5005
    );
    assert_eq!(h.submissions(), 1);
    let intents = w.ctx().journal.intents(&tid("t-3ds")).await.unwrap();
    let pay = intents.iter().find(|i| i.action == "pay").unwrap();
    assert_eq!(pay.status, "aborted");
    assert!(
        pay.reason.as_deref().unwrap().contains("3d_secure"),
        "{pay:?}"
    );
    // The shop still shows the order as plain `ordered`: the monitor sees no change.
    assert_eq!(w.monitor().run_once().await, 0);
    assert_eq!(h.task("t-3ds").await["latest_state"], "awaiting_payment");
}

#[tokio::test]
async fn convenience_store_payment_ends_awaiting_payment_with_a_deadline() {
    let h = Harness::with_shop(ShopConfig {
        payment_method: PaymentMethod::Konbini,
        ..ShopConfig::default()
    })
    .await;
    h.submit_tea("t-konbini").await;
    run_until_handled(&h.worker().await).await;
    let t = h.task("t-konbini").await;
    assert_eq!(t["status"], "succeeded", "{t}");
    assert_eq!(t["latest_state"], "awaiting_payment");
    let last = t["history"].as_array().unwrap().last().unwrap().clone();
    assert!(last["pay_deadline"].is_string(), "{last}");
}

#[tokio::test]
async fn rakuten_site_fails_with_not_implemented_and_submits_nothing() {
    let h = Harness::new().await;
    h.submit_tea("t-rakuten").await;
    let base = h.shop.base_url.clone();
    let w = h
        .worker_with(|s| {
            s.site = SiteKind::Rakuten;
            s.site_base_url = String::new();
            s.scraper_base_url = base;
        })
        .await;
    run_until_handled(&w).await;
    let t = h.task("t-rakuten").await;
    assert_eq!(t["status"], "failed", "{t}");
    let last = t["history"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["error_code"], 5003);
    assert!(
        last["detail"].as_str().unwrap().contains("not implemented"),
        "{last}"
    );
    assert_eq!(h.submissions(), 0);
}

#[tokio::test]
async fn lost_login_stops_the_task_with_code_5001() {
    let h = Harness::with_shop(ShopConfig {
        faults: Faults {
            logged_out: true,
            ..Faults::default()
        },
        ..ShopConfig::default()
    })
    .await;
    h.submit_tea("t-login").await;
    run_until_handled(&h.worker().await).await;
    let t = h.task("t-login").await;
    assert_eq!(t["status"], "needs_human", "{t}");
    assert_eq!(
        t["history"].as_array().unwrap().last().unwrap()["error_code"],
        5001
    );
    assert!(
        h.evidence_dir.join("t-login/01-cart-add.html").exists(),
        "the login page is evidence"
    );
    assert_eq!(h.submissions(), 0);
}

#[tokio::test]
async fn lost_lease_before_submit_submits_nothing_and_the_journal_says_why() {
    let h = Harness::new().await;
    h.submit_tea("t-lost").await;
    h.proxy.expire_before_renew.store(true, Ordering::SeqCst);
    let w = h.worker().await;
    run_until_handled(&w).await;
    assert_eq!(h.submissions(), 0);
    assert_eq!(h.task("t-lost").await["status"], "stale");
    let intents = w.ctx().journal.intents(&tid("t-lost")).await.unwrap();
    assert_eq!(intents.len(), 1, "{intents:?}");
    assert_eq!(intents[0].action, "submit");
    assert_eq!(intents[0].status, "aborted");
    let reason = intents[0].reason.clone().unwrap();
    assert!(
        reason.contains("lease lost (6002) before submit"),
        "{reason}"
    );
}

#[tokio::test]
async fn gateway_down_then_up_delivers_the_reports_from_the_outbox() {
    let h = Harness::new().await;
    h.submit_tea("t-down").await;
    *h.proxy.down_on_report.lock().unwrap() = Some(("ordered".into(), Duration::from_millis(1500)));
    let w = h.worker().await;
    run_until_handled(&w).await;
    assert!(
        h.proxy.refused.load(Ordering::SeqCst) >= 2,
        "the gateway was down for a while"
    );
    let t = h.task("t-down").await;
    assert_eq!(t["status"], "succeeded", "{t}");
    assert_eq!(
        h.history_states("t-down").await,
        ["in_cart", "ordered", "paid"]
    );
    assert_eq!(h.submissions(), 1);
}

#[tokio::test]
async fn post_payment_monitoring_reports_a_later_state_change_after_terminal() {
    let h = Harness::new().await;
    h.submit_tea("t-monitor").await;
    let w = h.worker().await;
    run_until_handled(&w).await;
    assert_eq!(h.task("t-monitor").await["status"], "succeeded");
    let order = h.shop.submissions()[0].order_number.clone();
    assert_eq!(w.monitor().run_once().await, 0, "nothing changed yet");
    h.client
        .post(format!("{}/admin/orders/{order}/status", h.shop.base_url))
        .json(&json!({"status": "shipped"}))
        .send()
        .await
        .unwrap();
    assert_eq!(w.monitor().run_once().await, 1);
    let t = h.task("t-monitor").await;
    assert_eq!(t["status"], "succeeded", "a terminal task stays terminal");
    assert_eq!(t["latest_state"], "shipped");
    let last = t["history"].as_array().unwrap().last().unwrap().clone();
    assert!(
        last["evidence_ref"]
            .as_str()
            .unwrap()
            .contains("monitor-shipped"),
        "{last}"
    );
    h.client
        .post(format!("{}/admin/orders/{order}/status", h.shop.base_url))
        .json(&json!({"status": "delivered"}))
        .send()
        .await
        .unwrap();
    assert_eq!(w.monitor().run_once().await, 1);
    assert_eq!(h.task("t-monitor").await["latest_state"], "delivered");
    assert_eq!(
        w.monitor().run_once().await,
        0,
        "delivered orders are no longer watched"
    );
}

#[tokio::test]
async fn dropped_connection_after_order_creation_is_verified_not_resubmitted() {
    let h = Harness::with_shop(ShopConfig {
        faults: Faults {
            drop_after_order: true,
            ..Faults::default()
        },
        ..ShopConfig::default()
    })
    .await;
    h.submit_tea("t-drop").await;
    let w = h.worker().await;
    run_until_handled(&w).await;
    assert_eq!(h.submissions(), 1, "exactly one submission");
    let t = h.task("t-drop").await;
    assert_eq!(t["status"], "succeeded", "{t}");
    assert_eq!(t["latest_state"], "paid");
    let intents = w.ctx().journal.intents(&tid("t-drop")).await.unwrap();
    let submit = intents.iter().find(|i| i.action == "submit").unwrap();
    assert_eq!(submit.status, "done");
    assert_eq!(
        submit.site_order_id.as_deref(),
        Some(h.shop.submissions()[0].order_number.as_str())
    );
}

#[tokio::test]
async fn the_lease_is_renewed_periodically_while_a_slow_site_is_worked_on() {
    let h = Harness::with_shop(ShopConfig {
        faults: Faults {
            slow_ms: 150,
            ..Faults::default()
        },
        ..ShopConfig::default()
    })
    .await;
    h.submit_tea("t-slow").await;
    let w = h.worker_with(|s| s.renew_interval_seconds = 0.1).await;
    run_until_handled(&w).await;
    assert_eq!(h.task("t-slow").await["status"], "succeeded");
    // Two renewals come from the checks before submit and pay; the rest from the period.
    let renews = h.proxy.renews.load(Ordering::SeqCst);
    assert!(renews >= 5, "only {renews} renewals");
}

#[tokio::test]
async fn monitoring_warns_once_when_a_convenience_store_deadline_comes_near() {
    let h = Harness::with_shop(ShopConfig {
        payment_method: PaymentMethod::Konbini,
        ..ShopConfig::default()
    })
    .await;
    h.submit_tea("t-deadline").await;
    let clock =
        rakuten_types::ManualClock::new(rakuten_types::Clock::now(&rakuten_types::SystemClock));
    let w = h
        .worker_clocked(std::sync::Arc::new(clock.clone()), |_| {})
        .await;
    run_until_handled(&w).await;
    assert_eq!(
        h.task("t-deadline").await["latest_state"],
        "awaiting_payment"
    );
    assert_eq!(w.monitor().run_once().await, 0);
    let before = h.reports().len();
    w.monitor().run_once().await;
    assert_eq!(h.reports().len(), before, "no warning three days ahead");
    clock.advance(Duration::from_secs(60 * 3600));
    w.monitor().run_once().await;
    let last = h.task("t-deadline").await["history"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        last["detail"].as_str().unwrap().contains("pay deadline"),
        "{last}"
    );
    let n = h.reports().len();
    w.monitor().run_once().await;
    assert_eq!(h.reports().len(), n, "the warning is given once");
}

/// A blip on a step before the submit must not fail the task: the step is retried
/// (D-pre-submit-retries; docs/RELIABILITY.md, "A transient shop error before the submit ended in
/// `failed`").
#[tokio::test]
async fn transient_cart_read_failures_are_retried_and_the_order_is_placed_once() {
    let h = Harness::new().await;
    h.set_faults(json!({"fail_route": {"path": "/cart", "times": 2}}))
        .await;
    h.submit_tea("t-blip").await;
    run_until_handled(&h.worker().await).await;
    let t = h.task("t-blip").await;
    assert_eq!(t["status"], "succeeded", "{t}");
    assert_eq!(
        h.history_states("t-blip").await,
        ["in_cart", "ordered", "paid"]
    );
    assert_eq!(h.submissions(), 1, "exactly one submission");
    assert_eq!(
        h.shop.shop.faults().fail_route,
        None,
        "both failures were hit"
    );
    let order = &h.shop.submissions()[0];
    assert_eq!(order.note.as_deref(), Some("t-blip"));
}

#[tokio::test]
async fn a_transient_failure_on_any_step_before_the_submit_is_retried() {
    for path in [
        "/api/item_detail",
        "/cart/add",
        "/cart/clear",
        "/order/confirm",
    ] {
        let h = Harness::new().await;
        h.set_faults(json!({"fail_route": {"path": path, "times": 1}}))
            .await;
        h.submit_tea("t-blip").await;
        run_until_handled(&h.worker().await).await;
        let t = h.task("t-blip").await;
        assert_eq!(t["status"], "succeeded", "{path}: {t}");
        assert_eq!(h.submissions(), 1, "{path}: exactly one submission");
        assert_eq!(
            h.shop.shop.faults().fail_route,
            None,
            "{path}: the failure was hit"
        );
        // A repeated cart add leaves the intended quantity, not twice it.
        let orders = h.shop.shop.lock().orders.clone();
        assert_eq!(orders.len(), 1, "{path}");
        assert_eq!(orders[0].lines.len(), 1, "{path}");
        assert_eq!(orders[0].lines[0].quantity, 1, "{path}");
    }
}

#[tokio::test]
async fn a_lasting_failure_before_the_submit_still_fails_after_the_bound() {
    let h = Harness::new().await;
    h.set_faults(json!({"fail_route": {"path": "/order/confirm", "times": 100}}))
        .await;
    h.submit_tea("t-down").await;
    run_until_handled(&h.worker().await).await;
    let t = h.task("t-down").await;
    assert_eq!(t["status"], "failed", "{t}");
    let last = t["history"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["error_code"], 5006, "{last}");
    assert!(
        last["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("gave up after 5 attempts"),
        "{last}"
    );
    assert_eq!(h.submissions(), 0, "nothing submitted");
    let left = h.shop.shop.faults().fail_route.unwrap().times;
    assert_eq!(left, 95, "exactly SAFE_STEP_ATTEMPTS attempts");
}
