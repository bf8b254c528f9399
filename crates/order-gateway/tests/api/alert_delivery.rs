//! Alert delivery a receiver can rely on: each attempt signed when it leaves, every receiver its
//! own queue (a hung one delays nobody else), the events of one alert in the order they happened
//! with a database-assigned `sequence`, and Slack text that cannot mention anyone. Real receivers
//! on 127.0.0.1:0; time is the app's `ManualClock`; waits are on conditions.

use std::collections::HashMap;
use std::time::Duration;

use order_gateway::jobs::webhooks::{SIGNATURE_HEADER, verify};
use order_gateway::settings::{Secret, WebhookFormat};
use rakuten_types::Clock;
use serde_json::{Value, json};

use crate::helpers::{Engine, TestApp};
use crate::receiver::Receiver;

crate::on_both_engines!(
    a_cleared_event_never_reaches_a_receiver_before_its_raised_event,
    every_event_carries_a_sequence_assigned_by_the_database,
);

const SECRET: &str = "whsec-0123456789abcdef";

/// Settings delivering to `urls`; workers count as offline after 60 s (the tests' event source).
fn receivers(urls: &[&str]) -> impl FnOnce(&mut order_gateway::Settings) {
    let urls = urls.join(",");
    move |s| {
        s.worker_offline_alert_seconds = 60.0;
        s.alerts.webhook_urls = Some(Secret::new(urls));
    }
}

/// `n` workers poll once, then fall silent past the offline threshold: one `worker_offline`
/// alert (one `raised` event per receiver) each.
async fn offline_workers(app: &TestApp, prefix: &str, n: usize) {
    for i in 0..n {
        app.lease(&format!("{prefix}{i:02}"), 0.0).await.assert_ok();
    }
    app.clock.advance(Duration::from_secs(61));
    let run = app.run_alerts().await;
    assert_eq!(run.sync.raised.len(), n, "{run:?}");
}

