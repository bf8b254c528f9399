//! The operator console in a real browser: headless Chromium through chromedriver
//! ([`web_console::webdriver`]); screenshots under `target/console-screenshots/`.

use web_console::webdriver::Browser;

use super::helpers::*;

async fn sign_in(b: &Browser, app: &TestApp, token: &str) {
    b.goto(&format!("{}/console", app.base)).await;
    b.fill("#token", token).await;
    b.click("#sign-in").await;
    b.find("#who").await;
}

#[test_util::lane(browser)]
#[tokio::test]
async fn card_polling_agent_cannot_open_an_out_of_scope_item() {
    let app = spawn_seeded().await;
    app.buy("card", "CB1", "addon").await;
    app.buy("card", "CA11", "addon").await;
    let b_item = app.item_of("CB1", "package").await["id"].as_i64().unwrap();
    let b = Browser::start().await;
    sign_in(&b, &app, AGENT_A).await;
    b.goto(&format!("{}/console/items/{b_item}", app.base))
        .await;
    b.find(".notice.err").await;
    let out_of_scope = b.text().await;
    b.screenshot("card-polling-out-of-scope").await;
    b.goto(&format!("{}/console/items/987654", app.base)).await;
    b.find(".notice.err").await;
    let missing = b.text().await;
    assert!(out_of_scope.contains("No such item."), "{out_of_scope}");
    assert_eq!(
        out_of_scope, missing,
        "an out-of-scope item looks like a missing one"
    );
    b.goto(&format!("{}/console/items", app.base)).await;
    b.find("#items").await;
    let list = b.text().await;
    assert!(list.contains("CA11") && !list.contains("CB1"), "{list}");
    b.screenshot("card-polling-agent-items").await;
    b.close().await;
}

/// An agent whose scope is a shop with sub-shops filters the items list to a
/// descendant shop and sees exactly that shop tree's items; a shop outside its scope shows nothing,
/// the same page as a shop that does not exist; an out-of-scope item looks like a missing one.
#[test_util::lane(browser)]
#[tokio::test]
async fn card_polling_agent_filters_items_to_a_descendant_shop() {
    let app = spawn_seeded().await;
    // A ⊃ A1 ⊃ A11, and B: the agent of A.
    app.buy("card", "CA1", "addon").await;
    app.buy("card", "CA11", "addon").await;
    app.buy("card", "CB1", "addon").await;
    let b_item = app.item_of("CB1", "package").await["id"].as_i64().unwrap();
    let b = Browser::start().await;
    sign_in(&b, &app, AGENT_A).await;
    let list = |query: &'static str| {
        let (b, base) = (&b, app.base.clone());
        async move {
            b.goto(&format!("{base}/console/items{query}")).await;
            b.find("section.card").await;
            b.text().await
        }
    };
    let own = list("").await;
    assert!(
        own.contains("CA1") && own.contains("CA11") && !own.contains("CB1"),
        "{own}"
    );
    // A11 is a grandchild of A: exactly its card.
    let leaf = list("?shop=A11").await;
    assert!(leaf.contains("CA11") && !leaf.contains("CB1"), "{leaf}");
    // Every "CA1" on the page is part of "CA11": CA1 is A's own card, not A11's.
    assert_eq!(
        leaf.matches("CA1").count(),
        leaf.matches("CA11").count(),
        "{leaf}"
    );
    assert_eq!(
        leaf.matches("CA11").count(),
        3,
        "its three task types: {leaf}"
    );
    b.screenshot("card-polling-agent-descendant-shop").await;
    // A1's tree holds A11 (and no item of its own here).
    let middle = list("?shop=A1").await;
    assert!(
        middle.contains("CA11") && !middle.contains("CB1"),
        "{middle}"
    );
    // Another agent's shop: nothing, exactly like a shop that does not exist.
    let outside = list("?shop=B").await;
    assert!(
        outside.contains("No item matches.") && !outside.contains("CB1"),
        "{outside}"
    );
    b.screenshot("card-polling-agent-outside-shop").await;
    let missing = list("?shop=NO-SUCH-SHOP").await;
    assert_eq!(
        outside, missing,
        "a shop outside the scope looks like a missing shop"
    );
    // The same on the exceptions view.
    b.goto(&format!("{}/console/exceptions?shop=B", app.base))
        .await;
    b.find("section.card").await;
    assert!(b.text().await.contains("No item matches."));
    // And an item of that shop looks like a missing one.
    b.goto(&format!("{}/console/items/{b_item}", app.base))
        .await;
    b.find(".notice.err").await;
    let out_of_scope = b.text().await;
    b.goto(&format!("{}/console/items/987654", app.base)).await;
    b.find(".notice.err").await;
    assert_eq!(out_of_scope, b.text().await);
    b.close().await;
}

