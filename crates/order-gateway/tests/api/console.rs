//! The operator console in a real browser: headless Chromium driven through
//! chromedriver ([`web_console::webdriver`]). Each test saves a screenshot of the page it checked
//! under `target/console-screenshots/`.

use serde_json::json;
use sqlx::Connection;
use web_console::webdriver::Browser;

use crate::helpers::{TOKEN, TestApp, spawn_app, spawn_app_with};

/// Signs in with the operator token through the sign-in form.
async fn sign_in(b: &Browser, app: &TestApp) {
    b.goto(&app.url("/console")).await;
    b.fill("#token", TOKEN).await;
    b.click("#sign-in").await;
    b.find("#who").await;
}

/// A stale task: leased to `worker`, reported `in_cart`, its lease lapsed and swept; returns the
/// grant.
async fn stale_task(app: &TestApp, task_id: &str, worker: &str) -> serde_json::Value {
    let g = app.leased(task_id, worker).await;
    app.report(
        task_id,
        json!({"worker_id": worker, "lease_token": g["lease_token"], "state": "in_cart",
               "evidence_ref": format!("{task_id}/01-cart"), "detail": "item in cart"}),
    )
    .await
    .assert_ok();
    app.expire_leases();
    assert_eq!(app.sweep().await.len(), 1);
    g
}

#[test_util::lane(browser)]
#[tokio::test]
async fn console_sign_in_and_sign_out() {
    let app = spawn_app().await;
    let b = Browser::start().await;
    b.goto(&app.url("/console")).await;
    assert!(
        b.url().await.ends_with("/console/sign-in"),
        "sent to sign-in"
    );
    b.fill("#token", "not-a-token").await;
    b.click("#sign-in").await;
    assert!(b.text().await.contains("Unknown token"));
    sign_in(&b, &app).await;
    let text = b.text().await;
    assert!(text.contains("Signed in as api (operator)"), "{text}");
    assert!(text.contains("Overview"));
    b.screenshot("gateway-overview").await;
    b.click("#sign-out").await;
    b.find("#token").await;
    assert!(b.url().await.ends_with("/console/sign-in"));
    b.goto(&app.url("/console/tasks")).await;
    assert!(
        b.url().await.ends_with("/console/sign-in"),
        "the session ended"
    );
    b.screenshot("gateway-signed-out").await;
    b.close().await;
}

#[test_util::lane(browser)]
#[tokio::test]
async fn console_form_without_its_csrf_token_is_refused() {
    let app = spawn_app().await;
    stale_task(&app, "csrf-1", "w1").await;
    let b = Browser::start().await;
    sign_in(&b, &app).await;
    b.goto(&app.url("/console/tasks/csrf-1")).await;
    b.fill("#form-reclaim textarea[name=reason]", "try without token")
        .await;
    b.eval("document.querySelector('#form-reclaim input[name=csrf]').remove(); return 1;")
        .await;
    b.click("#form-reclaim button").await;
    b.confirm().await;
    b.find(".notice.err").await;
    let text = b.text().await;
    assert!(text.contains("security token (CSRF)"), "{text}");
    b.screenshot("gateway-csrf-refused").await;
    assert_eq!(app.status_of("csrf-1").await, "stale", "nothing happened");
    b.close().await;
}

