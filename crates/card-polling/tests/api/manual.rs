//! Requirement "人工优先入队不受人工触发防滥用配额约束" and manual enqueue permissions.

use serde_json::{Value, json};

use super::helpers::*;

#[super::lane]
#[tokio::test]
async fn manual_enqueue_succeeds_after_the_daily_manual_trigger_quota_is_used_up() {
    let app = spawn_with(Backend::Memory, |s| s.manual_daily_quota = 2).await;
    app.seed().await;
    // Use agent A's daily manual trigger quota up first.
    for (iccid, expected) in [("CA1", 200), ("CA11", 200), ("D1C1", 429)] {
        let (s, v) = app
            .post(
                "/api/manual-triggers",
                AGENT_A,
                json!({"iccid": iccid, "task_types": ["card_status"]}),
            )
            .await;
        assert_eq!(s, expected, "{iccid}: {v}");
    }
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

#[super::lane]
#[tokio::test]
async fn the_same_task_type_twice_in_one_enqueue_counts_once_with_one_audit_fact() {
    // Only adjacent repeats were folded.
    let app = spawn_seeded().await;
    let (s, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["card_status", "package", "card_status"], "reason": "twice"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let out = v["data"]["items"].as_array().unwrap();
    assert_eq!(out.len(), 2, "{v}");
    let item = app.item_of("CA1", "card_status").await;
    assert_eq!(item["trigger_count"], 1, "{item}");
    assert_eq!(app.audit_kinds(id_of(&item)).await, ["enqueue"]);
}

#[super::lane]
#[tokio::test]
async fn reading_items_needs_the_permission_that_enqueueing_needs() {
    // D-access-one-rule: an account without the manual trigger permission could
    // read every item in its scope.
    let app = spawn_seeded().await;
    let token = "tok-platform-notrigger-1";
    app.post_ok(
        "/api/admin/import",
        ADMIN,
        json!({"accounts": [{"id": "plat-notrigger", "role": "platform", "token": token, "perm_manual_trigger": false}]}),
    )
    .await;
    let (s, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["card_status"], "reason": "r"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let id = v["data"]["items"][0]["item_id"].as_i64().unwrap();
    let body = json!({"asset_type": "card", "asset_id": "CA1", "reason": "r"});
    assert_eq!(app.enqueue(token, body).await.0, 403);
    assert_eq!(app.get("/api/priority-items", token).await.0, 403);
    assert_eq!(app.get(&format!("/api/priority-items/{id}"), token).await.0, 403);
    assert_eq!(app.get("/api/priority-items", PLATFORM).await.0, 200);
}

#[super::lane]
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

#[super::lane]
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

/// Regression: an unknown `asset_id` answered 1005, the generic code of unknown routes too; it is
/// now 404 code 7006, the same for a missing and an out-of-scope asset, card or device.
#[super::lane]
#[tokio::test]
async fn manual_enqueue_of_an_unknown_asset_answers_code_7006() {
    let app = spawn_seeded().await;
    for (token, body) in [
        (PLATFORM, json!({"asset_type": "card", "asset_id": "NOPE", "reason": "r"})),
        (PLATFORM, json!({"asset_type": "device", "asset_id": "NODEV", "reason": "r"})),
        (AGENT_A, json!({"asset_type": "card", "asset_id": "CB1", "reason": "r"})),
    ] {
        let (s, v) = app.enqueue(token, body.clone()).await;
        assert_eq!(s, 404, "{body}: {v}");
        assert_eq!(v["code"].as_i64(), Some(7006), "{body}: {v}");
        assert_eq!(v["success"], json!(false), "{v}");
        assert_eq!(v["msg"], json!("asset not found"), "{v}");
    }
}

/// A binding may join a card and a device of different shops, and
/// an agent enqueuing such a device created an item for the other shop's card, which it could then
/// neither enqueue directly nor read. A device's enqueue now reaches only the cards in the
/// caller's shops; a device whose bound cards are all outside them is a 409.
#[super::lane]
#[tokio::test]
async fn an_agent_enqueuing_a_device_reaches_only_the_cards_of_its_shops() {
    let app = spawn_seeded().await;
    app.post_ok(
        "/api/admin/import",
        ADMIN,
        json!({
            "cards": [{"iccid": "CB2", "shop_id": "B"}],
            "devices": [{"device_no": "DEV2", "shop_id": "A1"}],
            "bindings": [{"device_no": "DEV1", "iccid": "CB1"}, {"device_no": "DEV2", "iccid": "CB2"}]
        }),
    )
    .await;
    let body = |device: &str| json!({"asset_type": "device", "asset_id": device, "task_types": ["card_status"], "reason": "r"});
    let cards = |v: &Value| -> Vec<String> {
        let mut c: Vec<String> = v["data"]["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|i| i["iccid"].as_str().expect("iccid").to_owned())
            .collect();
        c.sort();
        c
    };
    let (s, v) = app.enqueue(AGENT_A1, body("DEV1")).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(cards(&v), ["D1C1", "D1C2", "D1C3"], "{v}");
    let (s, v) = app.enqueue(AGENT_A1, body("DEV2")).await;
    assert_eq!(s, 409, "{v}");
    assert_eq!(
        v["msg"],
        "none of the device's actively bound cards is in the caller's shops",
        "{v}"
    );
    // Nothing of shop B was enqueued by the agent of A1.
    assert_eq!(app.active_count().await, 3);
    // Whoever sees every shop reaches every bound card.
    let (s, v) = app.enqueue(PLATFORM, body("DEV1")).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(cards(&v), ["CB1", "D1C1", "D1C2", "D1C3"], "{v}");
    // The agent of B cannot reach shop A1's device at all.
    assert_eq!(app.enqueue(AGENT_B, body("DEV1")).await.0, 404);
}
