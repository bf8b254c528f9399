//! Requirement "优先轮询事实与查询的可追溯".

use std::time::Duration;

use serde_json::json;

use card_polling::upstream::SimBehavior;

use super::helpers::*;

#[super::lane]
#[tokio::test]
async fn agent_query_out_of_scope_is_indistinguishable_from_not_found() {
    let app = spawn_seeded().await;
    app.buy("card", "CB1", "addon").await;
    app.buy("card", "CA11", "addon").await;
    let b_item = app.item_of("CB1", "package").await["id"].as_i64().unwrap();
    let (s1, out_of_scope) = app
        .raw(
            reqwest::Method::GET,
            &format!("/api/priority-items/{b_item}"),
            Some(AGENT_A),
        )
        .await;
    let (s2, missing) = app
        .raw(
            reqwest::Method::GET,
            "/api/priority-items/987654",
            Some(AGENT_A),
        )
        .await;
    assert_eq!((s1, s2), (404, 404));
    assert_eq!(out_of_scope, missing, "byte-identical");
    assert!(app.list_as(AGENT_A, "iccid=CB1").await.is_empty());
    // Own and descendant shops are visible; an ancestor's are not.
    assert_eq!(app.list_as(AGENT_A, "").await.len(), 3);
    assert_eq!(app.list_as(AGENT_A1, "").await.len(), 3);
    assert_eq!(app.list_as(AGENT_B, "").await.len(), 3);
    app.buy("card", "CA1", "addon").await;
    assert_eq!(app.list_as(AGENT_A, "").await.len(), 6);
    assert_eq!(app.list_as(AGENT_A1, "").await.len(), 3);
    assert_eq!(app.list("").await.len(), 9, "platform sees all");
}

#[super::lane]
#[tokio::test]
async fn enterprise_account_is_refused_enqueue_and_query() {
    let app = spawn_seeded().await;
    app.buy("card", "CA1", "addon").await;
    let id = app.item_of("CA1", "package").await["id"].as_i64().unwrap();
    let (s, v) = app.get("/api/priority-items", ENTERPRISE).await;
    assert_eq!(
        (s, v["code"].as_i64(), v["success"].as_bool()),
        (403, Some(1002), Some(false))
    );
    let (s, _) = app
        .get(&format!("/api/priority-items/{id}"), ENTERPRISE)
        .await;
    assert_eq!(s, 403);
    let (s, _) = app
        .enqueue(
            ENTERPRISE,
            json!({"asset_type": "card", "asset_id": "CA1", "reason": "r"}),
        )
        .await;
    assert_eq!(s, 403);
    let (s, _) = app
        .post(
            &format!("/api/priority-items/{id}/retrigger"),
            ENTERPRISE,
            json!({"reason": "r"}),
        )
        .await;
    assert_eq!(s, 403);
}

#[super::lane]
#[tokio::test]
async fn query_results_carry_every_listed_field_and_no_priority_grade() {
    let app = spawn_seeded().await;
    app.buy("device", "DEV1", "main").await;
    app.run_executor().await;
    let items = app.list("iccid=D1C1").await;
    let item = items
        .iter()
        .find(|i| i["task_type"] == "card_status")
        .unwrap();
    for field in [
        "asset_type",
        "asset_id",
        "device_no",
        "iccid",
        "shop_id",
        "agent_chain",
        "task_type",
        "trigger_type",
        "trigger_sources",
        "trigger_count",
        "last_triggered_at",
        "attempts",
        "max_attempts",
        "started_at",
        "finished_at",
        "duration_ms",
        "next_run_at",
        "enqueued_at",
        "dequeued_at",
        "valid_until",
        "result",
        "failure_reason",
        "last_log_id",
        "status",
    ] {
        assert!(item.get(field).is_some(), "missing {field}: {item}");
    }
    assert_eq!(item["device_no"], "DEV1");
    assert_eq!(item["shop_id"], "A1");
    assert_eq!(item["agent_chain"], json!(["A", "A1"]));
    assert_eq!(item["max_attempts"], 3);
    assert_eq!(item["trigger_sources"].as_array().unwrap().len(), 1);
    let keys: Vec<_> = item.as_object().unwrap().keys().collect();
    assert!(
        !keys
            .iter()
            .any(|k| k.contains("priority") || k.contains("grade") || k.contains("level")),
        "no priority grade: {keys:?}"
    );
    let (s, detail) = app
        .get(&format!("/api/priority-items/{}", item["id"]), AGENT_A1)
        .await;
    assert_eq!(s, 200);
    assert_eq!(detail["data"]["item"], *item);
}