/// A console form took a reason with an escape sequence that the API
/// refuses, and `order-gateway ops show` then printed it raw to the next operator's terminal; and
/// a resolve could say `failed` of an order the person saw `paid`. Both forms now answer with the
/// API's rule, and nothing happens to the task.
#[test_util::lane(browser)]
#[tokio::test]
async fn console_refuses_a_reason_or_verdict_the_api_refuses() {
    let app = spawn_app().await;
    stale_task(&app, "esc-1", "w1").await;
    // An intent stored before the submit checks (or its unchecked `options`) with a
    // U+202E and a BEL is shown written out, not obeyed.
    app.raw_sql(
        "UPDATE tasks SET intent_json = '{\"item_url\":\"https://item.rakuten.co.jp/shop/' || \
         char(8238) || 'gnp.exe/\",\"quantity\":1,\"variant_id\":\"v\\u0007\",\"options\":{\"note\":\"a' || char(8238) || 'b\"}}' WHERE task_id = 'esc-1'",
    )
    .await;
    let b = Browser::start().await;
    sign_in(&b, &app).await;
    b.goto(&app.url("/console/tasks/esc-1")).await;
    let intent = b.find("#intent").await.text().await.unwrap();
    assert!(
        intent.contains(r"shop/\u{202e}gnp.exe/") && intent.contains(r"v\u{7}"),
        "{intent}"
    );
    let html = b.eval("return document.documentElement.outerHTML;").await;
    let html = html.as_str().unwrap();
    assert!(!html.contains('\u{202e}'), "a raw U+202E on the page");
    assert!(html.contains(r"a\u202eb"), "options written out");
    b.screenshot("gateway-task-intent-escaped").await;
    b.eval("document.querySelector('#form-reclaim textarea[name=reason]').value = 'x\\u001b[2J'; return 1;")
        .await;
    b.click("#form-reclaim button").await;
    b.confirm().await;
    b.find(".notice.err").await;
    let text = b.text().await;
    assert!(
        text.contains("reason contains control characters"),
        "{text}"
    );
    b.screenshot("gateway-reason-refused").await;
    assert_eq!(
        b.eval("return document.querySelector('textarea[readonly]').value;")
            .await,
        "x\u{1b}[2J",
        "the refused reason is shown as typed (escaped by the page, not run)"
    );
    b.goto(&app.url("/console/tasks/esc-1")).await;
    b.eval("document.querySelector('#form-resolve select[name=outcome]').value = 'failed'; document.querySelector('#form-resolve select[name=state]').value = 'paid'; return 1;")
        .await;
    b.fill("#form-resolve textarea[name=reason]", "saw it paid")
        .await;
    b.click("#form-resolve button").await;
    b.confirm().await;
    b.find(".notice.err").await;
    let text = b.text().await;
    assert!(
        text.contains("outcome failed contradicts state paid"),
        "{text}"
    );
    // The reason as typed, to copy, and the way back to the task, not only the
    // overview.
    let typed = b
        .eval("return document.querySelector('textarea[readonly]').value;")
        .await;
    assert_eq!(typed, "saw it paid");
    b.screenshot("gateway-verdict-refused").await;
    b.click("main a[href='/console/tasks/esc-1']").await;
    b.find("#form-resolve").await;
    assert_eq!(app.status_of("esc-1").await, "stale", "nothing happened");
    // Resolved failed as it should be, without a state: Needs attention names the operator and
    // the reason, not the worker's last report ("item in cart").
    b.goto(&app.url("/console/tasks/esc-1")).await;
    b.eval(
        "document.querySelector('#form-resolve select[name=outcome]').value = 'failed'; return 1;",
    )
    .await;
    b.fill(
        "#form-resolve textarea[name=reason]",
        "no order on the site; not wanted any more",
    )
    .await;
    b.click("#form-resolve button").await;
    b.confirm().await;
    b.find(".notice.ok").await;
    b.goto(&app.url("/console/attention")).await;
    let text = b.find("#attention").await.text().await.unwrap();
    assert!(
        text.contains(
            "Failed: resolved by operator api: no order on the site; not wanted any more."
        ),
        "{text}"
    );
    assert!(!text.contains("item in cart"), "{text}");
    b.screenshot("gateway-attention-resolved-failed").await;
    b.close().await;
}

#[test_util::lane(browser)]
#[tokio::test]
async fn console_reclaims_a_stale_task_with_a_reason() {
    let app = spawn_app().await;
    stale_task(&app, "reclaim-1", "w1").await;
    let b = Browser::start().await;
    sign_in(&b, &app).await;
    b.goto(&app.url("/console/attention")).await;
    let text = b.text().await;
    assert!(
        text.contains("reclaim-1") && text.contains("lease of w1 lapsed"),
        "{text}"
    );
    b.screenshot("gateway-attention").await;
    b.click("#attention a[href='/console/tasks/reclaim-1']")
        .await;
    b.find("#reports").await;
    let text = b.text().await;
    assert!(text.contains("reclaim-1/01-cart"), "evidence ref: {text}");
    b.screenshot("gateway-task-stale").await;
    b.fill(
        "#form-reclaim textarea[name=reason]",
        "order list shows no order",
    )
    .await;
    b.click("#form-reclaim button").await;
    b.confirm().await;
    b.find(".notice.ok").await;
    assert_eq!(app.status_of("reclaim-1").await, "leased");
    b.screenshot("gateway-task-reclaimed").await;
    b.close().await;
}

