//! `RAKUTEN_SITE=adapter`: the worker through the site adapter protocol, served here
//! over the simulated shop's HTTP seam (`site::adapter::server`). The browser adapter's own
//! tests live in `crates/site-adapter`.

// A `SiteError` carries the page it failed on (evidence), large by design.
#![allow(clippy::result_large_err)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rakuten_types::query::OrderDetailResult;
use trading_worker::settings::{Secret, SiteKind};
use trading_worker::site::adapter::AdapterSite;
use trading_worker::site::adapter::check::Kit;
use trading_worker::site::sim::SimSite;
use trading_worker::site::{
    CartLine, CartView, ConfirmView, OrderListPage, PayOutcome, Site, SiteError, SiteErrorKind,
    Step,
};

use crate::crash::{spawn_worker_on, wait_exit, wait_terminal};
use crate::helpers::{Harness, run_until_handled};

/// A 1×1 PNG: what a screenshotting adapter attaches.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4,
    0x89, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x60, 0x00, 0x00, 0x00,
    0x02, 0x00, 0x01, 0x54, 0xA2, 0x4F, 0x5D, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE,
    0x42, 0x60, 0x82,
];

/// Serves `site` over the protocol on a fresh loopback port; returns its base URL.
async fn serve_adapter(site: Arc<dyn Site>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = trading_worker::site::adapter::server::router(site, "test-http");
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

fn sim(h: &Harness) -> SimSite {
    SimSite::new(
        &h.shop.base_url,
        Secret::new("sim-session"),
        Duration::from_secs(10),
    )
    .unwrap()
}

/// The simulated shop with a screenshot on every page, like a browser adapter.
#[derive(Debug)]
struct Screenshots(SimSite);

fn shot<T>(r: Result<Step<T>, SiteError>) -> Result<Step<T>, SiteError> {
    r.map(|mut s| {
        s.page.png = Some(PNG.to_vec());
        s
    })
    .map_err(|mut e| {
        if let Some(p) = e.page.as_mut() {
            p.png = Some(PNG.to_vec());
        }
        e
    })
}

#[async_trait]
impl Site for Screenshots {
    fn name(&self) -> &'static str {
        "screenshots"
    }
    fn account(&self) -> &str {
        self.0.account()
    }
    async fn cart_add(&self, line: &CartLine) -> Result<Step<()>, SiteError> {
        shot(self.0.cart_add(line).await)
    }
    async fn cart_check(&self) -> Result<Step<CartView>, SiteError> {
        shot(self.0.cart_check().await)
    }
    async fn order_confirm(&self) -> Result<Step<ConfirmView>, SiteError> {
        shot(self.0.order_confirm().await)
    }
    async fn order_submit(&self, c: &ConfirmView, note: &str) -> Result<Step<String>, SiteError> {
        shot(self.0.order_submit(c, note).await)
    }
    async fn pay(&self, id: &str, task_id: &str) -> Result<Step<PayOutcome>, SiteError> {
        shot(self.0.pay(id, task_id).await)
    }
    async fn list_orders(&self, page: u32) -> Result<Step<OrderListPage>, SiteError> {
        shot(self.0.list_orders(page).await)
    }
    async fn order_detail(&self, n: &str) -> Result<Step<OrderDetailResult>, SiteError> {
        shot(self.0.order_detail(n).await)
    }
}

#[tokio::test]
async fn conformance_kit_passes_against_the_http_adapter() {
    let h = Harness::new().await;
    let url = serve_adapter(Arc::new(sim(&h))).await;
    let kit = Kit::new(
        AdapterSite::new(&url, Duration::from_secs(10)).unwrap(),
        &h.shop.base_url,
    );
    let results = kit.run().await;
    let failed: Vec<String> = results
        .iter()
        .filter(|r| !r.passed)
        .map(ToString::to_string)
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
    assert_eq!(results.len(), 10);
}

#[tokio::test]
async fn png_files_exist_before_the_gateway_sees_the_report_naming_them() {
    let h = Harness::new().await;
    let url = serve_adapter(Arc::new(Screenshots(sim(&h)))).await;
    let w = h
        .worker_with(|s| {
            s.site = SiteKind::Adapter;
            s.site_adapter_url = url.clone();
            s.scraper_base_url = h.shop.base_url.clone();
        })
        .await;
    h.submit_tea("t-adapter-png").await;
    run_until_handled(&w).await;
    let t = h.task("t-adapter-png").await;
    assert_eq!(t["status"], "succeeded", "{t}");
    let reports = h.reports();
    // One report per order state: in_cart (confirm), ordered, paid.
    assert!(reports.len() >= 3, "{reports:?}");
    let mut pngs = 0;
    for r in &reports {
        let evidence_ref = r.body["evidence_ref"].as_str().expect("evidence_ref");
        assert!(
            r.meta_exists && r.files_exist,
            "report before its files: {r:?}"
        );
        let meta: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(h.evidence_dir.join(format!("{evidence_ref}.meta.json")))
                .unwrap(),
        )
        .unwrap();
        if meta["url"].is_string() {
            assert!(meta["png"].is_string(), "a page without its png: {meta}");
            pngs += 1;
        }
    }
    assert_eq!(pngs, reports.len(), "{pngs} reports named a png");
    // Every step's page left its screenshot, reported or not.
    let task_dir = h.evidence_dir.join("t-adapter-png");
    for step in [
        "01-cart-add",
        "02-cart-check",
        "03-order-confirm",
        "04-order-submit",
        "05-payment",
    ] {
        assert!(task_dir.join(format!("{step}.png")).exists(), "{step}.png");
    }
}