fn sequence_header(r: &crate::receiver::Received) -> i64 {
    r.headers["x-rakuten-event-sequence"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_attempt_is_signed_when_it_is_sent() {
    let rx = Receiver::start().await;
    let app = Engine::Sqlite
        .spawn(|s| {
            receivers(&[&rx.url])(s);
            s.alerts.webhook_secret = Some(Secret::new(SECRET));
        })
        .await;
    offline_workers(&app, "w", 3).await;
    // A run that started ten minutes before its attempts leave (behind a receiver that timed
    // out, or a long batch): each attempt still carries the time it was sent.
    let run_started = app.clock.now();
    app.clock.advance(Duration::from_secs(600));
    let run = app.webhooks.run_once(run_started).await.unwrap();
    assert_eq!(run.delivered.len(), 3, "{run:?}");
    let sent = app.clock.now().as_millis() / 1000;
    let got = rx.received();
    assert_eq!(got.len(), 3);
    for r in &got {
        let h = r.headers[SIGNATURE_HEADER].to_str().unwrap();
        assert!(h.starts_with(&format!("t={sent},v1=")), "{h}");
        // A receiver allowing the common 300 s window accepts it.
        assert!(verify(SECRET.as_bytes(), h, r.body.as_bytes(), sent, 300));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_receiver_does_not_delay_another_receivers_events() {
    let hung = Receiver::start().await;
    hung.hold();
    let healthy = Receiver::start().await;
    let app = Engine::Sqlite
        .spawn(|s| {
            receivers(&[&hung.url, &healthy.url])(s);
            // Longer than this test waits for anything: only independence gets it through.
            s.alerts.webhook_timeout_seconds = 60.0;
        })
        .await;
    offline_workers(&app, "w", 24).await;
    let first = tokio::spawn({
        let (w, now) = (app.webhooks.clone(), app.clock.now());
        async move { w.run_once(now).await.unwrap() }
    });
    healthy
        .wait_until(
            "every event at the healthy receiver while the other hangs",
            Duration::from_secs(20),
            |r| r.received().len() == 24,
        )
        .await;
    hung.wait_until(
        "attempts held by the hung receiver",
        Duration::from_secs(20),
        |r| r.waiting() >= 1,
    )
    .await;

    // An alert raised while the hung receiver still holds attempts: the next run gets it to the
    // healthy receiver at once, and sends nothing more to the hung one meanwhile.
    app.lease("late", 0.0).await.assert_ok();
    app.clock.advance(Duration::from_secs(61));
    assert_eq!(app.run_alerts().await.sync.raised.len(), 1);
    let second = tokio::spawn({
        let (w, now) = (app.webhooks.clone(), app.clock.now());
        async move { w.run_once(now).await.unwrap() }
    });
    healthy
        .wait_until(
            "the later alert at the healthy receiver",
            Duration::from_secs(20),
            |r| r.received().len() == 25,
        )
        .await;
    assert!(
        hung.waiting() >= 1,
        "the hung receiver still holds attempts"
    );
    let late = healthy.received().last().unwrap().json();
    assert_eq!(late["subject"], "late");

    // Once it answers, the hung receiver gets every event, each exactly once.
    hung.release();
    first.await.unwrap();
    second.await.unwrap();
    let again = app.deliver().await;
    assert!(again.failed.is_empty(), "{again:?}");
    let mut ids: Vec<String> = hung
        .arrived()
        .iter()
        .map(|r| r.json()["event_id"].as_str().unwrap().to_owned())
        .collect();
    let sent = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!((sent, ids.len()), (25, 25), "each event once");
}

/// A receiver that answers 500 once to an alert's `raised` event: the `cleared` event waits for
/// it (D-webhook-per-alert-order), so an incident keyed on the alert ends closed.
async fn a_cleared_event_never_reaches_a_receiver_before_its_raised_event(e: Engine) {
    let rx = Receiver::start().await;
    rx.fail_next(1);
    let app = e
        .spawn(|s| {
            receivers(&[&rx.url])(s);
            s.worker_offline_alert_seconds = 100_000.0;
        })
        .await;
    app.stale("po-order", "w1").await;
    app.run_alerts().await;
    let r = app.deliver().await;
    assert_eq!(r.failed.len(), 1, "the raised event is refused once: {r:?}");
    app.resolve(
        "po-order",
        json!({"outcome": "succeeded", "reason": "order seen paid on the site",
               "site_order_id": "306-1", "state": "paid"}),
    )
    .await
    .assert_ok();
    app.run_alerts().await;
    // The cleared event is due now, the raised one only after its backoff (at least 1 s).
    app.clock.advance(Duration::from_millis(400));
    app.deliver().await;
    let states: Vec<Value> = rx.delivered().iter().map(|e| e["state"].clone()).collect();
    assert!(
        states.is_empty(),
        "nothing before the raised event: {states:?}"
    );

    app.clock.advance(Duration::from_secs(601));
    app.deliver().await;
    app.deliver().await;
    let got: Vec<_> = rx
        .received()
        .into_iter()
        .filter(|r| r.status < 300)
        .collect();
    let states: Vec<Value> = got.iter().map(|r| r.json()["state"].clone()).collect();
    assert_eq!(states, [json!("raised"), json!("cleared")], "{got:?}");
    let (raised, cleared) = (got[0].json(), got[1].json());
    assert_eq!(raised["alert_id"], cleared["alert_id"]);
    assert!(
        raised["sequence"].as_i64().unwrap() < cleared["sequence"].as_i64().unwrap(),
        "{raised} {cleared}"
    );
    for r in &got {
        assert_eq!(sequence_header(r), r.json()["sequence"].as_i64().unwrap());
    }
}

async fn every_event_carries_a_sequence_assigned_by_the_database(e: Engine) {
    let rx = Receiver::start().await;
    let app = e.spawn(receivers(&[&rx.url])).await;
    offline_workers(&app, "w", 3).await;
    // Two of the three poll again: their alerts clear.
    app.lease("w00", 0.0).await.assert_ok();
    app.lease("w02", 0.0).await.assert_ok();
    assert_eq!(app.run_alerts().await.sync.cleared.len(), 2);
    app.deliver().await;
    app.deliver().await;
    let got = rx.received();
    assert_eq!(got.len(), 5, "{got:?}");
    let mut by_alert: HashMap<String, Vec<(String, i64)>> = HashMap::new();
    let mut all = Vec::new();
    for r in &got {
        let b = r.json();
        let seq = b["sequence"]
            .as_i64()
            .expect("an integer sequence on every event");
        assert_eq!(sequence_header(r), seq, "header and body agree");
        all.push((b["state"].as_str().unwrap().to_owned(), seq));
        by_alert
            .entry(b["alert_id"].as_str().unwrap().to_owned())
            .or_default()
            .push((b["state"].as_str().unwrap().to_owned(), seq));
    }
    // Unique across the gateway, and in the order the events were written: every raise of the
    // first tick before every clear of the second.
    all.sort_by_key(|(_, s)| *s);
    let states: Vec<&str> = all.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(states, ["raised", "raised", "raised", "cleared", "cleared"]);
    let mut seqs: Vec<i64> = all.iter().map(|(_, s)| *s).collect();
    seqs.dedup();
    assert_eq!(seqs.len(), 5, "unique");
    for (alert, events) in by_alert {
        if events.len() == 2 {
            assert_eq!(events[0].0, "raised", "{alert}");
            assert!(events[0].1 < events[1].1, "{alert}: {events:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_text_escapes_client_fields() {
    let rx = Receiver::start().await;
    let app = Engine::Sqlite
        .spawn(|s| {
            receivers(&[&rx.url])(s);
            s.worker_offline_alert_seconds = 100_000.0;
            s.alerts.webhook_format = WebhookFormat::Slack;
        })
        .await;
    // A task id and a worker's report detail, both from clients, written as Slack markup.
    app.stale("po-37 <!channel> & <@U0ADMIN>", "w1").await;
    app.leased("po-38", "w1").await;
    app.report(
        "po-38",
        json!({"worker_id": "w1", "state": "awaiting_payment", "terminal": true,
               "outcome": "needs_human", "error_code": 5005,
               "detail": "3-D Secure <!here> <https://evil.example|open this> & co"}),
    )
    .await
    .assert_ok();
    app.run_alerts().await;
    app.deliver().await;
    let texts: Vec<String> = rx
        .delivered()
        .iter()
        .map(|d| d["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    for t in &texts {
        assert!(!t.contains('<') && !t.contains('>'), "live markup: {t}");
    }
    let stale = texts.iter().find(|t| t.contains("task_stale")).unwrap();
    assert!(
        stale.contains("po-37 &lt;!channel&gt; &amp; &lt;@U0ADMIN&gt;"),
        "{stale}"
    );
    let nh = texts
        .iter()
        .find(|t| t.contains("task_needs_human"))
        .unwrap();
    assert!(
        nh.contains("3-D Secure &lt;!here&gt; &lt;https://evil.example|open this&gt; &amp; co"),
        "{nh}"
    );
}

/// The delivery loop the gateway runs (not one `run_once`): a tick starts every receiver's run
/// and never waits for one, so while a hung receiver holds its attempts for the whole timeout,
/// the healthy receiver gets each event as soon as it is raised (D-webhook-per-receiver-queues).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delivery_loop_keeps_serving_a_healthy_receiver_while_another_hangs() {
    let hung = Receiver::start().await;
    hung.hold();
    let healthy = Receiver::start().await;
    let app = Engine::Sqlite
        .spawn(|s| {
            receivers(&[&hung.url, &healthy.url])(s);
            s.alerts.webhook_timeout_seconds = 60.0;
            // The background jobs (alerts and delivery) tick every 100 ms here.
            s.sweep_interval_seconds = 0.1;
        })
        .await;
    for w in ["w00", "w01", "w02"] {
        app.lease(w, 0.0).await.assert_ok();
    }
    app.clock.advance(Duration::from_secs(61));
    // Only the workers' alerts count: the sweeper may also see the manual clock's step as a jump.
    healthy
        .wait_until(
            "the first alerts at the healthy receiver",
            Duration::from_secs(20),
            |r| offline_workers_delivered(r) == ["w00", "w01", "w02"],
        )
        .await;
    hung.wait_until(
        "attempts held by the hung receiver",
        Duration::from_secs(20),
        |r| r.waiting() >= 1,
    )
    .await;

    // Raised while the hung receiver holds attempts for up to a minute: the loop does not wait
    // for them.
    app.lease("late", 0.0).await.assert_ok();
    app.clock.advance(Duration::from_secs(61));
    healthy
        .wait_until(
            "the later alert at the healthy receiver while the other still hangs",
            Duration::from_secs(20),
            |r| offline_workers_delivered(r).contains(&"late".to_owned()),
        )
        .await;
    assert!(
        hung.waiting() >= 1,
        "the hung receiver still holds attempts"
    );

    // Once it answers, the hung receiver gets all four.
    hung.release();
    hung.wait_until(
        "every event at the released receiver",
        Duration::from_secs(30),
        |r| offline_workers_delivered(r) == ["late", "w00", "w01", "w02"],
    )
    .await;
}

/// The workers whose `worker_offline` raise `r` answered 2xx, sorted, each once.
fn offline_workers_delivered(r: &Receiver) -> Vec<String> {
    let mut subjects: Vec<String> = r
        .delivered()
        .iter()
        .filter(|e| e["kind"] == "worker_offline" && e["state"] == "raised")
        .map(|e| e["subject"].as_str().unwrap().to_owned())
        .collect();
    subjects.sort();
    subjects.dedup();
    subjects
}

/// One attempt is bounded by `RAKUTEN_ALERT_WEBHOOK_TIMEOUT_SECONDS`: a receiver that accepts the
/// connection and never answers fails the attempt at the bound (retried later), it does not hold
/// the delivery for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_to_a_hung_receiver_ends_at_its_bound() {
    let hung = Receiver::start().await;
    hung.hold();
    let app = Engine::Sqlite
        .spawn(|s| {
            receivers(&[&hung.url])(s);
            s.alerts.webhook_timeout_seconds = 0.5;
        })
        .await;
    offline_workers(&app, "w", 2).await;
    let started = std::time::Instant::now();
    let run = app.deliver().await;
    let took = started.elapsed();
    assert_eq!((run.delivered.len(), run.failed.len()), (0, 2), "{run:?}");
    assert!(took < Duration::from_secs(10), "one run took {took:?}");
    // Both attempts are recorded as failed and scheduled again.
    let failing = app.webhooks.run_once(app.clock.now()).await.unwrap();
    assert!(
        failing.failed.is_empty() && failing.delivered.is_empty(),
        "backoff: {failing:?}"
    );
    hung.release();
    app.clock.advance(Duration::from_secs(600));
    let again = app.deliver().await;
    assert_eq!(again.delivered.len(), 2, "{again:?}");
}