#[test_util::lane(browser)]
#[tokio::test]
async fn no_console_page_requests_anything_outside_the_service() {
    let app = spawn_app().await;
    stale_task(&app, "local-1", "w1").await;
    app.submit("local-2").await.assert_ok();
    app.submit_list_query("q-local-1").await.assert_ok();
    let b = Browser::start().await;
    sign_in(&b, &app).await;
    for path in [
        "/console",
        "/console/attention",
        "/console/tasks",
        "/console/tasks?status=stale",
        "/console/tasks/local-1",
        "/console/queries",
        "/console/queries/q-local-1",
        "/console/alerts",
        "/console/alerts?state=all",
    ] {
        b.goto(&app.url(path)).await;
        b.find("main").await;
        for url in b.requested_urls().await {
            assert!(
                url.starts_with(&app.address),
                "{path} requested {url} outside {}",
                app.address
            );
        }
    }
    b.goto(&app.url("/console/queries/q-local-1")).await;
    b.screenshot("gateway-query").await;
    b.goto(&app.url("/console/tasks")).await;
    b.screenshot("gateway-tasks").await;
    b.close().await;
}

#[test_util::lane(browser)]
#[tokio::test]
async fn console_stale_flow_end_to_end() {
    // A short TTL makes the task stale; the alert job gathers the site's order list; a worker
    // answers it; the operator finds the task under Needs attention, reads the list, resolves.
    let app = spawn_app_with(|s| {
        s.lease_ttl_seconds = 5.0;
        s.worker_offline_alert_seconds = 100_000.0;
    })
    .await;
    let g_task = stale_task(&app, "stale-1", "w1").await;
    let run = app.run_alerts().await;
    assert_eq!(run.evidence.len(), 1, "the order list is gathered");
    let g = app.lease_query("w1", 0.0).await;
    let g = g.assert_ok().clone();
    app.query_result(
        g["query_id"].as_str().unwrap(),
        json!({"worker_id": "w1", "lease_token": g["lease_token"], "success": true, "result": {
            "kind": "order_list", "since": null, "max_pages": 2, "window_fully_covered": true,
            "orders": [{"order_number": "306087-20260727-0000000042",
                        "order_date": "2026-07-27T00:01:00.000Z", "shop_id": 306087,
                        "shop_name": "sim shop", "items": [{"item_id": 1, "item_name": "Widget",
                        "item_url": "https://item.rakuten.co.jp/shop/a/"}]}],
            "raw_pages": [{"page": 1}]}}),
    )
    .await
    .assert_ok();

    let b = Browser::start().await;
    sign_in(&b, &app).await;
    b.goto(&app.url("/console/attention")).await;
    b.click("#attention a[href='/console/tasks/stale-1']").await;
    b.find("#gathered table").await;
    let text = b.text().await;
    assert!(text.contains("306087-20260727-0000000042"), "{text}");
    assert!(text.contains("Widget"), "{text}");
    // The lease history: the one grant, to w1 by a poll, ended when the sweeper found it lapsed.
    let grants = b.find("#grant-rows").await.text().await.unwrap();
    assert!(
        grants.contains("w1") && grants.contains("poll") && grants.contains("expired"),
        "{grants}"
    );
    assert!(
        grants.contains(&order_gateway::store::operator::token_fingerprint(
            g_task["lease_token"].as_str().unwrap()
        )),
        "token fingerprint: {grants}"
    );
    b.screenshot("gateway-task-page").await;
    b.eval("document.querySelector('#form-resolve select[name=outcome]').value = 'succeeded'; return 1;")
        .await;
    b.fill(
        "#form-resolve input[name=site_order_id]",
        "306087-20260727-0000000042",
    )
    .await;
    b.fill(
        "#form-resolve textarea[name=reason]",
        "order list shows the order",
    )
    .await;
    b.click("#form-resolve button").await;
    b.confirm().await;
    b.find(".notice.ok").await;
    let text = b.text().await;
    assert!(text.contains("succeeded"), "{text}");
    let audit = b.find("#audit-rows").await;
    let audit = audit.text().await.unwrap();
    assert!(
        audit.contains("api")
            && audit.contains("resolve")
            && audit.contains("order list shows the order"),
        "{audit}"
    );
    assert_eq!(app.status_of("stale-1").await, "succeeded");
    b.screenshot("gateway-task-resolved").await;
    b.close().await;
}

