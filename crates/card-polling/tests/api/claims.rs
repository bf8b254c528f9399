//! Requirement "优先项认领、租约与执行前校验".

use std::time::Duration;

use serde_json::json;

use card_polling::executor::ExecOutcome;
use card_polling::priority::CLAIM_LEASE;
use card_polling::store::{Finish, NewLog, StoreError};
use rakuten_types::Clock;

use super::helpers::*;

async fn one_item(app: &TestApp, iccid: &str, task_type: &str) -> i64 {
    let (s, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": iccid, "task_types": [task_type], "reason": "test"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    v["data"]["items"][0]["item_id"].as_i64().unwrap()
}

#[super::lane]
#[tokio::test]
async fn two_concurrent_executions_claim_once_and_call_upstream_once() {
    let app = spawn_seeded().await;
    let id = one_item(&app, "CA1", "card_status").await;
    app.sim.set_latency(Duration::from_millis(50));
    let now = app.clock.now();
    let (a, b) = tokio::join!(
        app.executor.execute_one(id, now),
        app.executor.execute_one(id, now)
    );
    let mut outcomes = [a.unwrap(), b.unwrap()];
    outcomes.sort_by_key(|o| format!("{o:?}"));
    assert_eq!(outcomes, [ExecOutcome::Completed, ExecOutcome::Skipped]);
    assert_eq!(app.sim.poll_calls("CA1", "card_status"), 1);
}

#[super::lane]
#[tokio::test]
async fn crashed_claimer_is_taken_over_after_the_claim_lease() {
    let app = spawn_seeded().await;
    let id = one_item(&app, "CA1", "card_status").await;
    // A claimer takes the item and dies without a word.
    let crashed = app
        .store
        .item_claim(id, "crashed-claimer", app.clock.now(), CLAIM_LEASE)
        .await
        .unwrap()
        .expect("claim");
    assert!(!crashed.took_over);
    app.advance(89);
    assert_eq!(app.run_executor().await.due, 0, "lease still held");
    app.advance(1);
    let report = app.run_executor().await;
    assert_eq!(report.completed, 1, "{report:?}");
    assert_eq!(app.sim.poll_calls("CA1", "card_status"), 1);
    let detail = app.detail(id).await;
    assert_eq!(detail["item"]["status"], "completed");
    let claims: Vec<_> = detail["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "claim")
        .map(|e| e["result"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(claims, ["claimed", "taken_over_after_lease"]);
    app.assert_invariants().await;
}

#[super::lane]
#[tokio::test]
async fn late_finisher_after_takeover_gets_a_claim_conflict() {
    let app = spawn_seeded().await;
    let id = one_item(&app, "CA1", "data_usage").await;
    let slow = app
        .store
        .item_claim(id, "slow-claimer", app.clock.now(), CLAIM_LEASE)
        .await
        .unwrap()
        .unwrap();
    let slow = app
        .store
        .item_begin_attempt(&slow, app.clock.now())
        .await
        .unwrap();
    app.advance(91);
    app.run_executor().await;
    let late = app
        .store
        .item_finish(
            &slow,
            &Finish::Completed {
                result: "ok".into(),
            },
            &[NewLog {
                operation: "poll".into(),
                request_summary: "poll data_usage iccid=CA1".into(),
                response_summary: "data_usage ok (late)".into(),
                latency_ms: 95_000,
                outcome: "ok".into(),
            }],
            app.clock.now(),
        )
        .await;
    assert!(matches!(late, Err(StoreError::ClaimLost)), "{late:?}");
    let d = app.detail(id).await;
    let logs = d["logs"].as_array().unwrap();
    assert_eq!(logs.len(), 2, "the late call is still logged: {logs:?}");
    assert_eq!(
        d["item"]["last_log_id"], logs[0]["id"],
        "the late finisher changes nothing else"
    );
    let item = d["item"].clone();
    assert_eq!(item["status"], "completed");
    assert_eq!(
        item["attempts"], 2,
        "the slow attempt and the takeover's attempt both count"
    );
    app.assert_invariants().await;
}

#[super::lane]
#[tokio::test]
async fn card_or_device_polling_switched_off_fails_without_upstream_call() {
    let app = spawn_seeded().await;
    let card_item = one_item(&app, "CA1", "card_status").await;
    let (s, _) = app
        .enqueue(PLATFORM, json!({"asset_type": "device", "asset_id": "DEV1", "task_types": ["card_status"], "reason": "t"}))
        .await;
    assert_eq!(s, 200);
    let (s, v) = app
        .put(
            "/api/cards/CA1/polling",
            PLATFORM,
            json!({"enabled": false}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let (s, _) = app
        .put(
            "/api/devices/DEV1/polling",
            PLATFORM,
            json!({"enabled": false}),
        )
        .await;
    assert_eq!(s, 200);
    let report = app.run_executor().await;
    assert_eq!(report.failed, 4);
    assert_eq!(app.sim.total_poll_calls(), 0);
    let item = app.detail(card_item).await["item"].clone();
    assert_eq!(item["status"], "failed");
    assert_eq!(item["failure_reason"], "card polling is switched off");
    assert_eq!(item["attempts"], 0);
    assert!(item["dequeued_at"].is_string());
    let dev = app.item_of("D1C2", "card_status").await;
    assert_eq!(
        dev["failure_reason"],
        "bound device polling is switched off"
    );
    app.assert_invariants().await;
}

#[super::lane]
#[tokio::test]
async fn takeover_after_a_crash_during_the_last_attempt_fails_without_a_fourth_call() {
    let app = spawn_seeded().await;
    let id = one_item(&app, "CA1", "package").await;
    app.sim
        .set_behavior("CA1", card_polling::upstream::SimBehavior::Fail);
    app.run_executor().await;
    app.advance(1800);
    app.run_executor().await;
    assert_eq!(app.detail(id).await["item"]["attempts"], 2);
    app.advance(1800);
    // A claimer counts the third attempt, then dies before finishing.
    let dying = app
        .store
        .item_claim(id, "dying", app.clock.now(), CLAIM_LEASE)
        .await
        .unwrap()
        .unwrap();
    app.store
        .item_begin_attempt(&dying, app.clock.now())
        .await
        .unwrap();
    app.advance(90);
    let report = app.run_executor().await;
    assert_eq!(report.failed, 1, "{report:?}");
    let item = app.detail(id).await["item"].clone();
    assert_eq!(item["status"], "failed");
    assert_eq!(item["attempts"], 3);
    assert_eq!(item["failure_reason"], "maximum attempts reached");
    assert_eq!(app.sim.poll_calls("CA1", "package"), 2, "no fourth call");
    app.assert_invariants().await;
}

#[super::lane]
#[tokio::test]
async fn a_priority_entry_whose_claim_is_refused_is_not_counted_as_executed() {
    // `executed_priority` in `/health` counted every priority queue entry
    // run, including entries whose item another instance had claimed (61 against 28 claims).
    let app = spawn_seeded().await;
    let (s, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["card_status"], "reason": "count"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let id = v["data"]["items"][0]["item_id"].as_i64().unwrap();
    app.store
        .item_claim(id, "held-elsewhere", app.clock.now(), CLAIM_LEASE)
        .await
        .unwrap()
        .expect("claim");
    let pool = app.scheduler.pool();
    assert_eq!(pool.enqueue_priority("card_status", &[id]), 1);
    pool.drain().await.unwrap();
    let executed = || {
        pool.depths()
            .iter()
            .find(|d| d.task_type == "card_status")
            .unwrap()
            .executed_priority
    };
    assert_eq!(executed(), 0, "the claim was refused: nothing ran");
    // Once the holder's lease lapses, the next entry takes the item over and runs it: counted.
    app.advance(CLAIM_LEASE.as_secs() + 1);
    assert_eq!(pool.enqueue_priority("card_status", &[id]), 1);
    pool.drain().await.unwrap();
    assert_eq!(executed(), 1);
    assert_eq!(app.detail(id).await["item"]["status"], "completed");
}
