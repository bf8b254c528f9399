//! Audit facts of system transitions name the acting instance and the claim
//! token's fingerprint (never the token); a manual enqueue whose event id's item has ended is a new
//! request, recorded, not a silent replay (D-manual-event-id-after-item-ended).

use serde_json::{Value, json};

use card_polling::instance::claim_fingerprint;
use card_polling::priority::CLAIM_LEASE;
use card_polling::upstream::SimBehavior;
use rakuten_types::Clock;

use super::helpers::*;

const INSTANCE: &str = "poller-7";

async fn spawn_named() -> TestApp {
    let app = spawn_with(Backend::Memory, |s| s.instance_id = Some(INSTANCE.into())).await;
    app.seed().await;
    app
}

async fn enqueue_one(app: &TestApp, body: Value) -> (i64, String) {
    let (s, v) = app.enqueue(PLATFORM, body).await;
    assert_eq!(s, 200, "{v}");
    let item = &v["data"]["items"][0];
    (
        item["item_id"].as_i64().unwrap(),
        item["action"].as_str().unwrap().to_owned(),
    )
}

fn events(detail: &Value) -> Vec<Value> {
    detail["events"].as_array().unwrap().clone()
}

#[super::lane]
#[tokio::test]
async fn claim_takeover_and_complete_name_the_instance_and_the_claim_fingerprint() {
    let app = spawn_named().await;
    let (id, _) = enqueue_one(
        &app,
        json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["card_status"], "reason": "audit"}),
    )
    .await;
    // A claimer takes the item and dies; this process takes it over after the lease.
    app.store
        .item_claim(id, "crashed-claimer-token", app.clock.now(), CLAIM_LEASE)
        .await
        .unwrap()
        .expect("claim");
    app.advance(CLAIM_LEASE.as_secs());
    let report = app.run_executor().await;
    assert_eq!(report.completed, 1, "{report:?}");

    let detail = app.detail(id).await;
    let ev = events(&detail);
    let kinds: Vec<&str> = ev.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["enqueue", "claim", "claim", "complete"], "{detail}");
    // The operator's enqueue names the operator, no instance, no claim.
    assert_eq!(ev[0]["operator"], "plat", "{}", ev[0]);
    assert_eq!((&ev[0]["actor"], &ev[0]["claim_fingerprint"]), (&Value::Null, &Value::Null));
    // Every system fact names this process.
    for e in &ev[1..] {
        assert_eq!(e["actor"], INSTANCE, "{e}");
        assert_eq!(e["operator"], Value::Null, "{e}");
    }
    let first = claim_fingerprint("crashed-claimer-token");
    assert_eq!(ev[1]["claim_fingerprint"], first.as_str());
    let takeover = ev[2]["claim_fingerprint"].as_str().unwrap().to_owned();
    assert_eq!(ev[2]["result"], "taken_over_after_lease");
    assert_eq!(takeover.len(), 8);
    assert!(takeover.chars().all(|c| c.is_ascii_hexdigit()), "{takeover}");
    assert_ne!(takeover, first, "a takeover is a new claim");
    assert_eq!(ev[3]["claim_fingerprint"], takeover.as_str(), "complete ends the takeover's claim");
    // The token itself is stored nowhere in the audit trail.
    assert!(!detail.to_string().contains("crashed-claimer-token"), "{detail}");
    app.assert_invariants().await;
}

#[super::lane]
#[tokio::test]
async fn retry_failure_and_expire_name_the_instance() {
    let app = spawn_named().await;
    let (id, _) = enqueue_one(
        &app,
        json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["card_status"], "reason": "audit"}),
    )
    .await;
    app.sim.script("CA1", &[SimBehavior::Fail]);
    app.run_executor().await;
    // Held by a claimer when the validity ends: the expiry names the claim it ends.
    app.advance(600);
    app.store
        .item_claim(id, "holder-token", app.clock.now(), CLAIM_LEASE)
        .await
        .unwrap()
        .expect("claim");
    app.advance(24 * 3600);
    let expired = app.expiry.run_once(app.clock.now()).await.unwrap();
    assert_eq!(expired, 1);

    let ev = events(&app.detail(id).await);
    let by_kind = |k: &str| -> Vec<Value> { ev.iter().filter(|e| e["kind"] == k).cloned().collect() };
    let failure = by_kind("failure");
    let retry = by_kind("retry");
    let expire = by_kind("expire");
    assert_eq!((failure.len(), retry.len(), expire.len()), (1, 1, 1), "{ev:?}");
    let claims = by_kind("claim");
    assert_eq!(failure[0]["actor"], INSTANCE);
    assert_eq!(failure[0]["claim_fingerprint"], claims[0]["claim_fingerprint"]);
    assert_eq!(retry[0]["actor"], INSTANCE);
    assert_eq!(retry[0]["claim_fingerprint"], claims[0]["claim_fingerprint"]);
    assert_eq!(expire[0]["actor"], INSTANCE);
    assert_eq!(
        expire[0]["claim_fingerprint"],
        claim_fingerprint("holder-token").as_str()
    );
    app.assert_invariants().await;
}