#[test_util::lane(browser)]
#[tokio::test]
async fn console_cancels_a_queued_task() {
    let app = spawn_app().await;
    app.submit("queued-1").await.assert_ok();
    let b = Browser::start().await;
    sign_in(&b, &app).await;
    b.goto(&app.url("/console/tasks?status=queued")).await;
    b.click("#tasks a[href='/console/tasks/queued-1']").await;
    b.fill("#form-cancel textarea[name=reason]", "customer withdrew")
        .await;
    b.click("#form-cancel button").await;
    b.confirm().await;
    b.find(".notice.ok").await;
    assert_eq!(app.status_of("queued-1").await, "failed");
    let audit = b.find("#audit-rows").await.text().await.unwrap();
    assert!(
        audit.contains("cancel") && audit.contains("customer withdrew"),
        "{audit}"
    );
    b.screenshot("gateway-task-cancelled").await;
    b.goto(&app.url("/console")).await;
    b.find("#workers").await;
    b.screenshot("gateway-overview-after-cancel").await;
    b.close().await;
}

#[test_util::lane(browser)]
#[tokio::test]
async fn console_task_page_shows_the_lease_history() {
    let app = spawn_app().await;
    // A task whose only grant predates the lease history (its row removed, as before migration
    // 0006): the page says so instead of showing an empty table.
    let old = app.leased("legacy-1", "w9").await;
    app.report(
        "legacy-1",
        json!({"worker_id": "w9", "lease_token": old["lease_token"], "state": "ordered",
               "terminal": true, "outcome": "succeeded"}),
    )
    .await
    .assert_ok();
    let db = app._tempdir.path().join("gw.db");
    let mut raw = sqlx::SqliteConnection::connect(&format!("sqlite://{}", db.display()))
        .await
        .unwrap();
    sqlx::query("DELETE FROM lease_grants WHERE task_id = 'legacy-1'")
        .execute(&mut raw)
        .await
        .unwrap();
    raw.close().await.unwrap();

    // hist-1: granted to w1, renewed once, lapsed and swept, reclaimed to w2.
    let g = app.leased("hist-1", "w1").await;
    app.clock.advance(std::time::Duration::from_secs(10));
    app.renew(
        "hist-1",
        json!({"worker_id": "w1", "lease_token": g["lease_token"]}),
    )
    .await
    .assert_ok();
    app.expire_leases();
    assert_eq!(app.sweep().await.len(), 1);
    let r = app.reclaim("hist-1", "w2").await;
    let r = r.assert_ok().clone();

    let b = Browser::start().await;
    sign_in(&b, &app).await;
    b.goto(&app.url("/console/tasks/hist-1")).await;
    let rows = b
        .eval(
            "return Array.from(document.querySelectorAll('#grant-rows tr'))\
             .map(tr => Array.from(tr.cells).map(td => td.innerText));",
        )
        .await;
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    let cell = |r: usize, c: usize| rows[r][c].as_str().unwrap().to_owned();
    let fp = order_gateway::store::operator::token_fingerprint;
    // Newest first: grant 2 by the reclaim, open; grant 1 by a poll, renewed once, expired.
    assert_eq!(
        (cell(0, 0), cell(0, 1), cell(0, 2), cell(0, 6), cell(0, 7)),
        (
            "2".into(),
            "w2".into(),
            "reclaim".into(),
            "open".into(),
            fp(r["lease_token"].as_str().unwrap())
        )
    );
    assert_eq!(
        (cell(1, 0), cell(1, 1), cell(1, 2), cell(1, 6), cell(1, 7)),
        (
            "1".into(),
            "w1".into(),
            "poll".into(),
            "expired".into(),
            fp(g["lease_token"].as_str().unwrap())
        )
    );
    assert!(cell(1, 5).starts_with('1'), "one renewal: {}", cell(1, 5));
    assert!(cell(1, 4).contains("ended"), "{}", cell(1, 4));
    let page = b.text().await;
    assert!(
        !page.contains(g["lease_token"].as_str().unwrap()),
        "the page never shows a lease token"
    );
    let seen = b.find("#lease").await.text().await.unwrap();
    assert!(seen.contains("w1, w2"), "workers seen: {seen}");
    b.screenshot("gateway-task-lease-history").await;

    b.goto(&app.url("/console/tasks/legacy-1")).await;
    let none = b.find("#no-grants").await.text().await.unwrap();
    assert!(none.contains("No recorded grants"), "{none}");
    b.screenshot("gateway-task-no-grants").await;
    b.close().await;
}

