//! The retention job keeps the tables that are not facts bounded — interaction
//! logs past their retention, done manual triggers — in batches, and never a row of an active
//! item. Priority facts (items, audit facts, trigger events) are kept for good by default
//! ([`retention_keeps_facts_by_default`]); only the operator's `RAKUTEN_POLL_RETENTION_HISTORY_DAYS`
//! (a departure from the spec, D-retention-keeps-facts) deletes those of items that ended before
//! it, and then an item a later retrigger points at is kept until that retrigger goes
//! (D-retrigger-predecessor-kept).

use std::time::Duration;

use serde_json::json;

use card_polling::jobs::retention::PruneReport;
use rakuten_types::Clock;

use super::helpers::*;

const DAY: u64 = 24 * 3600;

fn days_ago(app: &TestApp, days: u64) -> String {
    app.clock
        .now()
        .minus(Duration::from_secs(days * DAY))
        .to_rfc3339()
}

async fn count(app: &TestApp, sql: &'static str, id: Option<i64>) -> i64 {
    let mut q = sqlx::query_scalar::<_, i64>(sql);
    if let Some(id) = id {
        q = q.bind(id);
    }
    q.fetch_one(app.db.pool()).await.unwrap()
}

async fn old_log(app: &TestApp, item_id: Option<i64>, at: &str) {
    sqlx::query(
        "INSERT INTO integration_logs (item_id, iccid, task_type, operation, request_summary, \
           response_summary, latency_ms, outcome, at) VALUES ($1, 'CA1', 'card_status', 'poll', 'r', 's', $2, 'ok', $3)",
    )
    .bind(item_id)
    .bind(5_i64)
    .bind(at)
    .execute(app.db.fixture_pool())
    .await
    .unwrap();
}

async fn old_manual_trigger(app: &TestApp, status: &str, at: &str) {
    let executed = (status == "executed").then_some(at);
    sqlx::query(
        "INSERT INTO manual_triggers (operator, iccid, task_type, requested_at, status, executed_at) \
         VALUES ('plat', 'CA1', 'card_status', $1, $2, $3)",
    )
    .bind(at)
    .bind(status)
    .bind(executed)
    .execute(app.db.fixture_pool())
    .await
    .unwrap();
}

async fn enqueue(app: &TestApp, iccid: &str) -> i64 {
    let (s, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": iccid, "task_types": ["card_status"],
                   "reason": "retention", "event_id": format!("ev-{iccid}")}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    v["data"]["items"][0]["item_id"].as_i64().unwrap()
}

/// A test app whose operator opted into deleting facts 90 days after their item ended.
async fn spawn_deleting_facts(f: impl FnOnce(&mut card_polling::settings::Settings)) -> TestApp {
    let app = spawn_with(Backend::Memory, |s| {
        s.retention_history_days = Some(90);
        f(s);
    })
    .await;
    app.seed().await;
    app
}

const LOGS_OF: &str = "SELECT count(*) FROM integration_logs WHERE item_id = $1";
const FACTS_OF: &str = "SELECT count(*) FROM priority_item_events WHERE item_id = $1";
const EVENTS_OF: &str = "SELECT count(*) FROM priority_trigger_events WHERE item_id = $1";

