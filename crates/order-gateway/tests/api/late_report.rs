//! A report appended after a task's verdict that contradicts it (D-late-report-contradiction-alert):
//! stored, raised as `task_state_contradicts_outcome` (records and webhooks), cleared by a new
//! verdict that fits. On SQLite and PostgreSQL.

use order_gateway::settings::Secret;
use serde_json::{Value, json};

use crate::helpers::{Engine, TestApp};
use crate::receiver::Receiver;

crate::on_both_engines!(
    a_late_paid_after_a_failed_verdict_raises_an_alert_until_a_fitting_verdict,
    a_late_report_that_fits_the_verdict_raises_nothing,
    a_resolve_naming_an_earlier_state_makes_it_the_latest,
    a_correction_naming_a_state_already_reported_clears_the_contradiction,
);

const KIND: &str = "task_state_contradicts_outcome";

fn open_of_kind(items: &Value) -> Vec<Value> {
    items["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == KIND)
        .cloned()
        .collect()
}

/// Task `id` leased to `worker`, which reports `states` in order; then its lease lapses and the
/// sweeper makes it stale.
async fn stale_after(app: &TestApp, id: &str, worker: &str, states: &[&str]) {
    app.leased(id, worker).await;
    for state in states {
        app.report(id, json!({"worker_id": worker, "state": state}))
            .await
            .assert_ok();
    }
    app.expire_leases();
    app.sweep().await;
}

/// A stale task resolved `failed` ("no order seen"), then the worker's late
/// `paid`. The report is kept, the alert is raised and delivered, and the operator's new verdict
/// `succeeded` clears it. A resolve of an ended task whose latest state fits stays 6003.
async fn a_late_paid_after_a_failed_verdict_raises_an_alert_until_a_fitting_verdict(e: Engine) {
    let rx = Receiver::start().await;
    let app = e
        .spawn(|s| {
            s.worker_offline_alert_seconds = 100_000.0;
            s.alerts.webhook_urls = Some(Secret::new(rx.url.clone()));
        })
        .await;
    stale_after(&app, "s1", "late", &["in_cart"]).await;
    let r = app
        .resolve(
            "s1",
            json!({"outcome": "failed", "reason": "no order seen on the site"}),
        )
        .await;
    assert_eq!(r.assert_ok()["status"], "failed");
    // Nothing contradicts yet: a second verdict is refused as before.
    app.resolve(
        "s1",
        json!({"outcome": "succeeded", "reason": "changed my mind"}),
    )
    .await
    .assert_err(409, 6003);

    let late = app
        .report(
            "s1",
            json!({"worker_id": "late", "state": "paid", "terminal": true,
                   "site_order_id": "306087-20261205-0000000009"}),
        )
        .await;
    assert_eq!(late.assert_ok()["status"], "failed");
    let t = app.task("s1").await;
    assert_eq!(t.data()["status"], "failed");
    assert_eq!(t.data()["latest_state"], "paid", "the late report is kept");

    app.run_alerts().await;
    app.deliver().await;
    let open = open_of_kind(&app.alerts("?state=open").await.assert_ok().clone());
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(open[0]["subject"], "s1");
    assert_eq!(open[0]["task_id"], "s1");
    let summary = open[0]["summary"].as_str().unwrap();
    assert!(
        summary.contains("ended failed") && summary.contains("paid"),
        "{summary}"
    );
    let health = app.health().await;
    assert_eq!(health.assert_ok()["status"], "degraded");

    // A new verdict must fit the latest state: `failed` again is 422.
    app.resolve(
        "s1",
        json!({"outcome": "failed", "reason": "still no order"}),
    )
    .await
    .assert_err(422, 1003);
    let fixed = app
        .resolve(
            "s1",
            json!({"outcome": "succeeded", "reason": "order 306087-…-09 is paid on the site",
                   "state": "paid"}),
        )
        .await;
    assert_eq!(fixed.assert_ok()["status"], "succeeded");
    assert_eq!(app.task("s1").await.data()["outcome"], "succeeded");
    app.run_alerts().await;
    app.deliver().await;
    assert!(open_of_kind(&app.alerts("?state=open").await.assert_ok().clone()).is_empty());
    let events: Vec<(String, String)> = rx
        .delivered()
        .iter()
        .filter(|e| e["kind"] == KIND)
        .map(|e| {
            (
                e["state"].as_str().unwrap().to_owned(),
                e["subject"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        events,
        [
            ("raised".to_owned(), "s1".to_owned()),
            ("cleared".to_owned(), "s1".to_owned())
        ]
    );
}

/// `shipped` after `paid`/succeeded, or `cancelled` after failed: the verdict stands, no alert.
async fn a_late_report_that_fits_the_verdict_raises_nothing(e: Engine) {
    let app = e
        .spawn(|s| s.worker_offline_alert_seconds = 100_000.0)
        .await;
    app.leased("po-1", "w1").await;
    app.report(
        "po-1",
        json!({"worker_id": "w1", "state": "paid", "terminal": true}),
    )
    .await
    .assert_ok();
    app.report("po-1", json!({"worker_id": "w1", "state": "shipped"}))
        .await
        .assert_ok();
    app.run_alerts().await;
    assert!(open_of_kind(&app.alerts("?state=open").await.assert_ok().clone()).is_empty());
    // A late `cancelled` after succeeded does contradict it.
    app.report("po-1", json!({"worker_id": "w1", "state": "cancelled"}))
        .await
        .assert_ok();
    app.run_alerts().await;
    let open = open_of_kind(&app.alerts("?state=open").await.assert_ok().clone());
    assert_eq!(open.len(), 1, "{open:?}");
}

/// A resolve whose `state` was reported before makes it the latest again: the person looked at
/// the site after the worker's `paid`, so `failed` with `created` stands and nothing contradicts
/// (D-resolve-and-cancel, D-latest-state-on-the-task).
async fn a_resolve_naming_an_earlier_state_makes_it_the_latest(e: Engine) {
    let app = e
        .spawn(|s| s.worker_offline_alert_seconds = 100_000.0)
        .await;
    stale_after(&app, "s3", "w", &["created", "paid"]).await;
    let r = app
        .resolve(
            "s3",
            json!({"outcome": "failed", "reason": "the site shows the order created, unpaid",
                   "state": "created"}),
        )
        .await;
    assert_eq!(r.assert_ok()["status"], "failed");
    assert_eq!(app.task("s3").await.data()["latest_state"], "created");
    app.run_alerts().await;
    assert!(open_of_kind(&app.alerts("?state=open").await.assert_ok().clone()).is_empty());
}

/// A correction that confirms the verdict with a state already in the history (`cancelled`,
/// reported before the late `paid`) clears the contradiction: the state it names becomes the
/// latest (D-late-report-contradiction-alert). It used to be accepted and leave the alert open.
async fn a_correction_naming_a_state_already_reported_clears_the_contradiction(e: Engine) {
    let app = e
        .spawn(|s| s.worker_offline_alert_seconds = 100_000.0)
        .await;
    stale_after(&app, "x1", "w", &["in_cart", "cancelled"]).await;
    let body = json!({"outcome": "failed", "state": "cancelled",
                      "reason": "the site shows the order cancelled"});
    app.resolve("x1", body.clone()).await.assert_ok();
    app.report("x1", json!({"worker_id": "w", "state": "paid"}))
        .await
        .assert_ok();
    app.run_alerts().await;
    assert_eq!(
        open_of_kind(&app.alerts("?state=open").await.assert_ok().clone()).len(),
        1
    );
    let fixed = app.resolve("x1", body).await;
    assert_eq!(fixed.assert_ok()["status"], "failed");
    let t = app.task("x1").await;
    assert_eq!(t.data()["latest_state"], "cancelled");
    app.run_alerts().await;
    assert!(open_of_kind(&app.alerts("?state=open").await.assert_ok().clone()).is_empty());
    // Nothing contradicts any more: a further resolve is refused as for any ended task.
    app.resolve(
        "x1",
        json!({"outcome": "failed", "state": "cancelled", "reason": "again"}),
    )
    .await
    .assert_err(409, 6003);
}