#[test_util::lane(browser)]
#[tokio::test]
async fn console_task_list_pages_newer_and_older_by_keyset() {
    let app = spawn_app().await;
    // 52 queued tasks, all created at the same instant (the manual clock stands still), so the
    // pages are split inside a tie of created_at.
    for i in 0..52 {
        app.submit(&format!("page-{i:02}")).await.assert_ok();
    }
    let b = Browser::start().await;
    sign_in(&b, &app).await;
    b.goto(&app.url("/console/tasks?status=queued")).await;
    let pager = b.find(".pager").await.text().await.unwrap();
    assert!(pager.contains("50 shown of 52"), "{pager}");
    assert!(!b.has("#older").await, "the first page has nothing older");
    b.find("#tasks a[href='/console/tasks/page-49']").await;
    b.click("#newer").await;
    b.find("#older").await;
    let text = b.text().await;
    assert!(
        text.contains("page-50") && text.contains("page-51") && !text.contains("page-49"),
        "{text}"
    );
    assert!(text.contains("2 shown of 52"), "{text}");
    assert!(!b.has("#newer").await, "the last page has nothing newer");
    b.screenshot("gateway-task-list-newer-page").await;
    b.click("#older").await;
    b.find("#tasks a[href='/console/tasks/page-00']").await;
    let text = b.text().await;
    assert!(
        text.contains("page-49") && !text.contains("page-50"),
        "{text}"
    );
    // The last page straight away, and a cursor that is not one.
    b.goto(&app.url("/console/tasks?before=newest")).await;
    b.find("#tasks a[href='/console/tasks/page-51']").await;
    assert!(b.has("#older").await && !b.has("#newer").await);
    b.goto(&app.url("/console/tasks?after=not-a-cursor")).await;
    assert!(b.text().await.contains("Malformed page position."));
    b.close().await;
}

/// A clock jump is an alert record, so the overview's open alerts show it with
/// the instance it happened on.
#[test_util::lane(browser)]
#[tokio::test]
async fn console_overview_shows_a_clock_jump_alert() {
    let app = spawn_app_with(|s| {
        s.lease_ttl_seconds = 4.0;
        s.worker_offline_alert_seconds = 100_000.0;
    })
    .await;
    let correct = rakuten_types::Clock::now(&app.clock);
    app.clock.advance(std::time::Duration::from_secs(3600));
    app.leased("jump-1", "w1").await;
    app.clock.set(correct);
    app.sweep().await;
    app.run_alerts().await;
    let b = Browser::start().await;
    sign_in(&b, &app).await;
    b.find("#open-alerts").await;
    let text = b.text().await;
    assert!(text.contains("clock_jump"), "{text}");
    assert!(text.contains(app.sweeper.instance_id()), "{text}");
    b.screenshot("gateway-overview-clock-jump").await;
    b.close().await;
}