#[super::lane]
#[tokio::test]
async fn manual_enqueue_reusing_an_ended_items_event_id_creates_a_new_recorded_item() {
    let app = spawn_seeded().await;
    let body = json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["package"],
                      "reason": "ticket 42", "event_id": "ticket-42"});
    let (first, action) = enqueue_one(&app, body.clone()).await;
    assert_eq!(action, "created");
    app.cycle_and_drain().await;
    assert_eq!(app.detail(first).await["item"]["status"], "completed");

    // The same key after its item ended: a new item, its audit fact saying why.
    let again = json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["package"],
                       "reason": "customer called again", "event_id": "ticket-42"});
    let (second, action) = enqueue_one(&app, again.clone()).await;
    assert_eq!(action, "created");
    assert_ne!(second, first);
    let ev = events(&app.detail(second).await);
    assert_eq!(ev[0]["kind"], "enqueue");
    assert_eq!(ev[0]["reason"], "customer called again");
    assert_eq!(
        ev[0]["result"],
        format!("created_after_end,previous_item={first}")
    );
    // While the new item is active the key is a replay of it again.
    let (third, action) = enqueue_one(&app, again).await;
    assert_eq!((third, action.as_str()), (second, "replayed"));
    assert_eq!(app.audit_kinds(second).await, ["enqueue", "merge"]);
    // The ended item is untouched.
    assert_eq!(app.audit_kinds(first).await.last().unwrap(), "complete");
    app.assert_invariants().await;
}

/// D-manual-event-id-after-item-ended: an event id whose item ended, sent while a later item of
/// the same card and task type is active, was answered `replayed` onto that later item — which
/// the event never reached — and the operator's request vanished. It merges into the active item
/// now, and the key then replays that item.
#[super::lane]
#[tokio::test]
async fn manual_enqueue_reusing_an_ended_items_event_id_merges_into_a_later_active_item() {
    let app = spawn_seeded().await;
    let enqueue = |reason: &str, event: Option<&str>| {
        let mut body = json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["package"],
                              "reason": reason});
        if let Some(event) = event {
            body["event_id"] = json!(event);
        }
        body
    };
    let (first, _) = enqueue_one(&app, enqueue("s1", Some("X-det-1"))).await;
    app.cycle_and_drain().await;
    assert_eq!(app.detail(first).await["item"]["status"], "completed");
    let (second, action) = enqueue_one(&app, enqueue("s3", None)).await;
    assert_eq!(action, "created");

    let (merged, action) = enqueue_one(&app, enqueue("s4", Some("X-det-1"))).await;
    assert_eq!((merged, action.as_str()), (second, "merged"));
    let detail = app.detail(second).await;
    assert_eq!(detail["item"]["trigger_count"], 2);
    let ev = events(&detail);
    let last = ev.last().unwrap();
    assert_eq!((last["kind"].as_str(), last["reason"].as_str()), (Some("merge"), Some("s4")));
    assert_eq!(
        last["result"],
        format!("merged_after_end,previous_item={first}")
    );
    // The key now names the active item: a retry is its replay.
    let (again, action) = enqueue_one(&app, enqueue("s4", Some("X-det-1"))).await;
    assert_eq!((again, action.as_str()), (second, "replayed"));
    assert_eq!(app.detail(second).await["item"]["trigger_count"], 2);
    app.assert_invariants().await;
}

