//! Many claimers at once never produce two upstream calls for one item and round.

use std::time::Duration;

use serde_json::json;

use rakuten_types::Clock;

use super::helpers::*;

#[super::lane]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_concurrent_claimers_never_call_upstream_twice_for_one_item_and_round() {
    let app = spawn_seeded().await;
    for (t, id) in [
        ("card", "CA1"),
        ("card", "CA11"),
        ("card", "CB1"),
        ("device", "DEV1"),
    ] {
        let (s, _) = app
            .enqueue(
                PLATFORM,
                json!({"asset_type": t, "asset_id": id, "reason": "load"}),
            )
            .await;
        assert_eq!(s, 200);
    }
    let total_items = 18;
    app.sim.set_latency(Duration::from_millis(5));
    let now = app.clock.now();
    // 16 executors run the same round at the same instant.
    let mut handles = Vec::new();
    for _ in 0..16 {
        let ex = app.executor.clone();
        handles.push(tokio::spawn(async move { ex.run_once(now).await.unwrap() }));
    }
    let mut completed = 0;
    for h in handles {
        completed += h.await.unwrap().completed;
    }
    assert_eq!(completed, total_items);
    assert_eq!(app.sim.total_poll_calls(), total_items as u64);
    for card in ["CA1", "CA11", "CB1", "D1C1", "D1C2", "D1C3"] {
        for tt in ["card_status", "data_usage", "package"] {
            assert_eq!(app.sim.poll_calls(card, tt), 1, "{card} {tt}");
        }
    }
    // And 32 claimers on one item at once: one claim, one call.
    let (s, v) = app
        .enqueue(PLATFORM, json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["package"], "reason": "again"}))
        .await;
    assert_eq!(s, 200);
    let id = v["data"]["items"][0]["item_id"].as_i64().unwrap();
    let now = app.clock.now();
    let mut handles = Vec::new();
    for _ in 0..32 {
        let ex = app.executor.clone();
        handles.push(tokio::spawn(async move {
            ex.execute_one(id, now).await.unwrap()
        }));
    }
    let mut done = 0;
    for h in handles {
        if h.await.unwrap() == card_polling::executor::ExecOutcome::Completed {
            done += 1;
        }
    }
    assert_eq!(done, 1);
    assert_eq!(app.sim.poll_calls("CA1", "package"), 2);
    app.assert_invariants().await;
}
