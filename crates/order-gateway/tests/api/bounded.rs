//! Every list answer is bounded (D-list-pages-bounded): a task list shows a summary of each
//! intent, never the whole intent, and every list page's items stay under 1 MiB of JSON, its
//! `limit` then saying where the next page starts.

use rakuten_types::order::{MAX_PAGE_ITEMS_BYTES, MAX_TASK_SUMMARY_BYTES};
use serde_json::{Value, json};

use crate::helpers::{Engine, TestApp, answer};
use crate::on_both_engines;

/// `GET path` with the token: the raw body's length and the parsed envelope.
async fn sized(app: &TestApp, path: &str) -> (usize, Value) {
    let resp = app.get(path).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    (text.len(), serde_json::from_str(&text).unwrap())
}

/// A page of 200 tasks whose intents each carry a 60 KB gift message was 11.5 MiB: now each item
/// is a summary of its intent (at most [`MAX_TASK_SUMMARY_BYTES`], here a few hundred bytes), and
/// the detail still has the whole intent.
async fn a_list_page_of_large_intents_stays_under_its_byte_bound(e: Engine) {
    let app = e.spawn(|_| {}).await;
    let gift = "あ".repeat(20_000); // 60 KB of UTF-8
    for i in 0..200 {
        app.submit_body(json!({
            "task_id": format!("po-gift-{i:03}"),
            "site": "rakuten",
            "intent": {"item_url": "https://item.rakuten.co.jp/shop/a/", "quantity": 2,
                       "max_total_yen": 30000, "options": {"gift_message": gift}},
        }))
        .await
        .assert_ok();
    }
    let (bytes, page) = sized(&app, "/api/orders?limit=200").await;
    let data = &page["data"];
    assert_eq!(
        (data["total"].as_i64(), data["limit"].as_i64()),
        (Some(200), Some(200))
    );
    let items = data["items"].as_array().unwrap();
    assert_eq!(items.len(), 200, "all 200 on one page");
    // The stated bound, and in fact far below it: summaries, no gift message.
    assert!(bytes <= 200 * MAX_TASK_SUMMARY_BYTES, "{bytes} bytes");
    assert!(bytes < 128 * 1024, "a page of summaries is {bytes} bytes");
    let first = &items[0];
    assert_eq!(
        first["intent"],
        json!({"item_url": "https://item.rakuten.co.jp/shop/a/", "quantity": 2,
               "variant_id": null, "max_total_yen": 30000})
    );
    assert!(first["intent_bytes"].as_i64().unwrap() > 60_000, "{first}");
    // The detail has the whole intent.
    let d = app.task("po-gift-000").await;
    assert_eq!(
        d.assert_ok()["intent"]["options"]["gift_message"],
        gift.as_str()
    );
    // `/health` and the console's lists read summaries too (the rows without their intents).
    let (health_bytes, _) = sized(&app, "/health").await;
    assert!(health_bytes < 64 * 1024, "{health_bytes}");
}

/// Items near their largest (a 2,048-character item URL of 4-byte characters, about 8 KiB per
/// summary): a page of 200 would pass 1 MiB, so it ends before it, its `limit` says how many it
/// holds, and paging on by `offset + limit` visits every task once.
async fn a_list_page_ends_before_its_byte_bound_and_its_limit_says_where_to_continue(e: Engine) {
    let app = e.spawn(|_| {}).await;
    let prefix = "https://item.rakuten.co.jp/";
    let url = format!("{prefix}{}", "𝄞".repeat(2048 - prefix.len()));
    for i in 0..200 {
        app.submit_body(
            json!({"task_id": format!("po-wide-{i:03}"), "site": "rakuten",
                               "intent": {"item_url": url}}),
        )
        .await
        .assert_ok();
    }
    let mut seen = Vec::new();
    let mut offset = 0;
    while offset < 200 {
        let (bytes, page) = sized(&app, &format!("/api/orders?limit=200&offset={offset}")).await;
        let data = &page["data"];
        let items = data["items"].as_array().unwrap();
        let limit = data["limit"].as_i64().unwrap();
        // A cut page's limit is what it holds; the last page holds what is left.
        let left = 200 - offset;
        assert_eq!(items.len() as i64, limit.min(left), "offset {offset}");
        assert!(bytes <= MAX_PAGE_ITEMS_BYTES + 1024, "{bytes} bytes");
        assert!(!items.is_empty());
        seen.extend(
            items
                .iter()
                .map(|t| t["task_id"].as_str().unwrap().to_owned()),
        );
        offset += limit;
    }
    assert!(seen.len() == 200, "{}", seen.len());
    let first_page = sized(&app, "/api/orders?limit=200").await.1;
    assert!(
        first_page["data"]["limit"].as_i64().unwrap() < 200,
        "the first page was cut"
    );
    seen.dedup();
    assert_eq!(seen.len(), 200, "every task once");
}