/// The spec asks every fact for its trigger type, trigger source, operation source, time and
/// result; system facts (claim, failure, retry, complete, expire, fail_dequeue) and the close named
/// the acting instance or operator but left trigger type and source empty. Each now carries the
/// item's trigger as it stood (the latest merged in), on both engines.
#[super::lane]
#[tokio::test]
async fn system_facts_carry_their_trigger() {
    let app = spawn_named().await;
    // Created by a purchase; fails once, is retried.
    let paid = app.buy("card", "CA1", "addon").await;
    let order_source = format!("order:{}", paid["order_id"].as_str().unwrap());
    let bought = app.item_of("CA1", "card_status").await;
    let bought = id_of(&bought);
    // Every item of the purchase fails once.
    app.sim.set_behavior("CA1", SimBehavior::Fail);
    app.run_executor().await;
    app.sim.set_behavior("CA1", SimBehavior::Ok);
    // A manual enqueue merges in, then the next run completes it.
    let (merged, action) = enqueue_one(
        &app,
        json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["card_status"], "reason": "merge"}),
    )
    .await;
    assert_eq!((merged, action.as_str()), (bought, "merged"));
    app.advance(3600);
    app.run_executor().await;
    // An unknown card fails at once; another item expires; another is closed.
    let (unknown, _) = enqueue_one(
        &app,
        json!({"asset_type": "card", "asset_id": "CB1", "task_types": ["data_usage"], "reason": "unknown"}),
    )
    .await;
    app.sim.script("CB1", &[SimBehavior::Unknown]);
    app.run_executor().await;
    let (closed, _) = enqueue_one(
        &app,
        json!({"asset_type": "card", "asset_id": "D1C1", "task_types": ["package"], "reason": "to close"}),
    )
    .await;
    app.post_ok(
        &format!("/api/priority-items/{closed}/close"),
        PLATFORM,
        json!({"reason": "not needed"}),
    )
    .await;
    let (expired, _) = enqueue_one(
        &app,
        json!({"asset_type": "card", "asset_id": "CA11", "task_types": ["package"], "reason": "to expire"}),
    )
    .await;
    app.store
        .item_claim(expired, "holder-token", app.clock.now(), CLAIM_LEASE)
        .await
        .unwrap()
        .expect("claim");
    app.advance(25 * 3600);
    assert!(app.expiry.run_once(app.clock.now()).await.unwrap() >= 1);

    let manual = ("manual_trigger", "manual:plat");
    let purchase = ("addon_activated", order_source.as_str());
    // Per item: each fact's kind with the (trigger type, trigger source) it names.
    type Facts<'a> = Vec<(&'a str, (&'a str, &'a str))>;
    let want: Vec<(i64, Facts)> = vec![
        (
            bought,
            vec![
                ("enqueue", purchase),
                ("claim", purchase),
                ("failure", purchase),
                ("retry", purchase),
                ("merge", manual),
                ("claim", manual),
                ("complete", manual),
            ],
        ),
        (
            unknown,
            vec![
                ("enqueue", manual),
                ("claim", manual),
                ("failure", manual),
                ("fail_dequeue", manual),
            ],
        ),
        (closed, vec![("enqueue", manual), ("close", manual)]),
        (
            expired,
            vec![("enqueue", manual), ("claim", manual), ("expire", manual)],
        ),
    ];
    for (id, facts) in want {
        let d = app.detail(id).await;
        let ev = events(&d);
        let got: Vec<(String, (String, String))> = ev
            .iter()
            .map(|e| {
                let text = |k: &str| e[k].as_str().unwrap_or("(empty)").to_owned();
                (text("kind"), (text("trigger_type"), text("source")))
            })
            .collect();
        let want: Vec<(String, (String, String))> = facts
            .iter()
            .map(|(k, (t, s))| ((*k).to_owned(), ((*t).to_owned(), (*s).to_owned())))
            .collect();
        assert_eq!(got, want, "item {id}: {d}");
        // Every fact has its operation source (the operator, the acting instance on a system
        // fact, the business fact of an automatic trigger), its time and its result.
        for e in &ev {
            let system = !matches!(e["kind"].as_str(), Some("enqueue" | "merge" | "close"));
            if system {
                assert_eq!(e["actor"], INSTANCE, "item {id}: {e}");
            } else {
                assert!(e["operator"].is_string() || e["source"].is_string(), "item {id}: {e}");
            }
            assert!(e["at"].is_string() && e["result"].is_string(), "item {id}: {e}");
        }
    }
}