/// The alerts page pages by keyset (no OFFSET), newest first: 52 open alerts
/// raised at one instant and one cleared; the first page shows the newest 50, "older" the other
/// two, "newer" back; a malformed cursor is refused.
#[test_util::lane(browser)]
#[tokio::test]
async fn console_alerts_page_pages_older_and_newer_by_keyset() {
    let app = spawn_app().await;
    let db = app._tempdir.path().join("gw.db");
    let mut raw = sqlx::SqliteConnection::connect(&format!("sqlite://{}", db.display()))
        .await
        .unwrap();
    sqlx::query(
        "WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < 52) \
         INSERT INTO alerts (alert_id, kind, subject, state, summary, raised_at) \
         SELECT printf('al-%02d', i), 'worker_offline', printf('worker-%02d', i), 'open', \
           printf('worker worker-%02d has not polled', i), '2026-07-27T08:00:00.000Z' FROM k",
    )
    .execute(&mut raw)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO alerts (alert_id, kind, subject, state, summary, raised_at, cleared_at) \
         VALUES ('al-cleared', 'worker_offline', 'worker-gone', 'cleared', 'worker worker-gone \
         has not polled', '2026-07-27T09:00:00.000Z', '2026-07-27T09:30:00.000Z')",
    )
    .execute(&mut raw)
    .await
    .unwrap();
    raw.close().await.unwrap();
    let b = Browser::start().await;
    sign_in(&b, &app).await;
    b.goto(&app.url("/console/alerts")).await;
    let pager = b.find(".pager").await.text().await.unwrap();
    assert!(pager.contains("50 shown of 52"), "{pager}");
    assert!(!b.has("#newer").await, "the first page is the newest");
    let text = b.text().await;
    assert!(
        text.contains("worker-51") && text.contains("worker-02") && !text.contains("worker-01"),
        "{text}"
    );
    assert!(!text.contains("worker-gone"), "open alerts only: {text}");
    // Newest first on the page.
    assert!(text.find("worker-51") < text.find("worker-50"), "{text}");
    b.screenshot("gateway-alerts-newest-page").await;
    b.click("#older").await;
    b.find("#newer").await;
    let text = b.text().await;
    assert!(
        text.contains("worker-00") && text.contains("worker-01") && !text.contains("worker-02"),
        "{text}"
    );
    assert!(text.contains("2 shown of 52"), "{text}");
    assert!(!b.has("#older").await, "nothing older than the oldest page");
    b.screenshot("gateway-alerts-older-page").await;
    b.click("#newer").await;
    b.find("#older").await;
    assert!(b.text().await.contains("worker-51"));
    // Every alert, the cleared one on the newest page; a cursor that is not one.
    b.goto(&app.url("/console/alerts?state=all")).await;
    let text = b.find("main").await.text().await.unwrap();
    assert!(
        text.contains("worker-gone") && text.contains("of 53"),
        "{text}"
    );
    b.goto(&app.url("/console/alerts?before=not-a-cursor"))
        .await;
    assert!(b.text().await.contains("Malformed page position."));
    // An unknown state was read as `open`, so the page looked filtered by it.
    b.goto(&app.url("/console/alerts?state=weird")).await;
    assert!(b.text().await.contains("Unknown state: open or all."));
    b.close().await;
}

/// The sign-in form posted without a browser (the token is URL-safe in these tests).
async fn post_sign_in(client: &reqwest::Client, app: &TestApp, token: &str) -> reqwest::Response {
    client
        .post(app.url("/console/sign-in"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={token}"))
        .send()
        .await
        .unwrap()
}

/// A console form over the body limit, or not sent as a form, was answered with
/// axum's plain-text rejection; it is a console page now that says nothing was done.
#[tokio::test]
async fn a_console_form_too_large_or_not_a_form_is_answered_with_a_console_page() {
    let app = spawn_app().await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let signed_in = post_sign_in(&client, &app, &app.token).await;
    let cookie = signed_in.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let big = format!("reason={}", "x".repeat(200_000));
    for (content_type, body, status) in [
        ("application/x-www-form-urlencoded", big, 413),
        ("text/plain", "reason=x".to_owned(), 415),
    ] {
        let r = client
            .post(app.url("/console/tasks/t-1/cancel"))
            .header("cookie", &cookie)
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), status);
        let ct = r.headers()["content-type"].to_str().unwrap().to_owned();
        assert!(ct.starts_with("text/html"), "{ct}");
        let page = r.text().await.unwrap();
        assert!(page.contains("nothing was done"), "{page}");
    }
}