/// Account queries: failure messages near their largest (4,096 characters of 4-byte
/// characters) keep a page under 1 MiB as well.
async fn an_account_query_page_stays_under_its_byte_bound(e: Engine) {
    let app = e.spawn(|_| {}).await;
    let message = "𝄞".repeat(4096);
    for i in 0..100 {
        let id = format!("aq-big-{i:03}");
        app.submit_list_query(&id).await.assert_ok();
        let g = app.lease_query("w1", 0.0).await;
        let token = g.assert_ok()["lease_token"].as_str().unwrap().to_owned();
        app.query_result(
            &id,
            json!({"worker_id": "w1", "lease_token": token, "success": false,
                   "error_code": 5001, "error_message": message}),
        )
        .await
        .assert_ok();
    }
    let (bytes, page) = sized(&app, "/api/account/queries?limit=200").await;
    let data = &page["data"];
    assert!(bytes <= MAX_PAGE_ITEMS_BYTES + 1024, "{bytes} bytes");
    let shown = data["items"].as_array().unwrap().len() as i64;
    assert_eq!(data["limit"].as_i64(), Some(shown));
    assert!(shown < 100, "{shown} of 100 items of 16 KiB fit in 1 MiB");
    let rest = answer(
        app.get(&format!("/api/account/queries?limit=200&offset={shown}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        rest.assert_ok()["items"].as_array().unwrap().len() as i64,
        100 - shown
    );
}

/// Tasks written before the summary existed get theirs from migration 0011, from the text they
/// hold (a text that is not an intent object keeps none and is still listed), on both engines.
async fn tasks_stored_before_the_summary_get_theirs_from_the_migration(e: Engine) {
    use order_gateway::store::{OrderStore, TaskFilter};
    use sqlx::Connection;
    let rows = [
        (
            "po-old-big",
            r#"{"item_url":"https://item.rakuten.co.jp/shop/a/","quantity":3,"variant_id":"red","max_total_yen":5000,"options":{"n":123456789012345678901234567890}}"#,
        ),
        (
            "po-old-min",
            r#"{"item_url":"https://item.rakuten.co.jp/shop/b/"}"#,
        ),
        ("po-old-poison", "{not json"),
        ("po-old-array", "[1,2]"),
    ];
    let insert = |id: &str, intent: &str| {
        format!(
            "INSERT INTO tasks (task_id, site, intent_json, status, lease_count, created_at, \
             updated_at) VALUES ('{id}', 'rakuten', '{intent}', 'queued', 0, \
             '2026-07-27T09:00:00.000Z', '2026-07-27T09:00:00.000Z')"
        )
    };
    let before_0011 = |m: sqlx::migrate::Migrator| {
        sqlx::migrate::Migrator::with_migrations(
            m.iter().filter(|m| m.version < 11).cloned().collect(),
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let _pg;
    let store: Box<dyn OrderStore> = match e {
        Engine::Sqlite => {
            let path = dir.path().join("old.db");
            let url = format!("sqlite://{}?mode=rwc", path.display());
            let mut c = sqlx::SqliteConnection::connect(&url).await.unwrap();
            before_0011(order_gateway::store::sqlite::migrator())
                .run(&mut c)
                .await
                .unwrap();
            for (id, intent) in rows {
                sqlx::raw_sql(sqlx::AssertSqlSafe(insert(id, intent)))
                    .execute(&mut c)
                    .await
                    .unwrap();
            }
            c.close().await.unwrap();
            Box::new(
                order_gateway::store::sqlite::SqliteStore::open(&path)
                    .await
                    .unwrap(),
            )
        }
        Engine::Postgres => {
            let db = test_util::PgSchema::new().await;
            let mut c = sqlx::PgConnection::connect(&db.url).await.unwrap();
            before_0011(order_gateway::store::postgres::migrator())
                .run(&mut c)
                .await
                .unwrap();
            for (id, intent) in rows {
                sqlx::raw_sql(sqlx::AssertSqlSafe(insert(id, intent)))
                    .execute(&mut c)
                    .await
                    .unwrap();
            }
            c.close().await.unwrap();
            let store = order_gateway::store::postgres::PgStore::open(&db.url)
                .await
                .unwrap();
            _pg = db;
            Box::new(store)
        }
    };
    let page = store
        .task_list(TaskFilter {
            limit: 200,
            ..Default::default()
        })
        .await
        .unwrap();
    let by_id = |id: &str| {
        page.items
            .iter()
            .find(|t| t.task_id.as_str() == id)
            .unwrap()
    };
    assert_eq!(page.total, 4);
    let big = by_id("po-old-big");
    let s = big.intent.as_ref().expect("a summary");
    assert_eq!(
        (
            s.item_url.as_str(),
            s.quantity,
            s.variant_id.as_deref(),
            s.max_total_yen
        ),
        (
            "https://item.rakuten.co.jp/shop/a/",
            3,
            Some("red"),
            Some(5000)
        )
    );
    assert_eq!(big.intent_bytes, rows[0].1.len() as i64);
    let min = by_id("po-old-min").intent.as_ref().expect("a summary");
    assert_eq!(
        (min.quantity, min.variant_id.as_ref(), min.max_total_yen),
        (1, None, None)
    );
    for id in ["po-old-poison", "po-old-array"] {
        assert_eq!(by_id(id).intent, None, "{id}");
        assert_eq!(by_id(id).status, rakuten_types::TaskStatus::Queued);
    }
    // The whole text is untouched.
    let d = store
        .task_get(&by_id("po-old-big").task_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.intent.as_str(), rows[0].1);
    store.close().await;
}

on_both_engines!(
    a_list_page_of_large_intents_stays_under_its_byte_bound,
    a_list_page_ends_before_its_byte_bound_and_its_limit_says_where_to_continue,
    an_account_query_page_stays_under_its_byte_bound,
    tasks_stored_before_the_summary_get_theirs_from_the_migration,
);
