//! A webhook receiver removed from `RAKUTEN_ALERT_WEBHOOK_URLS` gets nothing after the restart,
//! although the outbox still held its pending deliveries (D-webhook-removed-receiver-dropped).

use std::sync::Arc;

use order_gateway::settings::Secret;
use rakuten_types::ManualClock;
use test_util::PgSchema;

use crate::helpers::{TestApp, spawn_app_with, spawn_pg_app};
use crate::receiver::Receiver;

fn receivers(urls: String) -> impl FnOnce(&mut order_gateway::Settings) {
    move |s| {
        s.worker_offline_alert_seconds = 100_000.0;
        s.alerts.webhook_urls = Some(Secret::new(urls));
    }
}

/// `before` raised an alert for two receivers and delivered nothing; `after` is the restart with
/// only the first receiver configured.
async fn only_the_configured_receiver_gets_the_backlog(
    before: &TestApp,
    after: &TestApp,
    kept: &Receiver,
    removed: &Receiver,
) {
    after.deliver().await;
    after.deliver().await;
    assert!(
        kept.delivered()
            .iter()
            .any(|e| e["kind"] == "task_stale" && e["subject"] == "po-1"),
        "{:?}",
        kept.delivered()
    );
    assert!(removed.delivered().is_empty(), "{:?}", removed.delivered());
    // The removed receiver's rows are gone: the old configuration has nothing left to send.
    let run = before.deliver().await;
    assert!(run.delivered.is_empty() && run.failed.is_empty(), "{run:?}");
    assert!(removed.delivered().is_empty());
    let metrics = after
        .get("/metrics")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("gateway_webhook_deliveries_total{result=\"dropped\"} 1"),
        "{metrics}"
    );
}

/// SQLite allows one gateway per file, so the rows an earlier configuration left for the removed
/// receiver are written beside the kept one's, as that configuration wrote them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_removed_from_the_list_gets_no_pending_event_after_a_restart() {
    let (kept, removed) = (Receiver::start().await, Receiver::start().await);
    let app = spawn_app_with(receivers(kept.url.clone())).await;
    app.stale("po-1", "w1").await;
    app.run_alerts().await;
    let copy: &'static str = Box::leak(
        format!(
            "INSERT INTO alert_outbox (event_id, url, alert_id, body_json, state, attempts, \
             next_attempt_at, created_at, seq) SELECT event_id, '{}', alert_id, body_json, \
             state, attempts, next_attempt_at, created_at, seq FROM alert_outbox",
            removed.url
        )
        .into_boxed_str(),
    );
    assert_eq!(app.raw_sql(copy).await, 1);
    only_the_configured_receiver_gets_the_backlog(&app, &app, &kept, &removed).await;
}

#[test_util::lane(postgres)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_removed_from_the_list_gets_no_pending_event_after_a_restart_on_postgres() {
    let (kept, removed) = (Receiver::start().await, Receiver::start().await);
    let db = Arc::new(PgSchema::new().await);
    let clock = ManualClock::at_fixed_date();
    let before = spawn_pg_app(
        db.clone(),
        clock.clone(),
        receivers(format!("{},{}", kept.url, removed.url)),
    )
    .await;
    before.stale("po-1", "w1").await;
    before.run_alerts().await;
    let after = spawn_pg_app(db, clock, receivers(kept.url.clone())).await;
    only_the_configured_receiver_gets_the_backlog(&before, &after, &kept, &removed).await;
}
