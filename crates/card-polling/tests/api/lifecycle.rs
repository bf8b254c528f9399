//! Requirement "优先项尝试次数与出队" and "与运营商通道阈值停机的边界".

use std::time::Duration;

use serde_json::json;

use card_polling::priority::CLAIM_LEASE;
use card_polling::store::{Finish, StoreError};
use card_polling::upstream::SimBehavior;
use rakuten_types::{Clock, Timestamp};

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

/// Runs rounds 300 s apart (card_status's normal interval) until the item is terminal.
async fn drive_to_failure(app: &TestApp, id: i64) {
    for _ in 0..3 {
        app.run_executor().await;
        app.advance(300);
    }
    assert_eq!(app.detail(id).await["item"]["status"], "failed");
}

#[super::lane]
#[tokio::test]
async fn recoverable_failure_below_the_limit_returns_to_pending_after_the_normal_interval() {
    let app = spawn_seeded().await;
    let id = one_item(&app, "CA1", "card_status").await;
    app.sim
        .script("CA1", &[SimBehavior::Fail, SimBehavior::Invalid]);
    let t0 = app.clock.now();
    assert_eq!(app.run_executor().await.retried, 1);
    let item = app.detail(id).await["item"].clone();
    assert_eq!(item["status"], "pending");
    assert_eq!(item["attempts"], 1);
    assert_eq!(
        item["failure_reason"],
        "carrier call failed: carrier error 503"
    );
    let next = t0.plus(Duration::from_secs(300));
    assert_eq!(item["next_run_at"], next.to_rfc3339());
    app.advance(299);
    assert_eq!(
        app.run_executor().await.due,
        0,
        "not before the normal interval"
    );
    app.advance(1);
    assert_eq!(app.run_executor().await.retried, 1);
    assert_eq!(app.detail(id).await["item"]["attempts"], 2);
    app.advance(300);
    assert_eq!(app.run_executor().await.completed, 1);
    assert_eq!(app.sim.poll_calls("CA1", "card_status"), 3);
}

