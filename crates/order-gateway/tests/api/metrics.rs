//! `/metrics`: Prometheus text that a parser reads, that moves when tasks
//! move, on both drivers; who may read it.

use std::sync::Arc;

use prometheus_parse::{Scrape, Value};
use rakuten_types::ManualClock;
use serde_json::json;

use order_gateway::settings::Secret;
use rakuten_types::alert::AlertKind;

use crate::helpers::{Engine, TestApp, answer, spawn_app_with, spawn_pg_app};
use crate::receiver::Receiver;
use test_util::PgSchema;

const METRICS_TOKEN: &str = "metrics-token-0123456789";

async fn scrape(app: &TestApp) -> Scrape {
    let resp = app
        .client
        .get(app.url("/metrics"))
        .bearer_auth(METRICS_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let ct = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
    let text = resp.text().await.unwrap();
    Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The value of `name` whose labels include `labels`.
fn value(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<f64> = s
        .samples
        .iter()
        .filter(|x| x.metric == name && labels.iter().all(|(k, v)| x.labels.get(k) == Some(v)))
        .map(|x| match &x.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
            Value::Histogram(h) => h.iter().map(|b| b.count).fold(0.0, f64::max),
            Value::Summary(_) => f64::NAN,
        })
        .collect();
    assert_eq!(found.len(), 1, "{name}{labels:?}: {found:?}");
    found[0]
}

fn with_metrics_token(s: &mut order_gateway::Settings) {
    s.metrics_tokens = Some(format!("prometheus:{METRICS_TOKEN}").parse().unwrap());
    s.upstream_tokens = Some("shop:up-token-0123456789".parse().unwrap());
}

async fn metrics_move_when_tasks_move(app: &TestApp) {
    let s = scrape(app).await;
    assert_eq!(value(&s, "gateway_tasks", &[("status", "queued")]), 0.0);
    assert_eq!(
        value(&s, "gateway_lease_grants_total", &[("channel", "orders")]),
        0.0
    );

    app.submit("po-1").await.assert_ok();
    app.submit("po-2").await.assert_ok();
    app.clock.advance(std::time::Duration::from_secs(90));
    let s = scrape(app).await;
    assert_eq!(value(&s, "gateway_tasks", &[("status", "queued")]), 2.0);
    assert_eq!(
        value(
            &s,
            "gateway_task_oldest_age_seconds",
            &[("status", "queued")]
        ),
        90.0
    );

    app.lease("w1", 0.0).await.assert_ok();
    app.clock.advance(std::time::Duration::from_secs(5));
    let s = scrape(app).await;
    assert_eq!(value(&s, "gateway_tasks", &[("status", "queued")]), 1.0);
    assert_eq!(value(&s, "gateway_tasks", &[("status", "leased")]), 1.0);
    assert_eq!(
        value(&s, "gateway_lease_grants_total", &[("channel", "orders")]),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "gateway_worker_last_seen_seconds",
            &[("worker_id", "w1")]
        ),
        5.0
    );

    app.report(
        "po-1",
        json!({"worker_id": "w1", "state": "paid", "terminal": true}),
    )
    .await
    .assert_ok();
    let s = scrape(app).await;
    assert_eq!(value(&s, "gateway_tasks", &[("status", "leased")]), 0.0);
    assert_eq!(value(&s, "gateway_reports_total", &[]), 1.0);
    assert_eq!(
        value(
            &s,
            "gateway_tasks_finished_total",
            &[("outcome", "succeeded")]
        ),
        1.0
    );

    app.lease("w1", 0.0).await.assert_ok();
    app.expire_leases();
    app.sweep().await;
    app.clock.advance(std::time::Duration::from_secs(30));
    let s = scrape(app).await;
    assert_eq!(value(&s, "gateway_tasks", &[("status", "stale")]), 1.0);
    assert_eq!(
        value(
            &s,
            "gateway_task_oldest_age_seconds",
            &[("status", "stale")]
        ),
        30.0
    );
    assert_eq!(
        value(&s, "gateway_tasks", &[("status", "needs_human")]),
        0.0
    );

    app.submit_list_query("q-1").await.assert_ok();
    let s = scrape(app).await;
    assert_eq!(
        value(&s, "gateway_account_queries", &[("status", "queued")]),
        1.0
    );
    assert_eq!(
        value(&s, "gateway_open_long_polls", &[("channel", "orders")]),
        0.0
    );
}

