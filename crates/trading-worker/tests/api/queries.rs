//! The account-query loop (spec §11) against the real gateway and shop-sim: the worker lines of
//! the §11.6 checklist, paging and the window flag, timeouts, panics, 6006 and lost answers.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use rakuten_types::SystemClock;
use rakuten_types::query::OrderDetailResult;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trading_worker::query_loop::{Delivery, QueryTick};
use trading_worker::settings::{Secret, SiteKind};
use trading_worker::site::sim::{SimSite, extract_state};
use trading_worker::site::{
    CartLine, CartView, ConfirmView, OrderListPage, PayOutcome, Site, SiteError, SiteErrorKind,
    Step,
};
use trading_worker::{Settings, Worker};

use crate::helpers::Harness;

/// `2026-08-DD` at midnight UTC, DD = 1-based day.
fn day(d: u32) -> String {
    format!("2026-08-{d:02}T00:00:00Z")
}

fn days(n: u32) -> Vec<String> {
    (1..=n).map(day).collect()
}

/// One turn of the query loop; asserts a query was handled and returns its delivery.
async fn handle_one(w: &Worker) -> Delivery {
    let lp = w.query_loop();
    for _ in 0..5 {
        if let QueryTick::Handled { delivery, .. } = lp.run_once().await.expect("query lease") {
            return delivery;
        }
    }
    panic!("no query handed out");
}

async fn shop_page_state(h: &Harness, page: u32) -> Value {
    let html = h
        .client
        .get(format!("{}/orders?page={page}", h.shop.base_url))
        .header("cookie", "session=sim-session")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    extract_state(&html).expect("page state")
}

