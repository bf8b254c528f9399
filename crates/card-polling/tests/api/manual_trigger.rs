//! The ordinary manual trigger: its own queue, daily quota per operator, 24 h dedupe per card
//! and task type, audit rows; manual priority enqueue stays exempt from both.

use serde_json::json;

use card_polling::hints::ChannelLane;

use super::helpers::*;

async fn trigger(app: &TestApp, token: &str, iccid: &str, tt: &str) -> (u16, serde_json::Value) {
    app.post(
        "/api/manual-triggers",
        token,
        json!({"iccid": iccid, "task_types": [tt]}),
    )
    .await
}

async fn statuses(app: &TestApp) -> Vec<String> {
    sqlx::query_scalar("SELECT status FROM manual_triggers ORDER BY id")
        .fetch_all(app.db.pool())
        .await
        .unwrap()
}

#[super::lane]
#[tokio::test]
async fn manual_trigger_polls_the_card_in_the_next_cycle() {
    let app = spawn_seeded().await;
    let (s, v) = trigger(&app, PLATFORM, "CA1", "data_usage").await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        app.hints
            .depth(ChannelLane::Manual, "data_usage")
            .await
            .unwrap(),
        1
    );
    let r = app.cycle_and_drain().await;
    assert_eq!(r.manual_taken["data_usage"], 1);
    assert_eq!(app.sim.poll_calls("CA1", "data_usage"), 1);
    assert_eq!(statuses(&app).await, ["executed"]);
    assert!(app.list("iccid=CA1").await.is_empty(), "no priority item");
}

#[super::lane]
#[tokio::test]
async fn manual_trigger_refuses_the_same_card_and_task_type_within_24_hours() {
    let app = spawn_seeded().await;
    assert_eq!(trigger(&app, PLATFORM, "CA1", "card_status").await.0, 200);
    let (s, v) = trigger(&app, AGENT_A, "CA1", "card_status").await;
    assert_eq!(s, 409, "{v}");
    assert_eq!(v["code"], 7005);
    assert_eq!(
        trigger(&app, PLATFORM, "CA1", "package").await.0,
        200,
        "other type"
    );
    app.advance(24 * 3600 + 1);
    assert_eq!(trigger(&app, PLATFORM, "CA1", "card_status").await.0, 200);
    assert_eq!(
        statuses(&app).await,
        ["queued", "refused_duplicate", "queued", "queued"],
        "refusals are recorded too"
    );
}

#[super::lane]
#[tokio::test]
async fn manual_trigger_refuses_beyond_the_daily_quota_until_the_next_day() {
    let app = spawn_with(Backend::Memory, |s| s.manual_daily_quota = 2).await;
    app.seed().await;
    assert_eq!(trigger(&app, PLATFORM, "CA1", "card_status").await.0, 200);
    assert_eq!(trigger(&app, PLATFORM, "CA11", "card_status").await.0, 200);
    let (s, v) = trigger(&app, PLATFORM, "CB1", "card_status").await;
    assert_eq!(s, 429, "{v}");
    assert_eq!(v["code"], 7004);
    // The quota is per operator.
    assert_eq!(trigger(&app, ADMIN, "CB1", "card_status").await.0, 200);
    // Manual priority enqueue ignores the quota and the dedupe (it merges instead).
    for _ in 0..2 {
        let (s, v) = app
            .enqueue(
                PLATFORM,
                json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["card_status"], "reason": "urgent"}),
            )
            .await;
        assert_eq!(s, 200, "{v}");
    }
    app.advance(86_400);
    assert_eq!(trigger(&app, PLATFORM, "CB1", "data_usage").await.0, 200);
}

#[super::lane]
#[tokio::test]
async fn manual_trigger_respects_permission_and_scope() {
    let app = spawn_seeded().await;
    assert_eq!(trigger(&app, ENTERPRISE, "CA1", "card_status").await.0, 403);
    let (s, out) = trigger(&app, AGENT_B, "CA1", "card_status").await;
    let (s2, missing) = trigger(&app, AGENT_B, "NOPE", "card_status").await;
    assert_eq!((s, s2), (404, 404));
    assert_eq!(out, missing, "out of scope answers like a missing card");
    assert_eq!(trigger(&app, PLATFORM, "CA1", "bogus").await.0, 422);
}

#[super::lane]
#[tokio::test]
async fn lost_manual_lane_is_recovered_from_the_database() {
    let app = spawn_seeded().await;
    assert_eq!(trigger(&app, PLATFORM, "CA1", "data_usage").await.0, 200);
    app.hints
        .clear(ChannelLane::Manual, "data_usage")
        .await
        .unwrap();
    let r = app.cycle_and_drain().await;
    assert_eq!(
        r.manual_taken["data_usage"], 0,
        "younger than the grace period"
    );
    app.advance(61);
    let r = app.cycle_and_drain().await;
    assert_eq!(r.manual_taken["data_usage"], 1);
    assert_eq!(statuses(&app).await, ["executed"]);
    let r = app.cycle_and_drain().await;
    assert_eq!(r.manual_taken["data_usage"], 0, "executed once");
}

/// Regression: an unknown card answered 1005, the generic code of unknown routes too; it is now
/// 404 code 7006, the same bytes for a missing and an out-of-scope card.
#[super::lane]
#[tokio::test]
async fn manual_trigger_of_an_unknown_card_answers_code_7006() {
    let app = spawn_seeded().await;
    let (s, missing) = trigger(&app, PLATFORM, "NOPE", "card_status").await;
    assert_eq!(s, 404, "{missing}");
    assert_eq!(missing["code"].as_i64(), Some(7006), "{missing}");
    assert_eq!(missing["msg"], json!("card not found"), "{missing}");
    let (s, out) = trigger(&app, AGENT_B, "CA1", "card_status").await;
    assert_eq!(s, 404, "{out}");
    assert_eq!(out, missing, "out of scope answers like a missing card");
    assert!(statuses(&app).await.is_empty(), "nothing recorded");
}

/// D-ordinary-manual-trigger: the quota's 429 did not say when to come back, so a
/// client retried a request that could not pass before the next UTC day. It carries
/// `Retry-After` with the seconds until 00:00 UTC (the test clock stands at 05:00 UTC).
#[super::lane]
#[tokio::test]
async fn the_quota_429_says_in_retry_after_when_the_quota_resets() {
    let app = spawn_with(Backend::Memory, |s| s.manual_daily_quota = 1).await;
    app.seed().await;
    app.advance(5 * 3600);
    assert_eq!(trigger(&app, PLATFORM, "CA1", "card_status").await.0, 200);
    let resp = app
        .client
        .post(format!("{}/api/manual-triggers", app.base))
        .bearer_auth(PLATFORM)
        .json(&json!({"iccid": "CA11", "task_types": ["card_status"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 429);
    let retry_after = resp.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
    let v: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(v["code"], 7004, "{v}");
    assert_eq!(retry_after.as_deref(), Some("68400"), "19 h to midnight UTC: {v}");
    assert!(v["msg"].as_str().unwrap().contains("00:00 UTC"), "{v}");
    // Once that many seconds have passed, the quota has reset.
    app.advance(68_400);
    assert_eq!(trigger(&app, PLATFORM, "CA11", "card_status").await.0, 200);
}