#[super::lane]
#[tokio::test]
async fn reaching_max_attempts_fails_with_a_safe_reason() {
    let app = spawn_seeded().await;
    let id = one_item(&app, "CA1", "card_status").await;
    app.sim.set_behavior("CA1", SimBehavior::Timeout);
    drive_to_failure(&app, id).await;
    let d = app.detail(id).await;
    let item = &d["item"];
    assert_eq!(item["attempts"], 3);
    assert_eq!(item["max_attempts"], 3);
    assert_eq!(
        item["failure_reason"],
        "maximum attempts reached; last error: carrier call timed out"
    );
    assert!(item["dequeued_at"].is_string());
    app.advance(3600);
    app.run_executor().await;
    assert_eq!(
        app.sim.poll_calls("CA1", "card_status"),
        3,
        "dequeued: no more calls"
    );
    let kinds: Vec<_> = d["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.iter().filter(|k| **k == "failure").count(), 3);
    assert_eq!(kinds.iter().filter(|k| **k == "retry").count(), 2);
    assert_eq!(kinds.last(), Some(&"fail_dequeue"));
    app.assert_invariants().await;
}

#[super::lane]
#[tokio::test]
async fn missing_card_fails_at_once_without_retry_or_upstream_call() {
    let app = spawn_seeded().await;
    let id = one_item(&app, "CA1", "package").await;
    let (s, v) = app
        .send(
            reqwest::Method::DELETE,
            "/api/cards/CA1",
            Some(PLATFORM),
            None,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(app.run_executor().await.failed, 1);
    let item = app.detail(id).await["item"].clone();
    assert_eq!(item["status"], "failed");
    assert_eq!(item["failure_reason"], "card no longer exists");
    assert_eq!(item["attempts"], 0);
    assert_eq!(app.sim.total_poll_calls(), 0);
    app.advance(3600);
    assert_eq!(app.run_executor().await.due, 0, "no retry");
}

#[super::lane]
#[tokio::test]
async fn successful_execution_completes_and_dequeues() {
    let app = spawn_seeded().await;
    let id = one_item(&app, "CA1", "data_usage").await;
    assert_eq!(app.run_executor().await.completed, 1);
    let item = app.detail(id).await["item"].clone();
    assert_eq!(item["status"], "completed");
    assert_eq!(item["result"], "ok");
    assert_eq!(item["attempts"], 1);
    assert!(item["dequeued_at"].is_string());
    assert!(item["next_run_at"].is_null());
    assert!(item["failure_reason"].is_null());
    // The card itself stays in polling: a later demand gets a fresh item.
    let again = one_item(&app, "CA1", "data_usage").await;
    assert_ne!(again, id);
}

#[super::lane]
#[tokio::test]
async fn manual_close_with_reason_dequeues_and_audits() {
    let app = spawn_seeded().await;
    let pending = one_item(&app, "CA1", "card_status").await;
    let running = one_item(&app, "CA1", "data_usage").await;
    let holder = app
        .store
        .item_claim(running, "holder", app.clock.now(), CLAIM_LEASE)
        .await
        .unwrap()
        .unwrap();
    let path = |id: i64| format!("/api/priority-items/{id}/close");
    // Refusals: no reason, agent, platform without card data permission, enterprise.
    let (s, v) = app.post(&path(pending), PLATFORM, json!({})).await;
    assert_eq!((s, v["code"].as_i64()), (422, Some(1003)), "{v}");
    for tok in [AGENT_A, PLATFORM_NO_DATA, ENTERPRISE] {
        let (s, _) = app.post(&path(pending), tok, json!({"reason": "x"})).await;
        assert_eq!(s, 403);
    }
    for id in [pending, running] {
        let (s, v) = app
            .post(&path(id), PLATFORM, json!({"reason": "duplicate demand"}))
            .await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["data"]["status"], "closed");
    }
    let (s, v) = app
        .post(&path(pending), ADMIN, json!({"reason": "again"}))
        .await;
    assert_eq!((s, v["code"].as_i64()), (409, Some(7002)));
    // The holder of the closed running item cannot finish it; nothing reaches the carrier.
    let late = app
        .store
        .item_finish(
            &holder,
            &Finish::Completed {
                result: "ok".into(),
            },
            &[],
            app.clock.now(),
        )
        .await;
    assert!(matches!(late, Err(StoreError::ClaimLost)));
    app.advance(600);
    assert_eq!(app.run_executor().await.due, 0);
    assert_eq!(app.sim.total_poll_calls(), 0);
    let d = app.detail(pending).await;
    assert_eq!(d["item"]["status"], "closed");
    assert_eq!(d["item"]["closed_by"], "plat");
    assert_eq!(d["item"]["close_reason"], "duplicate demand");
    let close = d["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "close")
        .unwrap()
        .clone();
    assert_eq!(close["operator"], "plat");
    assert_eq!(close["reason"], "duplicate demand");
    // Closing keeps earlier results and failure reasons.
    let retrying = one_item(&app, "CB1", "package").await;
    app.sim.script("CB1", &[SimBehavior::Fail]);
    app.run_executor().await;
    let (s, _) = app
        .post(
            &path(retrying),
            PLATFORM,
            json!({"reason": "carrier outage"}),
        )
        .await;
    assert_eq!(s, 200);
    let item = app.detail(retrying).await["item"].clone();
    assert_eq!(item["status"], "closed");
    assert_eq!(item["attempts"], 1);
    assert_eq!(
        item["failure_reason"],
        "carrier call failed: carrier error 503"
    );
    assert!(item["last_log_id"].is_i64());
    app.assert_invariants().await;
}

#[super::lane]
#[tokio::test]
async fn item_past_validity_is_expired_by_the_job_not_by_reads() {
    let app = spawn_seeded().await;
    let id = one_item(&app, "CA1", "card_status").await;
    app.sim.script("CA1", &[SimBehavior::Fail]);
    app.run_executor().await;
    app.sim.set_behavior("CA1", SimBehavior::Timeout);
    app.advance(24 * 3600 - 1);
    assert_eq!(app.expiry.run_once(app.clock.now()).await.unwrap(), 0);
    app.advance(1);
    // Reads never expire anything.
    let read = app.detail(id).await["item"].clone();
    assert_eq!(read["status"], "pending");
    assert_eq!(app.expiry.run_once(app.clock.now()).await.unwrap(), 1);
    let item = app.detail(id).await["item"].clone();
    assert_eq!(item["status"], "expired");
    assert_eq!(item["trigger_type"], "manual_trigger");
    assert_eq!(item["attempts"], 1);
    assert_eq!(
        item["failure_reason"],
        "carrier call failed: carrier error 503"
    );
    assert_eq!(item["dequeued_at"], app.clock.now().to_rfc3339());
    assert_eq!(item["valid_until"], app.clock.now().to_rfc3339());
    let calls = app.sim.total_poll_calls();
    app.run_executor().await;
    assert_eq!(
        app.sim.total_poll_calls(),
        calls,
        "no call for an expired item"
    );
    assert_eq!(
        app.audit_kinds(id).await.last().map(String::as_str),
        Some("expire")
    );
    app.assert_invariants().await;
}

#[super::lane]
#[tokio::test]
async fn an_item_past_its_validity_is_expired_at_claim_when_the_job_has_not_run() {
    // An item 10 s past `valid_until` ended `completed` when the expiry job
    // had not run yet.
    let app = spawn_seeded().await;
    let id = one_item(&app, "CA1", "card_status").await;
    app.advance(24 * 3600 + 10);
    let calls = app.sim.total_poll_calls();
    let report = app.run_executor().await;
    assert_eq!(report.completed, 0, "{report:?}");
    assert_eq!(app.sim.total_poll_calls(), calls, "no upstream call");
    let item = app.detail(id).await["item"].clone();
    assert_eq!(item["status"], "expired", "{item}");
    assert_eq!(item["dequeued_at"], app.clock.now().to_rfc3339());
    assert_eq!(
        app.audit_kinds(id).await,
        ["enqueue", "expire"],
        "expired with its audit fact, never claimed"
    );
    let events = app.detail(id).await["events"].clone();
    assert_eq!(events[1]["result"], "validity period passed");
    // An item still within its validity is claimed and runs as before.
    let fresh = one_item(&app, "CB1", "card_status").await;
    app.run_executor().await;
    assert_eq!(app.detail(fresh).await["item"]["status"], "completed");
    app.assert_invariants().await;
}

/// The log lines this thread emits while it is held (a `current_thread` test: the store's work
/// runs on it).
#[derive(Clone, Default)]
struct CapturedLogs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for CapturedLogs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for CapturedLogs {
    type Writer = CapturedLogs;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl CapturedLogs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}

#[super::lane]
#[tokio::test]
async fn an_undecodable_item_is_set_aside_as_failed_and_everything_else_keeps_flowing() {
    // One poison row (a bad manual edit, a disk fault) failed every list.
    let logs = CapturedLogs::default();
    let _logging = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_writer(logs.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::WARN)
            .finish(),
    );
    let app = spawn_seeded().await;
    let good = one_item(&app, "CA1", "card_status").await;
    sqlx::query(
        "INSERT INTO priority_items (iccid, task_type, asset_type, asset_id, shop_id, status, trigger_type, \
           last_trigger_type, trigger_count, enqueued_at, last_triggered_at, attempts, max_attempts, next_run_at) \
         VALUES ('CB1', 'card_status', 'card', 'CB1', 'B', 'pending', 'manual_trigger', 'not-a-trigger', 1, $1, $1, 0, 3, $1)",
    )
    .bind(app.clock.now().to_rfc3339())
    .execute(app.db.fixture_pool())
    .await
    .unwrap();
    let reason = "undecodable row: stored value of last_trigger_type is invalid";
    // Lists and the detail show it instead of failing whole.
    let items = app.list("").await;
    assert_eq!(items.len(), 2, "{items:?}");
    let poison = items.iter().find(|i| i["iccid"] == "CB1").expect("listed");
    assert_eq!(poison["failure_reason"], reason, "{poison}");
    let pid = id_of(poison);
    assert_eq!(app.detail(pid).await["item"]["status"], "pending");
    // The executor sets it aside and runs everything else.
    let report = app.run_executor().await;
    assert_eq!(report.completed, 1, "{report:?}");
    assert_eq!(app.sim.poll_calls_for_card("CB1"), 0, "never executed");
    assert_eq!(app.detail(good).await["item"]["status"], "completed");
    let p = app.detail(pid).await["item"].clone();
    assert_eq!(p["status"], "failed", "{p}");
    assert_eq!(p["result"], "undecodable row");
    assert_eq!(p["failure_reason"], reason);
    assert!(p["dequeued_at"].is_string(), "{p}");
    assert_eq!(app.audit_kinds(pid).await, ["fail_dequeue"]);
    assert_eq!(app.run_executor().await.due, 0, "nothing left to claim");
    // Counted where the operator looks (the error log line is in `store/sql/mod.rs`, `item_claim`).
    let (s, m) = app.raw(reqwest::Method::GET, "/metrics", Some(ADMIN)).await;
    assert_eq!(s, 200);
    assert!(m.contains("cardpoll_items_set_aside_total 1"), "{m}");
    let text = logs.text();
    let line = text
        .lines()
        .find(|l| l.contains("set aside as failed"))
        .unwrap_or_else(|| panic!("no set-aside line in {text}"));
    assert!(line.contains("ERROR"), "{line}");
    assert!(line.contains(&format!("item={pid}")), "{line}");
}

#[super::lane]
#[tokio::test]
async fn items_enqueued_before_the_feature_went_live_count_from_go_live() {
    let app = spawn_seeded().await;
    // A legacy row written before the migration's go-live instant (fixture in any state).
    let old = app
        .clock
        .now()
        .minus(Duration::from_secs(10 * 86_400))
        .to_rfc3339();
    sqlx::query(
        "INSERT INTO priority_items (iccid, task_type, asset_type, asset_id, shop_id, status, trigger_type, \
           last_trigger_type, trigger_count, enqueued_at, last_triggered_at, attempts, max_attempts, next_run_at) \
         VALUES ('CA1', 'package', 'card', 'CA1', 'A', 'pending', 'purchase_activated', 'purchase_activated', 1, $1, $1, 0, 3, $2)",
    )
    .bind(&old)
    .bind(Timestamp::from_millis(i64::MAX / 4).to_rfc3339())
    .execute(app.db.fixture_pool())
    .await
    .unwrap();
    assert_eq!(
        app.expiry.run_once(app.clock.now()).await.unwrap(),
        0,
        "not mass-expired at go-live"
    );
    app.advance(24 * 3600 - 1);
    assert_eq!(app.expiry.run_once(app.clock.now()).await.unwrap(), 0);
    app.advance(1);
    assert_eq!(app.expiry.run_once(app.clock.now()).await.unwrap(), 1);
    assert_eq!(app.item_of("CA1", "package").await["status"], "expired");
}

#[super::lane]
#[tokio::test]
async fn failed_or_expired_item_retrigger_creates_a_new_active_item_with_zero_attempts() {
    let app = spawn_seeded().await;
    let failed = one_item(&app, "CA1", "card_status").await;
    app.sim.set_behavior("CA1", SimBehavior::Timeout);
    drive_to_failure(&app, failed).await;
    let path = format!("/api/priority-items/{failed}/retrigger");
    let (s, _) = app.post(&path, PLATFORM, json!({})).await;
    assert_eq!(s, 422, "reason required");
    let (s, v) = app
        .post(&path, AGENT_A, json!({"reason": "carrier fixed"}))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["data"]["action"], "created");
    let new_id = v["data"]["item_id"].as_i64().unwrap();
    assert_ne!(new_id, failed);
    let item = app.detail(new_id).await["item"].clone();
    assert_eq!(item["status"], "pending");
    assert_eq!(item["attempts"], 0);
    assert_eq!(item["operator"], "agent-a");
    assert_eq!(item["reason"], "carrier fixed");
    assert_eq!(item["retriggered_from"], failed);
    assert_eq!(item["trigger_type"], "manual_trigger");
    assert_eq!(app.audit_kinds(new_id).await, ["retrigger"]);
    // The old item keeps its facts; an active item cannot be retriggered.
    assert_eq!(app.detail(failed).await["item"]["status"], "failed");
    let (s, v) = app
        .post(
            &format!("/api/priority-items/{new_id}/retrigger"),
            PLATFORM,
            json!({"reason": "r"}),
        )
        .await;
    assert_eq!((s, v["code"].as_i64()), (409, Some(7002)));
    // An expired item can be retriggered too.
    let expiring = one_item(&app, "CB1", "package").await;
    app.advance(24 * 3600);
    app.expiry.run_once(app.clock.now()).await.unwrap();
    let (s, v) = app
        .post(
            &format!("/api/priority-items/{expiring}/retrigger"),
            PLATFORM,
            json!({"reason": "late"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["data"]["action"], "created");
    // Out of scope for agent B is "not found".
    let (s, v) = app.post(&path, AGENT_B, json!({"reason": "x"})).await;
    assert_eq!((s, v["code"].as_i64()), (404, Some(7001)));
    app.assert_invariants().await;
}

#[super::lane]
#[tokio::test]
async fn retrigger_of_a_stop_locked_card_never_resumes_it() {
    let app = spawn_seeded().await;
    let failed = one_item(&app, "CA1", "card_status").await;
    app.sim.set_behavior("CA1", SimBehavior::Timeout);
    drive_to_failure(&app, failed).await;
    app.put(
        "/api/cards/CA1/stop-lock",
        PLATFORM,
        json!({"locked": true}),
    )
    .await;
    app.sim.set_behavior("CA1", SimBehavior::Suspended);
    let (s, v) = app
        .post(
            &format!("/api/priority-items/{failed}/retrigger"),
            PLATFORM,
            json!({"reason": "retry"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let new_id = v["data"]["item_id"].as_i64().unwrap();
    assert_eq!(app.run_executor().await.completed, 1);
    assert_eq!(
        app.sim.resume_calls("CA1"),
        0,
        "no resume for a locked card"
    );
    let item = app.detail(new_id).await["item"].clone();
    assert_eq!(
        item["result"],
        "ok; resume refused: carrier channel threshold stop lock held"
    );
}

#[super::lane]
#[tokio::test]
async fn stop_locked_card_priority_execution_records_lock_refusal_and_never_resumes() {
    let app = spawn_seeded().await;
    app.put(
        "/api/cards/CA1/stop-lock",
        PLATFORM,
        json!({"locked": true}),
    )
    .await;
    app.sim.set_behavior("CA1", SimBehavior::Suspended);
    app.sim.set_behavior("CB1", SimBehavior::Suspended);
    let locked = one_item(&app, "CA1", "card_status").await;
    let free = one_item(&app, "CB1", "card_status").await;
    assert_eq!(app.run_executor().await.completed, 2);
    assert_eq!(
        app.sim.poll_calls("CA1", "card_status"),
        1,
        "still polled as normal content"
    );
    assert_eq!(app.sim.resume_calls("CA1"), 0);
    assert_eq!(
        app.sim.resume_calls("CB1"),
        1,
        "an unlocked card is resumed as usual"
    );
    let d = app.detail(locked).await;
    assert!(
        d["item"]["result"]
            .as_str()
            .unwrap()
            .contains("resume refused")
    );
    let complete = d["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "complete")
        .unwrap()
        .clone();
    assert!(
        complete["result"]
            .as_str()
            .unwrap()
            .contains("stop lock held")
    );
    assert_eq!(app.detail(free).await["item"]["result"], "ok; card resumed");
}

/// Without a request log a request leaves no trace. Each request is one `info`
/// line with its method, route pattern, status, latency and path parameters — never its token
/// or its query string.
#[super::lane]
#[tokio::test]
async fn every_request_is_one_access_log_line_without_its_token_or_query() {
    let logs = CapturedLogs::default();
    let _logging = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_writer(logs.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .finish(),
    );
    let app = spawn_seeded().await;
    let (s, v) = app.get("/api/priority-items?status=failed", PLATFORM).await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = app.get("/api/priority-items/987654", PLATFORM).await;
    assert_eq!(s, 404, "{v}");
    // The access line is written when the response body has ended, which the client can see
    // first: wait (boundedly) for the second request's line; the checks below say what is missing.
    let _ = test_util::poll_within(std::time::Duration::from_secs(20), async || {
        logs.text().contains("params=id=987654").then_some(()).ok_or(())
    })
    .await;
    let text = logs.text();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" request ") || l.ends_with(" request"))
        .collect();
    assert!(
        lines.iter().any(|l| l.contains("method=GET")
            && l.contains("route=/api/priority-items ")
            && l.contains("status=200")),
        "{text}"
    );
    assert!(
        lines.iter().any(|l| l.contains("route=/api/priority-items/{id}")
            && l.contains("status=404")
            && l.contains("params=id=987654")),
        "{text}"
    );
    assert!(!text.contains(PLATFORM), "the token never reaches the log: {text}");
    assert!(!text.contains("status=failed"), "the query never reaches the log: {text}");
}