fn order_numbers(result: &Value) -> Vec<String> {
    result["orders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["order_number"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn raw_site_json_appears_in_full_and_page_limit_is_reported() {
    let h = Harness::new().await;
    let numbers = h.seed_orders(&days(12)).await;
    h.submit_query("aq-1", "order_list", json!({"max_pages": 2}))
        .await;
    let w = h.worker().await;
    assert_eq!(
        handle_one(&w).await,
        Delivery::Stored(rakuten_types::query::QueryStatus::Succeeded)
    );
    let q = h.query("aq-1").await;
    assert_eq!(q["status"], "succeeded");
    assert_eq!(q["attempt"], 1);
    let r = &q["result"];
    assert_eq!(r["kind"], "order_list");
    assert_eq!(r["max_pages"], 2);
    assert_eq!(r["window_fully_covered"], false, "12 orders, 10 read");
    // Newest first, the ten newest.
    let expected: Vec<String> = numbers.iter().rev().take(10).cloned().collect();
    assert_eq!(order_numbers(r), expected);
    // The raw page states, complete and in page order, exactly as the shop served them.
    let raw = r["raw_pages"].as_array().unwrap();
    assert_eq!(raw.len(), 2);
    for (i, page) in raw.iter().enumerate() {
        let served = shop_page_state(&h, i as u32 + 1).await;
        assert_eq!(page, &served["orderListData"], "page {}", i + 1);
        // Fields the normalized model does not have are there.
        assert!(page["orders"][0]["payable_yen"].is_number());
        assert!(page["orders"][0]["stage_label"].is_string());
    }
    assert_eq!(q["raw_omitted"], false);
}

#[tokio::test]
async fn window_covered_exactly_at_the_page_limit() {
    // The list ends on the last page allowed.
    let h = Harness::new().await;
    h.seed_orders(&days(10)).await;
    h.submit_query("aq-end", "order_list", json!({"max_pages": 2}))
        .await;
    let w = h.worker().await;
    handle_one(&w).await;
    let r = h.query("aq-end").await["result"].clone();
    assert_eq!(r["window_fully_covered"], true);
    assert_eq!(r["orders"].as_array().unwrap().len(), 10);
    assert_eq!(r["raw_pages"].as_array().unwrap().len(), 2);

    // `since` is reached on the last page allowed: page 2 holds days 10..6, day 6 is older.
    let h = Harness::new().await;
    h.seed_orders(&days(15)).await;
    h.submit_query(
        "aq-since",
        "order_list",
        json!({"max_pages": 2, "since": day(7)}),
    )
    .await;
    let w = h.worker().await;
    handle_one(&w).await;
    let r = h.query("aq-since").await["result"].clone();
    assert_eq!(r["window_fully_covered"], true);
    assert_eq!(r["orders"].as_array().unwrap().len(), 9, "days 15..7");
    assert!(r["stop_code"].is_null());
}

#[tokio::test]
async fn window_not_covered_at_the_page_limit() {
    let h = Harness::new().await;
    h.seed_orders(&days(15)).await;
    // No lower bound, more pages than allowed.
    h.submit_query("aq-1", "order_list", json!({"max_pages": 2}))
        .await;
    // The window (days 15..6) fills pages 1-2 exactly, but nothing on them proves it ends there.
    h.submit_query(
        "aq-2",
        "order_list",
        json!({"max_pages": 2, "since": day(6)}),
    )
    .await;
    // The default page limit (RAKUTEN_ACCOUNT_QUERY_DEFAULT_MAX_PAGES = 3) when max_pages is absent.
    h.submit_query("aq-3", "order_list", json!({"since": day(1)}))
        .await;
    let w = h.worker().await;
    for _ in 0..3 {
        handle_one(&w).await;
    }
    for id in ["aq-1", "aq-2"] {
        let r = h.query(id).await["result"].clone();
        assert_eq!(r["window_fully_covered"], false, "{id}");
        assert_eq!(r["orders"].as_array().unwrap().len(), 10, "{id}");
    }
    let r = h.query("aq-3").await["result"].clone();
    assert_eq!(r["max_pages"], 3);
    assert_eq!(
        r["window_fully_covered"], true,
        "15 orders = 3 pages, list ends"
    );
    assert_eq!(r["orders"].as_array().unwrap().len(), 15);
}

#[tokio::test]
async fn login_lost_on_page_two() {
    // Decision D-query-partial-success: the pages read before the loss are returned as a success, flagged
    // `window_fully_covered: false` with `stop_code: 5001`; a loss on page 1 fails with 5001.
    let h = Harness::new().await;
    h.seed_orders(&days(12)).await;
    h.set_faults(json!({"logged_out_from_page": 2})).await;
    h.submit_query("aq-1", "order_list", json!({"max_pages": 3}))
        .await;
    let w = h.worker().await;
    handle_one(&w).await;
    let q = h.query("aq-1").await;
    assert_eq!(q["status"], "succeeded");
    let r = &q["result"];
    assert_eq!(r["window_fully_covered"], false);
    assert_eq!(r["stop_code"], 5001);
    assert!(r["stop_reason"].as_str().unwrap().contains("logged out"));
    assert_eq!(r["orders"].as_array().unwrap().len(), 5);
    assert_eq!(r["raw_pages"].as_array().unwrap().len(), 1);

    h.set_faults(json!({"logged_out_from_page": 1})).await;
    h.submit_query("aq-2", "order_list", json!({"max_pages": 3}))
        .await;
    handle_one(&w).await;
    let q = h.query("aq-2").await;
    assert_eq!(q["status"], "failed");
    assert_eq!(q["error_code"], 5001);

    // A page change on page 2 is flagged the same way (5002).
    h.set_faults(json!({"logged_out_from_page": 0, "order_list_changed_from_page": 2}))
        .await;
    h.submit_query("aq-3", "order_list", json!({"max_pages": 3}))
        .await;
    handle_one(&w).await;
    let r = h.query("aq-3").await["result"].clone();
    assert_eq!(r["window_fully_covered"], false);
    assert_eq!(r["stop_code"], 5002);
}

#[tokio::test]
async fn site_error_codes_are_passed_through() {
    let h = Harness::new().await;
    h.seed_orders(&days(3)).await;
    let w = h.worker().await;
    h.set_faults(json!({"logged_out": true})).await;
    h.submit_query(
        "aq-login",
        "order_detail",
        json!({"order_number": "306087-20260801-0000000001"}),
    )
    .await;
    handle_one(&w).await;
    h.set_faults(json!({"logged_out": false, "order_list_changed": true}))
        .await;
    h.submit_query("aq-changed", "order_list", json!({})).await;
    handle_one(&w).await;
    for (id, code) in [("aq-login", 5001), ("aq-changed", 5002)] {
        let q = h.query(id).await;
        assert_eq!(q["status"], "failed", "{id}");
        assert_eq!(q["error_code"], code, "{id}");
        assert!(!q["error_message"].as_str().unwrap().is_empty());
    }
    // The rakuten seam has no verified reads: 5003, nothing sent to the site. One worker per
    // journal (D-worker-journal-lock): the sim worker goes first.
    drop(w);
    let scraper = h.shop.base_url.clone();
    let rk = h
        .worker_with(|s| {
            s.site = SiteKind::Rakuten;
            s.site_base_url = String::new();
            s.scraper_base_url = scraper;
        })
        .await;
    h.submit_query("aq-rakuten", "order_list", json!({})).await;
    h.submit_query(
        "aq-rakuten-2",
        "order_detail",
        json!({"order_number": "1-2-3"}),
    )
    .await;
    handle_one(&rk).await;
    handle_one(&rk).await;
    for id in ["aq-rakuten", "aq-rakuten-2"] {
        let q = h.query(id).await;
        assert_eq!(
            (q["status"].as_str(), q["error_code"].as_i64()),
            (Some("failed"), Some(5003)),
            "{q}"
        );
    }
}

#[tokio::test]
async fn order_detail_reports_stage_and_state_and_not_found_is_no_error() {
    let h = Harness::new().await;
    let numbers = h.seed_orders(&days(2)).await;
    h.client
        .post(format!(
            "{}/admin/orders/{}/status",
            h.shop.base_url, numbers[1]
        ))
        .json(&json!({"status": "shipped"}))
        .send()
        .await
        .unwrap();
    h.submit_query(
        "aq-found",
        "order_detail",
        json!({"order_number": numbers[1]}),
    )
    .await;
    h.submit_query(
        "aq-missing",
        "order_detail",
        json!({"order_number": "306087-20260899-9999999999"}),
    )
    .await;
    let w = h.worker().await;
    handle_one(&w).await;
    handle_one(&w).await;
    let q = h.query("aq-found").await;
    assert_eq!(q["status"], "succeeded");
    let d: OrderDetailResult = serde_json::from_value(q["result"].clone()).unwrap();
    assert!(d.found);
    assert_eq!(d.stage_label.as_deref(), Some("出荷"));
    assert_eq!(d.order_state, Some(rakuten_types::OrderState::Shipped));
    assert!(d.raw_available);
    assert_eq!(d.raw.unwrap()["order"]["order_number"], numbers[1]);
    let q = h.query("aq-missing").await;
    assert_eq!(q["status"], "succeeded");
    assert_eq!(q["result"]["found"], false);
    assert!(q["result"]["order_state"].is_null());
}

#[tokio::test]
async fn timeout_is_reported_as_failure_not_left_to_lease_expiry() {
    let h = Harness::new().await;
    h.seed_orders(&days(3)).await;
    let w = h
        .worker_with(|s| s.account_query_timeout_seconds = 0.5)
        .await;
    // An order step holds the account lock: the query waits for it, and the wait counts.
    let guard = w.ctx().locks.lock(w.ctx().site.account()).await;
    h.submit_query("aq-lock", "order_list", json!({})).await;
    let started = std::time::Instant::now();
    assert_eq!(
        handle_one(&w).await,
        Delivery::Stored(rakuten_types::query::QueryStatus::Failed)
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    drop(guard);
    // A slow site is bounded the same way.
    h.set_faults(json!({"slow_ms": 3000})).await;
    h.submit_query("aq-slow", "order_detail", json!({"order_number": "x-1"}))
        .await;
    handle_one(&w).await;
    for id in ["aq-lock", "aq-slow"] {
        let q = h.query(id).await;
        assert_eq!(q["status"], "failed", "{id}: reported, not left leased");
        assert_eq!(q["error_code"], 5007, "{id}");
        assert!(
            q["error_message"]
                .as_str()
                .unwrap()
                .contains("RAKUTEN_ACCOUNT_QUERY_TIMEOUT_SECONDS")
        );
        assert_eq!(q["attempt"], 1);
    }
    // The lock is free again: the aborted read released it.
    h.set_faults(json!({"slow_ms": 0})).await;
    tokio::time::timeout(
        Duration::from_secs(2),
        w.ctx().locks.lock(w.ctx().site.account()),
    )
    .await
    .expect("lock released after the timeout");
}

/// The simulated shop with a list that panics and a detail that fails for one number.
#[derive(Debug)]
struct FaultySite(SimSite);

#[async_trait]
impl Site for FaultySite {
    fn name(&self) -> &'static str {
        "faulty"
    }
    fn account(&self) -> &str {
        self.0.account()
    }
    async fn cart_add(&self, line: &CartLine) -> Result<Step<()>, SiteError> {
        self.0.cart_add(line).await
    }
    async fn cart_check(&self) -> Result<Step<CartView>, SiteError> {
        self.0.cart_check().await
    }
    async fn order_confirm(&self) -> Result<Step<ConfirmView>, SiteError> {
        self.0.order_confirm().await
    }
    async fn order_submit(&self, c: &ConfirmView, note: &str) -> Result<Step<String>, SiteError> {
        self.0.order_submit(c, note).await
    }
    async fn pay(&self, id: &str, task_id: &str) -> Result<Step<PayOutcome>, SiteError> {
        self.0.pay(id, task_id).await
    }
    async fn list_orders(&self, _page: u32) -> Result<Step<OrderListPage>, SiteError> {
        panic!("simulated bug in list_orders");
    }
    async fn order_detail(&self, n: &str) -> Result<Step<OrderDetailResult>, SiteError> {
        if n == "fail-me" {
            return Err(SiteError::new(
                SiteErrorKind::Unavailable,
                "site down (test)",
            ));
        }
        self.0.order_detail(n).await
    }
}

#[tokio::test]
async fn worker_errors_never_escape_the_loop_and_every_query_gets_one_result() {
    let h = Harness::new().await;
    let numbers = h.seed_orders(&days(1)).await;
    let s = h.settings().validate().unwrap();
    let site = Arc::new(FaultySite(
        SimSite::new(
            &h.shop.base_url,
            Secret::new("sim-session"),
            Duration::from_secs(5),
        )
        .unwrap(),
    ));
    let shutdown = CancellationToken::new();
    let w = Worker::build_with_site(s, Arc::new(SystemClock), shutdown.clone(), site)
        .await
        .unwrap();
    h.submit_query("aq-panic", "order_list", json!({})).await;
    h.submit_query(
        "aq-fail",
        "order_detail",
        json!({"order_number": "fail-me"}),
    )
    .await;
    h.submit_query("aq-ok", "order_detail", json!({"order_number": numbers[0]}))
        .await;
    h.submit_query("aq-panic-2", "order_list", json!({"max_pages": 1}))
        .await;
    let running = tokio::spawn(w.query_loop().run(shutdown.clone()));
    let ids = ["aq-panic", "aq-fail", "aq-ok", "aq-panic-2"];
    test_util::wait_until(
        "every query to finish",
        Duration::from_secs(20),
        async || {
            let mut done = 0;
            for id in ids {
                if h.query(id).await["finished_at"].is_string() {
                    done += 1;
                }
            }
            done == ids.len()
        },
    )
    .await;
    assert!(!running.is_finished(), "the loop died");
    for id in ids {
        assert_eq!(h.result_calls(id).len(), 1, "{id}: exactly one result call");
    }
    let q = h.query("aq-panic").await;
    assert_eq!(
        (q["status"].as_str(), q["error_code"].as_i64()),
        (Some("failed"), Some(1500))
    );
    assert!(
        q["error_message"]
            .as_str()
            .unwrap()
            .contains("simulated bug"),
        "{q}"
    );
    let q = h.query("aq-fail").await;
    assert_eq!(
        (q["status"].as_str(), q["error_code"].as_i64()),
        (Some("failed"), Some(5006))
    );
    assert_eq!(h.query("aq-ok").await["status"], "succeeded");
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), running)
        .await
        .expect("loop stops on shutdown")
        .unwrap();
}

