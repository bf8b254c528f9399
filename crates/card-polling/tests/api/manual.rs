//! Requirement "人工优先入队不受人工触发防滥用配额约束" and manual enqueue permissions.

use serde_json::json;

use super::helpers::*;

#[tokio::test]
async fn manual_enqueue_succeeds_after_the_daily_manual_trigger_quota_is_used_up() {
    let app = spawn_seeded().await;
    // Far more calls in one day than any daily manual trigger quota: every one is accepted,
    // merged into the one active item, and audited.
    let calls = 60;
    for n in 0..calls {
        let (s, v) = app
            .enqueue(
                AGENT_A,
                json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["card_status"], "reason": format!("call {n}")}),
            )
            .await;
        assert_eq!(s, 200, "call {n}: {v}");
        app.advance(60);
    }
    let item = app.item_of("CA1", "card_status").await;
    assert_eq!(item["trigger_count"], calls);
    let d = app.detail(item["id"].as_i64().unwrap()).await;
    let manual_facts = d["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["operator"] == "agent-a" && (e["kind"] == "enqueue" || e["kind"] == "merge"))
        .count();
    assert_eq!(manual_facts, calls as usize);
}

#[tokio::test]
async fn repeated_manual_enqueue_within_24h_merges_and_audits_each_call() {
    let app = spawn_seeded().await;
    let body = |reason: &str| json!({"asset_type": "device", "asset_id": "DEV1", "task_types": ["package"], "reason": reason});
    let (s, first) = app.enqueue(PLATFORM, body("first")).await;
    assert_eq!(s, 200);
    assert!(
        first["data"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["action"] == "created")
    );
    app.advance(2 * 3600);
    let (s, second) = app.enqueue(PLATFORM, body("second")).await;
    assert_eq!(s, 200, "not refused within 24 h");
    assert!(
        second["data"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["action"] == "merged")
    );
    assert_eq!(app.active_count().await, 3);
    let item = app.item_of("D1C1", "package").await;
    let d = app.detail(item["id"].as_i64().unwrap()).await;
    let facts: Vec<_> = d["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap().to_owned(),
                e["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        facts,
        [
            ("enqueue".to_owned(), "first".to_owned()),
            ("merge".to_owned(), "second".to_owned())
        ]
    );
}

#[tokio::test]
async fn agent_enqueues_only_within_its_shop_tree_and_reason_is_required() {
    let app = spawn_seeded().await;
    // DEV1 lives in A1, a child of A.
    let (s, v) = app
        .enqueue(
            AGENT_A,
            json!({"asset_type": "device", "asset_id": "DEV1", "reason": "r"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["data"]["items"].as_array().unwrap().len(), 9);
    let (s_out, out) = app
        .enqueue(
            AGENT_A,
            json!({"asset_type": "card", "asset_id": "CB1", "reason": "r"}),
        )
        .await;
    let (s_missing, missing) = app
        .enqueue(
            AGENT_A,
            json!({"asset_type": "card", "asset_id": "NOPE", "reason": "r"}),
        )
        .await;
    assert_eq!((s_out, s_missing), (404, 404));
    assert_eq!(out, missing, "out of scope and missing answer alike");
    let (s, v) = app
        .enqueue(PLATFORM, json!({"asset_type": "card", "asset_id": "CA1"}))
        .await;
    assert_eq!((s, v["code"].as_i64()), (422, Some(1003)));
    let (s, _) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CA1", "reason": "r", "task_types": ["sms"]}),
        )
        .await;
    assert_eq!(s, 422, "task type outside the configured range");
}