#[test_util::lane(browser)]
#[tokio::test]
async fn card_polling_console_closes_an_item_with_a_reason_and_stays_local() {
    let app = spawn_seeded().await;
    app.buy("card", "CA1", "addon").await;
    let id = app.item_of("CA1", "package").await["id"].as_i64().unwrap();
    let b = Browser::start().await;
    sign_in(&b, &app, PLATFORM).await;
    for path in [
        "/console".to_owned(),
        "/console/items".to_owned(),
        "/console/exceptions".to_owned(),
        format!("/console/items/{id}"),
    ] {
        b.goto(&format!("{}{path}", app.base)).await;
        b.find("main").await;
        for url in b.requested_urls().await {
            assert!(url.starts_with(&app.base), "{path} requested {url}");
        }
    }
    b.screenshot("card-polling-item").await;
    // A refused reason (card-polling's is one line) is shown again to copy, its bidirectional
    // control named rather than obeyed, with the way back to the item.
    b.fill(
        "#form-close textarea[name=reason]",
        "customer asked\u{202e} to stop",
    )
    .await;
    b.click("#form-close button").await;
    b.confirm().await;
    b.find(".notice.err").await;
    assert_eq!(
        b.eval("return document.querySelector('textarea[readonly]').value;")
            .await,
        "customer asked<U+202E> to stop"
    );
    b.screenshot("card-polling-reason-refused").await;
    b.click(&format!("main a[href='/console/items/{id}']"))
        .await;
    b.find("#form-close").await;
    assert_eq!(app.detail(id).await["item"]["status"], "pending");
    b.fill(
        "#form-close textarea[name=reason]",
        "customer asked to stop",
    )
    .await;
    b.click("#form-close button").await;
    b.confirm().await;
    b.find(".notice.ok").await;
    let text = b.text().await;
    assert!(
        text.contains("customer asked to stop") && text.contains("plat"),
        "{text}"
    );
    assert_eq!(app.detail(id).await["item"]["status"], "closed");
    b.screenshot("card-polling-item-closed").await;
    b.goto(&format!("{}/console", app.base)).await;
    b.find("#depths").await;
    b.screenshot("card-polling-overview").await;
    b.close().await;
}

/// The item page's audit trail names the instance that acted and the claim's
/// fingerprint on system facts, the operator on operator facts.
#[test_util::lane(browser)]
#[tokio::test]
async fn card_polling_console_audit_trail_names_the_instance_and_the_claim() {
    let app = spawn_with(Backend::Memory, |s| {
        s.instance_id = Some("console-poller-1".into())
    })
    .await;
    app.seed().await;
    app.buy("card", "CA1", "addon").await;
    let id = app.item_of("CA1", "package").await["id"].as_i64().unwrap();
    app.cycle_and_drain().await;
    let detail = app.detail(id).await;
    assert_eq!(detail["item"]["status"], "completed", "{detail}");
    let fingerprint = detail["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "claim")
        .and_then(|e| e["claim_fingerprint"].as_str())
        .expect("a claim fact with a fingerprint")
        .to_owned();
    let b = Browser::start().await;
    sign_in(&b, &app, PLATFORM).await;
    b.goto(&format!("{}/console/items/{id}", app.base)).await;
    b.find("#audit").await;
    let text = b.text().await;
    assert!(text.contains("console-poller-1"), "{text}");
    assert!(text.contains(&fingerprint), "{text}");
    b.screenshot("card-polling-item-audit").await;
    b.close().await;
}

/// The items list pages by keyset on the id, newest first — 53 items: the newest 50,
/// "older" the other 3, "newer" back, "oldest" the oldest page; a malformed cursor is refused.
#[test_util::lane(browser)]
#[tokio::test]
async fn card_polling_items_page_older_and_newer_by_keyset() {
    let app = spawn_seeded().await;
    sqlx::query(
        "WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < 53) \
         INSERT INTO priority_items (iccid, task_type, asset_type, asset_id, shop_id, status, \
           trigger_type, last_trigger_type, trigger_count, enqueued_at, last_triggered_at, \
           attempts, max_attempts, next_run_at) \
         SELECT printf('PG%02d', i), 'package', 'card', printf('PG%02d', i), 'A11', 'pending', \
           'purchase_activated', 'purchase_activated', 1, '2026-07-27T00:00:00.000Z', \
           '2026-07-27T00:00:00.000Z', 0, 3, '2026-07-27T00:00:00.000Z' FROM k",
    )
    .execute(app.db.fixture_pool())
    .await
    .unwrap();
    let b = Browser::start().await;
    sign_in(&b, &app, PLATFORM).await;
    b.goto(&format!("{}/console/items", app.base)).await;
    let pager = b.find("#count").await.text().await.unwrap();
    assert!(pager.contains("50 shown of 53"), "{pager}");
    assert!(!b.has("#newer").await, "the first page is the newest");
    let text = b.text().await;
    assert!(
        text.contains("PG53") && text.contains("PG04") && !text.contains("PG03"),
        "{text}"
    );
    b.screenshot("card-polling-items-newest-page").await;
    b.click("#older").await;
    b.find("#newer").await;
    let text = b.text().await;
    assert!(
        text.contains("PG03") && text.contains("PG01") && !text.contains("PG04"),
        "{text}"
    );
    assert!(text.contains("3 shown of 53"), "{text}");
    assert!(!b.has("#older").await, "nothing older than the oldest page");
    b.screenshot("card-polling-items-older-page").await;
    b.click("#newer").await;
    b.find("#older").await;
    assert!(b.text().await.contains("PG53"));
    b.click("#oldest").await;
    b.find("#newer").await;
    let text = b.text().await;
    assert!(text.contains("PG01") && !text.contains("PG53"), "{text}");
    b.goto(&format!("{}/console/items?before=not-a-cursor", app.base))
        .await;
    assert!(b.text().await.contains("Malformed page position."));
    b.close().await;
}
