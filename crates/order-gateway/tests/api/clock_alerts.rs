//! Clock alerts: a clock jump and a clock skew are alert records like the others
//! (raised once, cleared when the cause is gone, each raise and clear delivered to the webhooks,
//! in `GET /api/alerts`, `/health` and `/metrics`). Time is a `ManualClock`; jobs run through
//! their `run_once`. The real-process version with libfaketime is in `faketime.rs`.

use std::sync::Arc;
use std::time::Duration;

use order_gateway::settings::Secret;
use order_gateway::store::CLOCK_JUMP_QUIET;
use rakuten_types::{Clock, ManualClock, Timestamp};
use serde_json::Value;

use crate::helpers::{Engine, TestApp, spawn_pg_app};
use crate::receiver::Receiver;
use test_util::PgSchema;

crate::on_both_engines!(
    a_clock_jump_raises_one_alert_and_one_webhook_event_and_clears_after_a_quiet_period
);

fn events_of<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

async fn sync_and_deliver(app: &TestApp) {
    for _ in 0..3 {
        app.run_alerts().await;
        app.deliver().await;
    }
}

async fn open_of(app: &TestApp, kind: &str) -> Vec<Value> {
    let open = app.alerts(&format!("?state=open&kind={kind}")).await;
    open.assert_ok()["items"].as_array().unwrap().clone()
}