#[super::lane]
#[tokio::test]
async fn exceptions_view_lists_failed_expired_and_max_attempt_items_from_the_same_table() {
    let app = spawn_seeded().await;
    let enqueue = |iccid: &'static str| json!({"asset_type": "card", "asset_id": iccid, "task_types": ["card_status"], "reason": "r"});
    app.enqueue(PLATFORM, enqueue("CA1")).await; // will fail at max attempts
    app.enqueue(PLATFORM, enqueue("CA11")).await; // will be retrying with a reason
    app.enqueue(PLATFORM, enqueue("CB1")).await; // completes
    app.sim.set_behavior("CA1", SimBehavior::Fail);
    app.sim.script("CA11", &[SimBehavior::Timeout]);
    app.run_executor().await;
    // Two more rounds for CA1 only; CA11 stays pending with its failure reason.
    for _ in 0..2 {
        app.advance(300);
        app.executor
            .execute_one(
                app.item_of("CA1", "card_status").await["id"]
                    .as_i64()
                    .unwrap(),
                rakuten_types::Clock::now(&app.clock),
            )
            .await
            .unwrap();
    }
    let failed = app.list("exception=failed").await;
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["iccid"], "CA1");
    assert_eq!(failed[0]["attempts"], 3);
    assert!(
        failed[0]["failure_reason"]
            .as_str()
            .unwrap()
            .starts_with("maximum attempts reached")
    );
    let at_max = app.list("exception=attempts_at_max").await;
    assert_eq!(at_max.len(), 1);
    let reasons = app.list("exception=has_failure_reason").await;
    assert_eq!(reasons.len(), 2, "the failed one and the retrying one");
    // Expire the retrying one; the any-view shows both, never the completed one.
    app.advance(24 * 3600);
    app.expiry
        .run_once(rakuten_types::Clock::now(&app.clock))
        .await
        .unwrap();
    let expired = app.list("exception=expired").await;
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0]["iccid"], "CA11");
    assert_eq!(expired[0]["attempts"], 1);
    let any = app.list("exception=any").await;
    let mut cards: Vec<_> = any.iter().map(|i| i["iccid"].as_str().unwrap()).collect();
    cards.sort();
    assert_eq!(cards, ["CA1", "CA11"]);
}

#[super::lane]
#[tokio::test]
async fn completed_execution_reports_times_duration_and_log_reference_without_raw_response() {
    let app = spawn_seeded().await;
    app.sim.set_latency(Duration::from_millis(20));
    let (s, v) = app
        .enqueue(PLATFORM, json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["data_usage"], "reason": "r"}))
        .await;
    assert_eq!(s, 200);
    let id = v["data"]["items"][0]["item_id"].as_i64().unwrap();
    app.run_executor().await;
    let d = app.detail(id).await;
    let item = &d["item"];
    assert!(item["started_at"].is_string());
    assert!(item["finished_at"].is_string());
    assert!(item["duration_ms"].is_i64());
    let logs = d["logs"].as_array().unwrap();
    assert_eq!(logs.len(), 1);
    assert_eq!(item["last_log_id"], logs[0]["id"]);
    assert_eq!(logs[0]["request_summary"], "poll data_usage iccid=CA1 attempt=1");
    assert_eq!(logs[0]["response_summary"], "data_usage ok");
    assert!(logs[0]["latency_ms"].as_i64().unwrap() >= 20);
    let text = d.to_string();
    assert!(!text.contains("raw") && !text.contains("token") && !text.contains("body"));
}