#[super::lane]
#[tokio::test]
async fn retention_prunes_old_history_but_never_a_row_of_an_active_item() {
    let app = spawn_deleting_facts(|_| {}).await;
    // Item A runs and ends now; item B stays pending.
    let ended = enqueue(&app, "CA1").await;
    app.cycle_and_drain().await;
    assert_eq!(app.detail(ended).await["item"]["status"], "completed");
    let active = enqueue(&app, "CA11").await;
    // B carries rows far older than any retention (an item from before the go-live, say).
    old_log(&app, Some(active), &days_ago(&app, 100)).await;
    sqlx::query(
        "INSERT INTO priority_item_events (item_id, kind, result, at) VALUES ($1, 'merge', 'merged', $2)",
    )
    .bind(active)
    .bind(days_ago(&app, 100))
    .execute(app.db.fixture_pool())
    .await
    .unwrap();
    // An ordinary poll's log 8 days old, done and queued manual triggers 100 days old.
    old_log(&app, None, &days_ago(&app, 8)).await;
    old_manual_trigger(&app, "executed", &days_ago(&app, 100)).await;
    old_manual_trigger(&app, "queued", &days_ago(&app, 100)).await;
    let a_logs = count(&app, LOGS_OF, Some(ended)).await;
    assert!(a_logs >= 1);

    // Now: only the 8-day-old log and the old done trigger are past retention.
    let r = app.retention.run_once(app.clock.now()).await.unwrap();
    assert_eq!(
        r,
        PruneReport {
            interaction_logs: 1,
            audit_facts: 0,
            trigger_events: 0,
            manual_triggers: 1,
            priority_items: 0,
        }
    );
    assert_eq!(count(&app, LOGS_OF, Some(ended)).await, a_logs);
    assert_eq!(count(&app, "SELECT count(*) FROM manual_triggers", None).await, 1);

    // 91 days on: A's logs, audit facts and trigger event go, then A itself; B keeps every row.
    let b_facts = count(&app, FACTS_OF, Some(active)).await;
    let a_facts = count(&app, FACTS_OF, Some(ended)).await;
    app.advance(91 * DAY);
    let r = app.retention.run_once(app.clock.now()).await.unwrap();
    assert_eq!(r.interaction_logs as i64, a_logs, "{r:?}");
    assert_eq!(r.audit_facts as i64, a_facts, "{r:?}");
    assert_eq!(r.trigger_events, 1, "{r:?}");
    assert_eq!(r.manual_triggers, 0, "a queued trigger is still owed its poll");
    assert_eq!(r.priority_items, 1, "{r:?}");
    for sql in [LOGS_OF, FACTS_OF, EVENTS_OF] {
        assert_eq!(count(&app, sql, Some(ended)).await, 0, "{sql}");
    }
    assert_eq!(count(&app, LOGS_OF, Some(active)).await, 1);
    assert_eq!(count(&app, FACTS_OF, Some(active)).await, b_facts);
    assert_eq!(count(&app, EVENTS_OF, Some(active)).await, 1);
    let (s, v) = app
        .get(&format!("/api/priority-items/{ended}"), PLATFORM)
        .await;
    assert_eq!(s, 404, "{v}");
    assert_eq!(app.detail(active).await["item"]["status"], "pending");

    // B ends now (expired): its history is young again, so it stays.
    assert_eq!(app.expiry.run_once(app.clock.now()).await.unwrap(), 1);
    let r = app.retention.run_once(app.clock.now()).await.unwrap();
    assert_eq!(r.audit_facts + r.trigger_events, 0, "{r:?}");
    assert_eq!(count(&app, EVENTS_OF, Some(active)).await, 1);
}

#[super::lane]
#[tokio::test]
async fn retention_deletes_in_batches_and_counts_the_rows_in_metrics() {
    let app = spawn_with(Backend::Memory, |s| s.retention_batch = 2).await;
    app.seed().await;
    let old = days_ago(&app, 30);
    for _ in 0..5 {
        old_log(&app, None, &old).await;
    }
    old_log(&app, None, &days_ago(&app, 6)).await;
    let r = app.retention.run_once(app.clock.now()).await.unwrap();
    assert_eq!(r.interaction_logs, 5, "{r:?}");
    assert_eq!(count(&app, "SELECT count(*) FROM integration_logs", None).await, 1);
    let text = app
        .client
        .get(format!("{}/metrics", app.base))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("cardpoll_pruned_rows_total{table=\"interaction_logs\"} 5"),
        "{text}"
    );
}

#[super::lane]
#[tokio::test]
async fn retention_reports_every_batch_to_its_observer_with_the_rows_it_deleted() {
    // The retention benchmark reads the writer hold from this hook: one call per batch (the
    // last, short one included), in table order, rows summing to the report.
    let app = spawn_deleting_facts(|s| s.retention_batch = 2).await;
    let old = days_ago(&app, 30);
    for _ in 0..5 {
        old_log(&app, None, &old).await;
    }
    let mut seen = Vec::new();
    let r = app
        .retention
        .run_once_observed(app.clock.now(), |table, n, took| {
            assert!(took < Duration::from_secs(60), "{took:?}");
            seen.push((table, n));
        })
        .await
        .unwrap();
    assert_eq!(r.interaction_logs, 5, "{r:?}");
    use card_polling::store::PruneTable::*;
    assert_eq!(
        seen,
        vec![
            (InteractionLogs, 2),
            (InteractionLogs, 2),
            (InteractionLogs, 1),
            (AuditFacts, 0),
            (TriggerEvents, 0),
            (Items, 0),
            (ManualTriggers, 0),
        ]
    );
}