#[tokio::test]
async fn metrics_parse_and_move_when_tasks_move_on_sqlite() {
    let app = spawn_app_with(with_metrics_token).await;
    metrics_move_when_tasks_move(&app).await;
    // The group commit was observed: every write above was a commit of at least one operation.
    let s = scrape(&app).await;
    assert!(value(&s, "gateway_commit_batch_size_count", &[]) >= 5.0);
    assert!(value(&s, "gateway_commit_seconds_count", &[]) >= 5.0);
    assert!(value(&s, "gateway_commit_batch_size_sum", &[]) >= 5.0);
}

#[test_util::lane(postgres)]
#[tokio::test]
async fn metrics_parse_and_move_when_tasks_move_on_postgres() {
    let db = Arc::new(PgSchema::new().await);
    let app = spawn_pg_app(db, ManualClock::at_fixed_date(), with_metrics_token).await;
    metrics_move_when_tasks_move(&app).await;
}

#[tokio::test]
async fn a_waiting_long_poll_shows_in_open_long_polls() {
    let app = Arc::new(spawn_app_with(with_metrics_token).await);
    let waiter = {
        let app = app.clone();
        tokio::spawn(async move { app.lease("w1", 2.0).await })
    };
    let seen = test_util::poll_within(std::time::Duration::from_secs(10), async || {
        let seen = value(
            &scrape(&app).await,
            "gateway_open_long_polls",
            &[("channel", "orders")],
        );
        if seen == 1.0 { Ok(seen) } else { Err(seen) }
    })
    .await
    .unwrap_or_else(|last| last);
    assert_eq!(seen, 1.0);
    waiter.await.unwrap();
    let s = scrape(&app).await;
    assert_eq!(
        value(&s, "gateway_open_long_polls", &[("channel", "orders")]),
        0.0
    );
}

#[tokio::test]
async fn metrics_need_an_operator_or_metrics_token() {
    let app = spawn_app_with(with_metrics_token).await;
    let get = |token: Option<&str>| {
        let mut rb = app.client.get(app.url("/metrics"));
        if let Some(t) = token {
            rb = rb.bearer_auth(t);
        }
        rb.send()
    };
    answer(get(None).await.unwrap()).await.assert_err(401, 1001);
    answer(get(Some("up-token-0123456789")).await.unwrap())
        .await
        .assert_err(403, 1002);
    assert_eq!(get(Some(&app.token)).await.unwrap().status(), 200);
    assert_eq!(get(Some(METRICS_TOKEN)).await.unwrap().status(), 200);
}

crate::on_both_engines!(alert_metrics_show_open_alerts_by_kind_and_deliveries_by_result);

/// Alert metrics: `gateway_alerts_open{kind}` follows the alert job's runs,
/// `gateway_webhook_deliveries_total{result}` counts each delivery attempt.
async fn alert_metrics_show_open_alerts_by_kind_and_deliveries_by_result(e: Engine) {
    let rx = Receiver::start().await;
    let url = rx.url.clone();
    let app = e
        .spawn(move |s| {
            with_metrics_token(s);
            s.worker_offline_alert_seconds = 100_000.0;
            s.alerts.webhook_urls = Some(Secret::new(url));
        })
        .await;
    let s = scrape(&app).await;
    for kind in AlertKind::ALL {
        assert_eq!(
            value(&s, "gateway_alerts_open", &[("kind", kind.as_str())]),
            0.0
        );
    }
    for result in ["delivered", "failed"] {
        assert_eq!(
            value(
                &s,
                "gateway_webhook_deliveries_total",
                &[("result", result)]
            ),
            0.0
        );
    }

    app.stale("po-a1", "w1").await;
    app.run_alerts().await;
    let s = scrape(&app).await;
    assert_eq!(
        value(&s, "gateway_alerts_open", &[("kind", "task_stale")]),
        1.0
    );
    assert_eq!(
        value(&s, "gateway_alerts_open", &[("kind", "worker_offline")]),
        0.0
    );

    rx.fail_next(1);
    app.deliver().await;
    let s = scrape(&app).await;
    assert_eq!(
        value(
            &s,
            "gateway_webhook_deliveries_total",
            &[("result", "failed")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "gateway_webhook_deliveries_total",
            &[("result", "delivered")]
        ),
        0.0
    );

    // Past the retry's backoff: the same event is delivered.
    app.clock.advance(std::time::Duration::from_secs(60));
    app.deliver().await;
    let s = scrape(&app).await;
    assert_eq!(
        value(
            &s,
            "gateway_webhook_deliveries_total",
            &[("result", "delivered")]
        ),
        1.0
    );
    assert_eq!(rx.delivered().len(), 1);
}
