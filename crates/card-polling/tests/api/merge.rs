//! Requirement "同卡同任务类型的唯一活动项与合并".

use serde_json::json;

use super::helpers::*;

#[super::lane]
#[tokio::test]
async fn manual_enqueue_after_an_automatic_trigger_merges_into_the_active_item() {
    let app = spawn_seeded().await;
    app.buy("card", "CA1", "main").await;
    let before = app.item_of("CA1", "card_status").await;
    app.advance(60);
    let (s, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["card_status"], "reason": "customer called"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["data"]["items"][0]["action"], "merged");
    assert_eq!(v["data"]["items"][0]["item_id"], before["id"]);
    let after = app.item_of("CA1", "card_status").await;
    assert_eq!(after["trigger_count"], 2);
    assert_eq!(after["trigger_type"], "purchase_activated");
    assert_eq!(after["last_trigger_type"], "manual_trigger");
    assert_ne!(after["last_triggered_at"], before["last_triggered_at"]);
    let sources = after["trigger_sources"].as_array().unwrap();
    assert_eq!(sources.len(), 2, "{sources:?}");
    assert!(sources.iter().any(|s| s == "manual:plat"));
    assert_eq!(app.list("iccid=CA1&task_type=card_status").await.len(), 1);
    app.run_executor().await;
    assert_eq!(
        app.sim.poll_calls("CA1", "card_status"),
        1,
        "one upstream call"
    );
    let kinds = app.audit_kinds(after["id"].as_i64().unwrap()).await;
    assert_eq!(kinds[..2], ["enqueue", "merge"]);
    app.assert_invariants().await;
}

#[super::lane]
#[tokio::test]
async fn replayed_trigger_event_merges_and_adds_nothing() {
    let app = spawn_seeded().await;
    let body = json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["package"],
                      "reason": "sync", "event_id": "ticket-42"});
    let (s, first) = app.enqueue(PLATFORM, body.clone()).await;
    assert_eq!(s, 200);
    assert_eq!(first["data"]["items"][0]["action"], "created");
    let (s, again) = app.enqueue(PLATFORM, body).await;
    assert_eq!(s, 200);
    assert_eq!(again["data"]["items"][0]["action"], "replayed");
    let item = app.item_of("CA1", "package").await;
    assert_eq!(item["trigger_count"], 1);
    assert_eq!(item["trigger_sources"].as_array().unwrap().len(), 1);
    assert_eq!(app.list("iccid=CA1").await.len(), 1);
    let kinds = app.audit_kinds(item["id"].as_i64().unwrap()).await;
    assert_eq!(
        kinds,
        ["enqueue", "merge"],
        "the replay is audited, nothing else changes"
    );
    app.assert_invariants().await;
}

#[super::lane]
#[tokio::test]
async fn active_item_of_one_task_type_leaves_other_task_types_of_the_card_alone() {
    let app = spawn_seeded().await;
    let (s, _) = app
        .enqueue(PLATFORM, json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["card_status"], "reason": "r"}))
        .await;
    assert_eq!(s, 200);
    // Another task type of the same card is a separate item, created (not merged) and run on its own.
    let (s, v) = app
        .enqueue(PLATFORM, json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["data_usage"], "reason": "r"}))
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["data"]["items"][0]["action"], "created");
    // Hold card_status as running (claimed elsewhere); data_usage still executes.
    let cs = app.item_of("CA1", "card_status").await["id"]
        .as_i64()
        .unwrap();
    let now = rakuten_types::Clock::now(&app.clock);
    app.store
        .item_claim(cs, "someone-else", now, card_polling::priority::CLAIM_LEASE)
        .await
        .unwrap()
        .expect("claimed");
    let report = app.run_executor().await;
    assert_eq!(report.completed, 1);
    assert_eq!(app.sim.poll_calls("CA1", "data_usage"), 1);
    assert_eq!(app.sim.poll_calls("CA1", "card_status"), 0);
    assert_eq!(app.item_of("CA1", "card_status").await["status"], "running");
}