/// A console page as the platform account sees it, signed in now (the test's clock moves past a
/// session's life): `(status, page)`.
async fn console_page(app: &TestApp, path: &str) -> (u16, String) {
    let resp = app
        .client
        .get(format!("{}{path}", app.base))
        .header("cookie", console_cookie(app, PLATFORM).await)
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

/// An item's detail as the API and the console page serve it to the platform account:
/// `(API status, API body, console status, console page)`.
async fn read_both_ways(app: &TestApp, id: i64) -> (u16, serde_json::Value, u16, String) {
    let (s, v) = app.get(&format!("/api/priority-items/{id}"), PLATFORM).await;
    let (cs, page) = console_page(app, &format!("/console/items/{id}")).await;
    (s, v, cs, page)
}

/// D-retrigger-predecessor-kept: `retriggered_from` always names an item that exists. A retrigger's predecessor
/// that ended long past the history retention loses its audit trail but stays, so the retrigger
/// reads over HTTP and on the console with a working link to it; once the retrigger itself ends
/// and passes the retention it goes, and the predecessor follows in the next run. The items page
/// renders throughout.
#[super::lane]
#[tokio::test]
async fn a_retriggered_items_predecessor_stays_readable_until_the_retrigger_is_pruned() {
    let app = spawn_deleting_facts(|_| {}).await;
    // A expires a day after its enqueue; 60 days later an operator retriggers it as B, which runs.
    let a = enqueue(&app, "CA1").await;
    app.advance(DAY);
    assert_eq!(app.expiry.run_once(app.clock.now()).await.unwrap(), 1);
    app.advance(60 * DAY);
    let v = app
        .post_ok(
            &format!("/api/priority-items/{a}/retrigger"),
            PLATFORM,
            json!({"reason": "carrier fixed"}),
        )
        .await;
    let b = v["item_id"].as_i64().unwrap();
    app.cycle_and_drain().await;
    assert_eq!(app.detail(b).await["item"]["status"], "completed");

    // 91 days after A's end (B's is 30 days old): A's trail goes, A stays for B.
    app.advance(31 * DAY);
    let r = app.retention.run_once(app.clock.now()).await.unwrap();
    assert!(r.audit_facts > 0 && r.trigger_events == 1, "{r:?}");
    assert_eq!(r.priority_items, 0, "{r:?}");
    assert_eq!(count(&app, FACTS_OF, Some(a)).await, 0);
    let (s, v, cs, page) = read_both_ways(&app, b).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["data"]["item"]["retriggered_from"], a);
    assert_eq!(v["data"]["item"]["status"], "completed");
    assert_eq!(cs, 200, "{page}");
    assert!(page.contains(&format!("href=\"/console/items/{a}\"")), "{page}");
    let (s, v, cs, page) = read_both_ways(&app, a).await;
    assert_eq!((s, cs), (200, 200), "{v} {page}");
    assert_eq!(v["data"]["item"]["status"], "expired");
    assert_eq!(v["data"]["events"], json!([]));

    // 91 days after B's end: B goes with its trail; A, no longer named, in the next run.
    app.advance(61 * DAY);
    let r = app.retention.run_once(app.clock.now()).await.unwrap();
    assert_eq!(r.priority_items, 1, "{r:?}");
    let (s, v, cs, page) = read_both_ways(&app, b).await;
    assert_eq!((s, cs), (404, 404), "{v} {page}");
    assert_eq!(read_both_ways(&app, a).await.0, 200);
    let r = app.retention.run_once(app.clock.now()).await.unwrap();
    assert_eq!(r.priority_items, 1, "{r:?}");
    let (s, v, cs, page) = read_both_ways(&app, a).await;
    assert_eq!((s, cs), (404, 404), "{v} {page}");
    let c = enqueue(&app, "CA11").await;
    let (s, list) = console_page(&app, "/console/items").await;
    assert_eq!(s, 200, "{list}");
    assert!(list.contains(&format!("/console/items/{c}")), "{list}");
    for gone in [a, b] {
        assert!(!list.contains(&format!("/console/items/{gone}\"")), "{list}");
    }
}

/// The spec keeps priority facts ("MUST NOT 自动删除事实"): the retention job deleted audit facts,
/// trigger events and ended items 90 days after they ended, by default. By default it now keeps
/// them for good; interaction logs still go on their schedule, and the item keeps naming its last
/// log (`last_log_id`).
#[super::lane]
#[tokio::test]
async fn retention_keeps_facts_by_default() {
    let app = spawn_seeded().await;
    let ended = enqueue(&app, "CA1").await;
    app.cycle_and_drain().await;
    let d = app.detail(ended).await;
    assert_eq!(d["item"]["status"], "completed", "{d}");
    let last_log = d["item"]["last_log_id"].as_i64().expect("a log id");
    let facts = count(&app, FACTS_OF, Some(ended)).await;
    assert!(facts >= 3, "{facts}");
    // Ten years on.
    app.advance(3650 * DAY);
    let r = app.retention.run_once(app.clock.now()).await.unwrap();
    assert_eq!(
        (r.audit_facts, r.trigger_events, r.priority_items),
        (0, 0, 0),
        "{r:?}"
    );
    assert!(r.interaction_logs >= 1, "{r:?}");
    assert_eq!(count(&app, FACTS_OF, Some(ended)).await, facts);
    assert_eq!(count(&app, EVENTS_OF, Some(ended)).await, 1);
    assert_eq!(count(&app, LOGS_OF, Some(ended)).await, 0);
    let d = app.detail(ended).await;
    assert_eq!(d["item"]["status"], "completed", "{d}");
    assert_eq!(d["item"]["last_log_id"], last_log, "{d}");
    assert_eq!(d["events"].as_array().unwrap().len() as i64, facts, "{d}");
    // The trigger event is remembered too: the same event id again names the ended item.
    let (s, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["card_status"],
                   "reason": "retention", "event_id": "ev-CA1"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let again = v["data"]["items"][0]["item_id"].as_i64().unwrap();
    let d = app.detail(again).await;
    assert_eq!(
        d["events"][0]["result"],
        format!("created_after_end,previous_item={ended}"),
        "{d}"
    );
}