#[tokio::test]
async fn a_result_refused_with_6006_is_dropped_and_never_resent() {
    let h = Harness::new().await;
    h.seed_orders(&days(2)).await;
    h.submit_query("aq-1", "order_list", json!({})).await;
    h.proxy.expire_before_result.store(true, Ordering::SeqCst);
    let w = h.worker().await;
    assert_eq!(handle_one(&w).await, Delivery::Dropped);
    assert_eq!(h.result_calls("aq-1").len(), 1);
    // Redelivered: the next lease is attempt 2 and its result is stored.
    assert_eq!(h.query("aq-1").await["status"], "queued");
    assert!(matches!(handle_one(&w).await, Delivery::Stored(_)));
    let q = h.query("aq-1").await;
    assert_eq!(
        (q["status"].as_str(), q["attempt"].as_i64()),
        (Some("succeeded"), Some(2))
    );
    assert_eq!(h.result_calls("aq-1").len(), 2);
}

#[tokio::test]
async fn a_lost_result_answer_is_resent_and_acknowledged_as_a_duplicate() {
    let h = Harness::new().await;
    h.seed_orders(&days(2)).await;
    h.submit_query("aq-1", "order_list", json!({})).await;
    h.proxy.lose_result_answers.store(1, Ordering::SeqCst);
    let w = h.worker().await;
    assert_eq!(
        handle_one(&w).await,
        Delivery::Stored(rakuten_types::query::QueryStatus::Succeeded)
    );
    let calls = h.result_calls("aq-1");
    assert_eq!(calls.len(), 2, "sent, answer lost, sent again");
    assert_eq!(calls[0], calls[1], "the repeat is identical");
    assert_eq!(h.query("aq-1").await["status"], "succeeded");
}

#[tokio::test]
async fn the_query_loop_runs_beside_the_order_loop() {
    let h = Harness::new().await;
    h.seed_orders(&days(2)).await;
    let shutdown = CancellationToken::new();
    let settings: Settings = h.settings();
    let w = Worker::build(
        settings.validate().unwrap(),
        Arc::new(SystemClock),
        shutdown.clone(),
    )
    .await
    .unwrap();
    let running = tokio::spawn(w.run());
    h.submit_tea("po-1").await;
    h.submit_query("aq-1", "order_list", json!({})).await;
    test_util::wait_for(
        "the query to succeed and the task to be taken",
        Duration::from_secs(30),
        async || {
            let q = h.query("aq-1").await;
            let t = h.task("po-1").await;
            if q["status"] == "succeeded" && t["status"] != "queued" {
                Ok(())
            } else {
                Err(format!("{q} {t}"))
            }
        },
    )
    .await;
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("worker stops")
        .unwrap();
}