#[super::lane]
#[tokio::test]
async fn list_filters_and_pages_newest_first() {
    let app = spawn_seeded().await;
    app.buy("card", "CA1", "main").await;
    app.advance(3600);
    app.buy("card", "CB1", "addon").await;
    let t_mid = rakuten_types::Clock::now(&app.clock);
    app.advance(3600);
    app.enqueue(
        PLATFORM,
        json!({"asset_type": "card", "asset_id": "CA11", "reason": "r"}),
    )
    .await;
    let (s, page1) = app.get("/api/priority-items?limit=4", PLATFORM).await;
    assert_eq!(s, 200);
    let ids1: Vec<i64> = page1["data"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(id_of)
        .collect();
    assert_eq!(ids1.len(), 4);
    assert!(ids1.windows(2).all(|w| w[0] > w[1]), "newest first");
    let cursor = page1["data"]["next_before_id"].as_i64().unwrap();
    let rest = app.list(&format!("limit=200&before_id={cursor}")).await;
    assert_eq!(ids1.len() + rest.len(), 9);
    assert_eq!(app.list("trigger_type=addon_activated").await.len(), 3);
    assert_eq!(
        app.list("trigger_type=manual_trigger&task_type=package")
            .await
            .len(),
        1
    );
    let from = t_mid.to_rfc3339();
    assert_eq!(app.list(&format!("enqueued_from={from}")).await.len(), 6);
    assert_eq!(app.list(&format!("enqueued_to={from}")).await.len(), 3);
    assert_eq!(app.list("status=completed").await.len(), 0);
}

/// The console's keyset paging and capped count in the store, on both engines: the
/// older page (`before_id`), the newer page (`after_id`, returned newest first), the oldest page
/// (`after_id = 0`), and a shop filter intersected with the scope (a descendant shop: exactly its
/// items; a shop outside the scope: nothing, like a missing one).
#[super::lane]
#[tokio::test]
async fn console_store_pages_by_keyset_both_ways_and_narrows_to_a_shop_within_the_scope() {
    use card_polling::domain::Scope;
    use card_polling::store::ItemFilter;

    let app = spawn_seeded().await;
    app.buy("card", "CA1", "main").await;
    app.buy("card", "CA11", "main").await;
    app.buy("card", "CB1", "main").await;
    let all = Scope::All;
    let page = |before_id, after_id| ItemFilter {
        before_id,
        after_id,
        limit: 4,
        ..ItemFilter::default()
    };
    let ids = |v: Vec<card_polling::store::ItemView>| v.iter().map(|i| i.id).collect::<Vec<_>>();
    let every = ids(app.store.item_list(&all, &ItemFilter { limit: 200, ..ItemFilter::default() }).await.unwrap());
    assert_eq!(every.len(), 9, "three cards, three task types");
    assert!(every.windows(2).all(|w| w[0] > w[1]), "newest first");
    let newest = ids(app.store.item_list(&all, &page(None, None)).await.unwrap());
    assert_eq!(newest, every[..4]);
    let older = ids(app.store.item_list(&all, &page(Some(newest[3]), None)).await.unwrap());
    assert_eq!(older, every[4..8]);
    let back = ids(app.store.item_list(&all, &page(None, Some(older[0]))).await.unwrap());
    assert_eq!(back, newest, "the newer page of the older one is the newest, newest first");
    let oldest = ids(app.store.item_list(&all, &page(None, Some(0))).await.unwrap());
    assert_eq!(oldest, every[5..], "the oldest page");
    assert_eq!(app.store.item_count(&all, &page(Some(newest[3]), None)).await.unwrap(), 9, "the count ignores the cursor");

    let agent_a = Scope::ShopTree("A".into());
    let shop = |s: &str| ItemFilter {
        shop: Some(s.into()),
        limit: 200,
        ..ItemFilter::default()
    };
    let leaf = app.store.item_list(&agent_a, &shop("A11")).await.unwrap();
    assert_eq!(leaf.len(), 3);
    assert!(leaf.iter().all(|i| i.iccid == "CA11"), "{leaf:?}");
    assert_eq!(app.store.item_count(&agent_a, &shop("A11")).await.unwrap(), 3);
    let own = app.store.item_list(&agent_a, &shop("A")).await.unwrap();
    assert_eq!(own.len(), 6, "A's tree: CA1 and CA11");
    for outside in ["B", "NO-SUCH-SHOP"] {
        assert!(app.store.item_list(&agent_a, &shop(outside)).await.unwrap().is_empty(), "{outside}");
        assert_eq!(app.store.item_count(&agent_a, &shop(outside)).await.unwrap(), 0, "{outside}");
    }
    assert_eq!(app.store.item_count(&all, &shop("B")).await.unwrap(), 3);
}