/// Signing in with another role's token said "This is a upstream token".
#[tokio::test]
async fn signing_in_with_another_roles_token_names_the_role_in_plain_words() {
    let app = spawn_app_with(|s| {
        s.upstream_tokens = Some("shop-a:upstream-token-0123456789".parse().unwrap());
        s.worker_tokens = Some("pc-1:worker-token-0123456789".parse().unwrap());
    })
    .await;
    let client = reqwest::Client::new();
    for (token, words) in [
        ("upstream-token-0123456789", "This is an upstream token"),
        ("worker-token-0123456789", "This is a worker token"),
    ] {
        let page = post_sign_in(&client, &app, token)
            .await
            .text()
            .await
            .unwrap();
        assert!(page.contains(words), "{page}");
    }
}

/// A task whose worker reported `ordered` with the site's order number and then lost its lease:
/// the words an operator reads first (Needs attention, the task page's banner) say the order
/// exists, and the resolve form starts from the reported state and order number. A task that got
/// no further than the cart says to check whether a submit happened, and its form starts blank.
#[test_util::lane(browser)]
#[tokio::test]
async fn console_words_and_resolve_form_start_from_the_latest_report() {
    const ORDER: &str = "306087-20261204-0000001";
    let app = spawn_app().await;
    let g = app.leased("ordered-1", "w1").await;
    app.report(
        "ordered-1",
        json!({"worker_id": "w1", "lease_token": g["lease_token"], "state": "ordered",
               "site_order_id": ORDER, "evidence_ref": "ordered-1/04-order-submit"}),
    )
    .await
    .assert_ok();
    app.expire_leases();
    assert_eq!(app.sweep().await.len(), 1);
    stale_task(&app, "cart-1", "w2").await;

    let b = Browser::start().await;
    sign_in(&b, &app).await;
    b.goto(&app.url("/console/attention")).await;
    let rows = b
        .eval(
            "return [...document.querySelectorAll('#attention tbody tr')]\
             .map(r => r.innerText);",
        )
        .await;
    let rows: Vec<String> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_owned())
        .collect();
    let ordered = rows.iter().find(|r| r.contains("ordered-1")).unwrap();
    assert!(
        ordered.contains(ORDER) && ordered.contains("the order exists"),
        "{ordered}"
    );
    assert!(ordered.contains("payment"), "{ordered}");
    assert!(!ordered.contains("may or may not"), "{ordered}");
    let cart = rows.iter().find(|r| r.contains("cart-1")).unwrap();
    assert!(
        cart.contains("nothing past the cart") && cart.contains("whether a submit happened"),
        "{cart}"
    );
    b.screenshot("gateway-attention-latest-report").await;

    b.goto(&app.url("/console/tasks/ordered-1")).await;
    let why = b.find("#why").await.text().await.unwrap();
    assert!(
        why.contains(ORDER) && why.contains("the order exists") && !why.contains("may or may not"),
        "{why}"
    );
    let field = |name: &'static str, tag: &'static str| {
        format!("return document.querySelector('#form-resolve {tag}[name={name}]').value;")
    };
    assert_eq!(b.eval(&field("site_order_id", "input")).await, ORDER);
    assert_eq!(b.eval(&field("state", "select")).await, "ordered");
    assert_eq!(
        b.eval(&field("outcome", "select")).await,
        "",
        "the verdict stays the person's"
    );
    b.screenshot("gateway-task-reported-order").await;
    b.eval("document.querySelector('#actions').scrollIntoView(); return 1;")
        .await;
    b.screenshot("gateway-task-reported-order-form").await;

    b.goto(&app.url("/console/tasks/cart-1")).await;
    let why = b.find("#why").await.text().await.unwrap();
    assert!(why.contains("whether a submit happened"), "{why}");
    assert_eq!(b.eval(&field("site_order_id", "input")).await, "");
    assert_eq!(b.eval(&field("state", "select")).await, "");
    b.close().await;
}