async fn a_clock_jump_raises_one_alert_and_one_webhook_event_and_clears_after_a_quiet_period(
    e: Engine,
) {
    let rx = Receiver::start().await;
    let url = rx.url.clone();
    let app = e
        .spawn(move |s| {
            s.lease_ttl_seconds = 4.0;
            s.worker_offline_alert_seconds = 100_000.0;
            s.queued_alert_seconds = 100_000.0;
            s.alerts.webhook_urls = Some(Secret::new(url));
        })
        .await;
    let instance = app.sweeper.instance_id().to_owned();
    // A grant stamped while the clock ran an hour ahead; the corrected clock's sweep clamps it.
    let correct = app.clock.now();
    app.clock.advance(Duration::from_secs(3600));
    app.leased("po-1", "w1").await;
    app.clock.set(correct);
    assert!(app.sweep().await.is_empty());
    sync_and_deliver(&app).await;

    let open = open_of(&app, "clock_jump").await;
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(open[0]["subject"], instance.as_str());
    assert!(
        open[0]["summary"].as_str().unwrap().contains("po-1"),
        "{open:?}"
    );
    let delivered = rx.delivered();
    let jumps = events_of(&delivered, "clock_jump");
    assert_eq!(jumps.len(), 1, "one webhook event: {delivered:?}");
    assert_eq!(jumps[0]["state"], "raised");

    // /health shows it with the instance's clock.
    let h = app.health().await;
    let h = h.assert_ok();
    assert!(
        h["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["kind"] == "clock_jump" && a["subject"] == instance.as_str()),
        "{h}"
    );
    let clocks = h["clocks"].as_array().unwrap();
    assert_eq!(clocks.len(), 1, "{h}");
    assert_eq!(clocks[0]["instance_id"], instance.as_str());
    assert!(
        clocks[0]["last_jump_detail"]
            .as_str()
            .unwrap()
            .contains("clamped")
    );

    // More sweeps and syncs without a new jump: still one alert, one event.
    for _ in 0..3 {
        app.clock.advance(Duration::from_secs(1));
        app.sweep().await;
        sync_and_deliver(&app).await;
    }
    assert_eq!(open_of(&app, "clock_jump").await.len(), 1);
    assert_eq!(events_of(&rx.delivered(), "clock_jump").len(), 1);

    // An event, not a state: quiet for CLOCK_JUMP_QUIET, it clears (D-clock-alerts).
    app.clock.advance(CLOCK_JUMP_QUIET + Duration::from_secs(1));
    sync_and_deliver(&app).await;
    assert!(open_of(&app, "clock_jump").await.is_empty());
    let delivered = rx.delivered();
    let states: Vec<&str> = events_of(&delivered, "clock_jump")
        .iter()
        .map(|e| e["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["raised", "cleared"], "{delivered:?}");

    // A step the sweep loop sees between two ticks is a new cause: a new alert.
    app.sweeper
        .note_clock_jump("the clock stepped by 5000 ms between two sweeps".into());
    app.sweep().await;
    sync_and_deliver(&app).await;
    let open = open_of(&app, "clock_jump").await;
    assert_eq!(open.len(), 1, "{open:?}");
    assert!(
        open[0]["summary"]
            .as_str()
            .unwrap()
            .contains("stepped by 5000 ms"),
        "{open:?}"
    );
    assert_eq!(events_of(&rx.delivered(), "clock_jump").len(), 3);
}

fn metric(app: &TestApp, name: &str) -> f64 {
    let text = app.state.metrics.render();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("{name} missing: {text}"))
        .trim()
        .parse()
        .unwrap()
}

/// The skew needs a second clock to compare with, the shared database's: PostgreSQL only (on
/// SQLite one process owns the database and there is nothing to compare).
#[test_util::lane(postgres)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skewed_instance_raises_clock_skew_which_clears_when_its_clock_is_back() {
    let db = Arc::new(PgSchema::new().await);
    let rx = Receiver::start().await;
    let real = Timestamp::now_utc();
    let settings = |url: String| {
        move |s: &mut order_gateway::Settings| {
            s.clock_skew_alert_seconds = 2.0;
            s.worker_offline_alert_seconds = 100_000.0;
            s.alerts.webhook_urls = Some(Secret::new(url));
        }
    };
    let fast = spawn_pg_app(
        db.clone(),
        ManualClock::new(real.plus(Duration::from_secs(120))),
        settings(rx.url.clone()),
    )
    .await;
    let healthy = spawn_pg_app(db.clone(), ManualClock::new(real), settings(rx.url.clone())).await;
    let instance = fast.sweeper.instance_id().to_owned();

    fast.sweep().await;
    assert_eq!(metric(&fast, "gateway_clock_skewed"), 1.0);
    let offset = metric(&fast, "gateway_clock_offset_seconds");
    assert!((-125.0..-115.0).contains(&offset), "{offset}");
    // The elected instance's alert job raises it from the fast instance's signal.
    sync_and_deliver(&healthy).await;
    let open = open_of(&healthy, "clock_skew").await;
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(open[0]["subject"], instance.as_str());
    assert!(
        open[0]["summary"].as_str().unwrap().contains("ahead of"),
        "{open:?}"
    );
    let h = healthy.health().await;
    let h = h.assert_ok();
    let fast_clock = h["clocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["instance_id"] == instance.as_str())
        .unwrap_or_else(|| panic!("{h}"))
        .clone();
    assert_eq!(fast_clock["skewed"], true);
    assert!(
        fast_clock["offset_ms"].as_i64().unwrap() < -115_000,
        "{fast_clock}"
    );
    assert!(
        h["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["kind"] == "clock_skew"),
        "{h}"
    );

    // Still skewed: the alert stays one alert.
    fast.sweep().await;
    sync_and_deliver(&healthy).await;
    assert_eq!(open_of(&healthy, "clock_skew").await.len(), 1);

    // NTP fixed the clock: the next sweep writes it, the next sync clears the alert.
    fast.clock.set(Timestamp::now_utc());
    fast.sweep().await;
    assert_eq!(metric(&fast, "gateway_clock_skewed"), 0.0);
    healthy.clock.set(Timestamp::now_utc());
    sync_and_deliver(&healthy).await;
    assert!(open_of(&healthy, "clock_skew").await.is_empty());
    let delivered = rx.delivered();
    let states: Vec<&str> = events_of(&delivered, "clock_skew")
        .iter()
        .map(|e| e["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["raised", "cleared"], "{delivered:?}");
}
