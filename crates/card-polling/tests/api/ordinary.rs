//! Ordinary polling: every card in polling scope for every task type at its interval, the
//! persisted schedule across a restart, and the package poll's `no_valid_package` verdict.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::json;

use card_polling::Application;
use card_polling::upstream::{SimCarrier, SimConfig};
use rakuten_types::Clock;

use super::helpers::*;

#[super::lane]
#[tokio::test]
async fn ordinary_polling_polls_every_card_in_scope_for_every_task_type_at_its_interval() {
    let app = spawn_seeded().await;
    app.put(
        "/api/cards/CB1/polling",
        PLATFORM,
        json!({"enabled": false}),
    )
    .await;
    // One simulated hour, a cycle per minute.
    for _ in 0..60 {
        app.advance(60);
        let r = app.cycle_and_drain().await;
        assert!(r.errors.is_empty(), "{r:?}");
    }
    let mut per: HashMap<(String, String), u32> = HashMap::new();
    for c in app.sim.calls() {
        *per.entry((c.iccid, c.task_type)).or_default() += 1;
    }
    for iccid in ["CA1", "CA11", "D1C1", "D1C2", "D1C3", "D1C4"] {
        for (tt, expect) in [("card_status", 12), ("data_usage", 6), ("package", 2)] {
            let n = per
                .get(&(iccid.to_owned(), tt.to_owned()))
                .copied()
                .unwrap_or(0);
            assert!(
                (expect - 1..=expect + 1).contains(&n),
                "{iccid} {tt}: {n} polls in an hour"
            );
        }
    }
    assert!(
        !per.keys().any(|(c, _)| c == "CB1"),
        "a card with polling off is not polled"
    );
    let logs: i64 =
        sqlx::query_scalar("SELECT count(*) FROM integration_logs WHERE item_id IS NULL")
            .fetch_one(app.db.pool())
            .await
            .unwrap();
    assert_eq!(logs as usize, app.sim.calls().len(), "every call is logged");
    // Every row whole, on both engines' ways of writing them (PostgreSQL's one `UNNEST`
    // statement, SQLite's `VALUES` lists; D-ordinary-outcome-batches): the same (card, task type) pairs as the
    // calls, each a `poll` summary with its outcome, latency and time.
    /// iccid, task type, operation, request and response summaries, latency, outcome, time.
    type LogRow = (String, String, String, String, String, i64, String, String);
    let rows: Vec<LogRow> = sqlx::query_as(
        "SELECT iccid, task_type, operation, request_summary, response_summary, latency_ms, \
           outcome, at FROM integration_logs WHERE item_id IS NULL",
    )
    .fetch_all(app.db.pool())
    .await
    .unwrap();
    let mut logged: HashMap<(String, String), u32> = HashMap::new();
    for (iccid, tt, op, req, resp, latency, outcome, at) in rows {
        assert_eq!(op, "poll");
        assert!(req.contains(&iccid) && !resp.is_empty(), "{req} / {resp}");
        assert!(latency >= 0 && outcome == "ok", "{latency} {outcome}");
        assert!(rakuten_types::Timestamp::parse(&at).is_ok(), "{at}");
        *logged.entry((iccid, tt)).or_default() += 1;
    }
    assert_eq!(logged, per, "one row per call, per card and task type");
}

#[super::lane]
#[tokio::test]
async fn restart_does_not_repoll_every_card_at_once() {
    let app = spawn_seeded().await;
    app.advance(3600);
    let r = app.cycle_and_drain().await;
    assert_eq!(r.ordinary_taken.values().sum::<usize>(), 21);
    // A second process on the same database (the first one "crashed" after its cycle: its
    // store, and with it the database file's lock, is gone, D-one-process-per-sqlite-file).
    app.store.shutdown().await;
    let mut settings = app.settings.clone();
    settings.port = 0;
    let restarted = Application::build(
        settings,
        Arc::new(app.clock.clone()),
        Arc::new(SimCarrier::new(SimConfig::default())),
    )
    .await
    .expect("restart");
    let r = restarted.scheduler().run_once(app.clock.now()).await;
    assert_eq!(r.ordinary_taken.values().sum::<usize>(), 0, "{r:?}");
    app.advance(300);
    let r = restarted.scheduler().run_once(app.clock.now()).await;
    assert_eq!(
        r.ordinary_taken.values().sum::<usize>(),
        7,
        "only card_status is due again: {r:?}"
    );
}

#[super::lane]
#[tokio::test]
async fn ordinary_package_poll_enqueues_no_valid_package_for_a_card_with_a_pending_usage() {
    let app = spawn_seeded().await;
    app.buy("card", "CA1", "main").await;
    let queued = app.buy("card", "CA1", "main").await;
    assert_eq!(queued["usage_active"], false, "{queued}");
    app.cycle_and_drain().await;
    // The active package runs out; the next ordinary package poll notices.
    app.advance(31 * 86_400);
    app.cycle_and_drain().await;
    let items = app.list("iccid=CA1&trigger_type=no_valid_package").await;
    assert_eq!(items.len(), 3, "one per task type: {items:?}");
    // Their hints were pushed: the next cycle takes them first.
    let r = app.cycle_and_drain().await;
    assert_eq!(r.hints_taken.values().sum::<usize>(), 3, "{r:?}");
    for i in app.list("iccid=CA1&trigger_type=no_valid_package").await {
        assert_eq!(i["status"], "completed", "{i}");
    }
    // A card without a pending usage gets no item.
    assert!(app.list("iccid=CA11").await.is_empty());
    app.assert_invariants().await;
}