/// A task resolved `failed`, then a late `paid` from its worker (D-late-report-contradiction-alert):
/// the overview shows the `task_state_contradicts_outcome` alert, the task page offers the
/// correction with the worker's state and order number filled in, and the corrected verdict is
/// `succeeded`, audited under the operator. Needs attention lists a succeeded task a late report
/// contradicts as well as the failed one. The overview's worker card, with more workers than
/// it lists, says how many it shows and where the rest are.
#[test_util::lane(browser)]
#[tokio::test]
async fn console_corrects_a_verdict_a_late_report_contradicts() {
    const ORDER: &str = "306087-20261205-0000000009";
    let app = spawn_app_with(|s| s.worker_offline_alert_seconds = 100_000.0).await;
    stale_task(&app, "late-1", "w1").await;
    app.resolve(
        "late-1",
        json!({"outcome": "failed", "reason": "no order seen on the site"}),
    )
    .await
    .assert_ok();
    app.report(
        "late-1",
        json!({"worker_id": "w1", "state": "paid", "terminal": true, "site_order_id": ORDER}),
    )
    .await
    .assert_ok();
    // A succeeded task with a late `in_cart`: listed under Needs attention, however long ago it
    // ended.
    let g = app.leased("late-2", "w2").await;
    app.report(
        "late-2",
        json!({"worker_id": "w2", "lease_token": g["lease_token"], "state": "paid", "terminal": true}),
    )
    .await
    .assert_ok();
    app.report("late-2", json!({"worker_id": "w2", "state": "in_cart"}))
        .await
        .assert_ok();
    app.run_alerts().await;
    for i in 0..55 {
        app.lease(&format!("idle-{i:02}"), 0.0).await.assert_ok();
    }

    let b = Browser::start().await;
    sign_in(&b, &app).await;
    let alerts = b.find("#open-alerts").await.text().await.unwrap();
    assert!(
        alerts.contains("task_state_contradicts_outcome") && alerts.contains("late-1"),
        "{alerts}"
    );
    let workers = b.find("#workers").await.text().await.unwrap();
    assert!(workers.contains("Showing 50 of 57"), "{workers}");
    b.screenshot("gateway-overview-contradiction").await;

    b.goto(&app.url("/console/attention")).await;
    let rows = b.find("#attention").await.text().await.unwrap();
    assert!(
        rows.contains("late-1") && rows.contains("late-2") && rows.contains("Succeeded, but"),
        "{rows}"
    );
    b.screenshot("gateway-attention-contradicted").await;

    b.goto(&app.url("/console/tasks/late-1")).await;
    let note = b.find("#contradiction").await.text().await.unwrap();
    assert!(note.contains("paid") && note.contains("failed"), "{note}");
    let field = |name: &'static str, tag: &'static str| {
        format!("return document.querySelector('#form-resolve {tag}[name={name}]').value;")
    };
    assert_eq!(b.eval(&field("site_order_id", "input")).await, ORDER);
    assert_eq!(b.eval(&field("state", "select")).await, "paid");
    b.eval("document.querySelector('#actions').scrollIntoView(); return 1;")
        .await;
    b.screenshot("gateway-task-contradicted").await;
    b.eval("document.querySelector('#form-resolve select[name=outcome]').value = 'succeeded'; return 1;")
        .await;
    b.fill(
        "#form-resolve textarea[name=reason]",
        "the order is paid on the site",
    )
    .await;
    b.click("#form-resolve button").await;
    b.confirm().await;
    b.find(".notice.ok").await;
    assert_eq!(app.status_of("late-1").await, "succeeded");
    let audit = b.find("#audit-rows").await.text().await.unwrap();
    assert!(
        audit.contains("the order is paid on the site") && audit.contains("corrects"),
        "{audit}"
    );
    b.close().await;
}