#[tokio::test]
async fn kill_9_between_the_adapter_submit_answer_and_the_report_still_submits_once() {
    let h = Harness::new().await;
    let url = serve_adapter(Arc::new(sim(&h))).await;
    let site = [
        ("RAKUTEN_SITE", "adapter"),
        ("RAKUTEN_SITE_ADAPTER_URL", url.as_str()),
        ("RAKUTEN_SCRAPER_BASE_URL", h.shop.base_url.as_str()),
    ];
    h.submit_tea("t-adapter-crash").await;
    // `after_submit` aborts the process right after the adapter's submit answer arrived,
    // before any evidence, journal entry or report: what kill -9 at that moment leaves.
    let mut first = spawn_worker_on(&h, Some("after_submit"), &site);
    assert!(!wait_exit(&mut first).await.success());
    assert_eq!(h.logged_submissions().len(), 1);
    let mut second = spawn_worker_on(&h, None, &site);
    let t = wait_terminal(&h, "t-adapter-crash").await;
    let _ = second.kill();
    let _ = second.wait();
    let subs = h.logged_submissions();
    assert_eq!(subs.len(), 1, "exactly one submission: {subs:?}");
    assert_eq!(subs[0]["note"], "t-adapter-crash");
    assert_eq!(t["status"], "succeeded", "{t}");
    assert_eq!(t["latest_state"], "paid", "{t}");
}

/// An "adapter" that answers 200 with a body that is not the protocol, one that answers JSON
/// of another shape, one with an unknown code, and one that never answers.
async fn broken_adapter() -> String {
    use axum::routing::post;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new()
        .route(
            "/v1/cart/check",
            post(|| async { "<html>definitely not json" }),
        )
        .route(
            "/v1/order/confirm",
            post(|| async { axum::Json(serde_json::json!({"protocol": 1, "ok": true})) }),
        )
        .route(
            "/v1/orders/list",
            post(|| async {
                axum::Json(serde_json::json!({"protocol": 1, "ok": false,
                    "error": {"code": 42, "message": "?"}}))
            }),
        )
        .route(
            "/v1/orders/detail",
            post(|| async {
                axum::Json(serde_json::json!({"protocol": 2, "ok": true, "value": {"found": true}}))
            }),
        )
        .route(
            "/v1/cart/add",
            // Never answers: only the adapter client's own timeout ends the call.
            post(std::future::pending::<&'static str>),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

#[tokio::test]
async fn an_adapter_that_answers_garbage_or_hangs_is_a_clear_site_error_never_a_panic() {
    let url = broken_adapter().await;
    let a = AdapterSite::new(&url, Duration::from_millis(500)).unwrap();
    let e = a.cart_check().await.unwrap_err();
    assert_eq!(e.kind, SiteErrorKind::Unavailable, "{e}");
    assert!(e.message.contains("not a protocol v1 answer"), "{e}");
    let e = a.order_confirm().await.unwrap_err();
    assert_eq!(e.kind, SiteErrorKind::Unavailable, "{e}");
    let e = a.list_orders(1).await.unwrap_err();
    assert_eq!(e.kind, SiteErrorKind::Unavailable, "{e}");
    let e = a.order_detail("1").await.unwrap_err();
    assert!(e.message.contains("protocol version"), "{e}");
    let e = a.pay("1", "t").await.unwrap_err(); // 404: no such route
    assert_eq!(e.kind, SiteErrorKind::Unavailable, "{e}");
    let line = CartLine {
        item_id: 1001,
        variant_id: None,
        quantity: 1,
    };
    let e = a.cart_add(&line).await.unwrap_err();
    assert_eq!(e.kind, SiteErrorKind::Timeout, "{e}");
}

#[tokio::test]
async fn a_task_through_a_garbage_adapter_fails_with_a_site_code() {
    let h = Harness::new().await;
    let url = broken_adapter().await;
    let w = h
        .worker_with(|s| {
            s.site = SiteKind::Adapter;
            s.site_adapter_url = url.clone();
            s.scraper_base_url = h.shop.base_url.clone();
            s.http_timeout_seconds = 0.3;
            s.retry_max_seconds = 0.05;
        })
        .await;
    h.submit_tea("t-adapter-garbage").await;
    run_until_handled(&w).await;
    let t = h.task("t-adapter-garbage").await;
    assert_eq!(t["status"], "failed", "{t}");
    let last = t["history"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["error_code"], 5007, "{t}");
    assert_eq!(h.submissions(), 0);
}
