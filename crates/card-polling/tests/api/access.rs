//! Who may read and do what, on every entry (README "Who may read and do what"): the API and the
//! console apply one permission and one scope (`domain::access::authorize`), out of scope reads
//! like missing, a console session ends with the credential that opened it, and every route and
//! console page of the router is checked against every role ([`every_route_and_console_page_checks_every_role`]).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::helpers::*;

// Accounts beyond the standard world (`TestApp::seed`).
const SA: &str = "tok-super-admin-full-001";
const SA_NO_DATA: &str = "tok-super-admin-nodata-01";
const SA_NO_MANUAL: &str = "tok-super-admin-nomanual1";
const PLATFORM_NO_MANUAL: &str = "tok-platform-nomanual-001";
const AGENT_NO_MANUAL: &str = "tok-agent-a-nomanual-0001";
const AGENT_REVOKED: &str = "tok-agent-a-revoked-00001";

async fn spawn_world() -> TestApp {
    let app = spawn_seeded().await;
    app.post_ok(
        "/api/admin/import",
        ADMIN,
        json!({"accounts": [
            {"id": "sa", "role": "super_admin", "token": SA},
            {"id": "sa-nodata", "role": "super_admin", "token": SA_NO_DATA, "perm_card_data": false},
            {"id": "sa-nomanual", "role": "super_admin", "token": SA_NO_MANUAL, "perm_manual_trigger": false},
            {"id": "plat-nomanual", "role": "platform", "token": PLATFORM_NO_MANUAL, "perm_manual_trigger": false},
            {"id": "agent-a-nomanual", "role": "agent", "shop_id": "A", "token": AGENT_NO_MANUAL, "perm_manual_trigger": false},
            {"id": "agent-a-revoked", "role": "agent", "shop_id": "A", "token": AGENT_REVOKED},
        ]}),
    )
    .await;
    app
}

/// An active item of card CA1 (shop A).
async fn item_of_shop_a(app: &TestApp) -> i64 {
    let (s, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["card_status"], "reason": "access"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    v["data"]["items"][0]["item_id"].as_i64().unwrap()
}

/// A console client: no redirect followed, so a redirect to the sign-in page is seen as such.
fn console_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// A signed-in console session: its cookie and its CSRF token.
#[derive(Debug, Clone, Default)]
struct Session {
    cookie: Option<String>,
    csrf: String,
}

async fn sign_in(app: &TestApp, token: &str) -> Session {
    let cookie = console_cookie(app, token).await;
    let (status, body, _) = console(app, &Some(cookie.clone()), "GET", "/console", None).await;
    assert_eq!(status, 200, "{body}");
    let csrf = body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a CSRF field on the page")
        .to_owned();
    Session {
        cookie: Some(cookie),
        csrf,
    }
}

/// One console request: status, body, and where a redirect points.
async fn console(
    app: &TestApp,
    cookie: &Option<String>,
    method: &str,
    path: &str,
    form: Option<String>,
) -> (u16, String, Option<String>) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut req = console_client().request(method, format!("{}{path}", app.base));
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    if let Some(f) = form {
        req = req
            .header("content-type", "application/x-www-form-urlencoded")
            .body(f);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let location = resp
        .headers()
        .get("location")
        .and_then(|l| l.to_str().ok())
        .map(str::to_owned);
    (status, resp.text().await.unwrap(), location)
}

fn signed_out(answer: &(u16, String, Option<String>)) -> bool {
    answer.0 == 303 && answer.2.as_deref() == Some("/console/sign-in")
}

/// An agent (or a platform account) without the manual trigger permission gets 403 from the API's
/// item reads, and used to see the same items, their audit trail and carrier calls in the console.
#[super::lane]
#[tokio::test]
async fn the_console_applies_the_read_permission_of_the_api() {
    let app = spawn_world().await;
    let id = item_of_shop_a(&app).await;
    app.cycle_and_drain().await;
    for token in [AGENT_NO_MANUAL, PLATFORM_NO_MANUAL, SA_NO_MANUAL] {
        let (s, v) = app.get(&format!("/api/priority-items/{id}"), token).await;
        assert_eq!(s, 403, "{token}: {v}");
        let (s, v) = app.get("/api/priority-items", token).await;
        assert_eq!(s, 403, "{token}: {v}");
        let session = sign_in(&app, token).await;
        for path in [
            format!("/console/items/{id}"),
            "/console/items".to_owned(),
            "/console/exceptions".to_owned(),
            "/console/items?iccid=CA1".to_owned(),
        ] {
            let (s, body, _) = console(&app, &session.cookie, "GET", &path, None).await;
            assert_eq!(s, 403, "{token} {path}: {body}");
            assert!(
                !body.contains("CA1") && !body.contains("Audit trail"),
                "{token} {path}: {body}"
            );
        }
    }
    // The same permission lets the reader in, in its scope: agent B reads A's item as missing,
    // in the API and the console alike.
    let (s, _) = app.get(&format!("/api/priority-items/{id}"), AGENT_A).await;
    assert_eq!(s, 200);
    let agent_a = sign_in(&app, AGENT_A).await;
    let (s, body, _) = console(&app, &agent_a.cookie, "GET", &format!("/console/items/{id}"), None).await;
    assert_eq!(s, 200, "{body}");
    let (s, v) = app.get(&format!("/api/priority-items/{id}"), AGENT_B).await;
    assert_eq!((s, v["code"].as_i64()), (404, Some(7001)));
    let agent_b = sign_in(&app, AGENT_B).await;
    let out_of_scope = console(&app, &agent_b.cookie, "GET", &format!("/console/items/{id}"), None).await;
    let missing = console(&app, &agent_b.cookie, "GET", "/console/items/987654", None).await;
    assert_eq!((out_of_scope.0, missing.0), (404, 404));
    let main = |page: &str| page.split("<main>").nth(1).unwrap_or_default().to_owned();
    assert_eq!(
        main(&out_of_scope.1),
        main(&missing.1),
        "out of scope reads like missing"
    );
}

/// The spec lets only super_admin and platform accounts holding the card data permission close;
/// a super_admin without it closed items through the API and the console.
#[super::lane]
#[tokio::test]
async fn a_super_admin_without_card_data_permission_cannot_close() {
    let app = spawn_world().await;
    let id = item_of_shop_a(&app).await;
    let (s, v) = app
        .post(
            &format!("/api/priority-items/{id}/close"),
            SA_NO_DATA,
            json!({"reason": "no permission"}),
        )
        .await;
    assert_eq!((s, v["code"].as_i64()), (403, Some(1002)), "{v}");
    let session = sign_in(&app, SA_NO_DATA).await;
    let (s, body, _) = console(
        &app,
        &session.cookie,
        "POST",
        &format!("/console/items/{id}/close"),
        Some(format!("csrf={}&reason=no+permission", session.csrf)),
    )
    .await;
    assert_eq!(s, 403, "{body}");
    // The item page offers no close button to it either.
    let (_, page, _) = console(&app, &session.cookie, "GET", &format!("/console/items/{id}"), None).await;
    assert!(!page.contains("form-close"), "{page}");
    assert_eq!(app.detail(id).await["item"]["status"], "pending");
    // With the permission, the same role closes.
    let (s, v) = app
        .post(
            &format!("/api/priority-items/{id}/close"),
            SA,
            json!({"reason": "with permission"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
}

/// A console session signed in with the admin token kept reading and closing for up to 8 hours
/// after the token was changed and the service restarted with the same console key: the session
/// now carries a keyed fingerprint of the credential it was opened with, checked on every request.
#[super::lane]
#[tokio::test]
async fn a_console_session_ends_when_its_token_is_rotated() {
    const KEY: &str = "a-console-key-shared-by-both-starts-0123456789";
    let before = spawn_with(Backend::Memory, |s| s.console_key = Some(KEY.into())).await;
    before.seed().await;
    let session = sign_in(&before, ADMIN).await;
    // The service again, same console key, another admin token.
    let after = spawn_with(Backend::Memory, |s| {
        s.console_key = Some(KEY.into());
        s.admin_token = card_polling::settings::Secret::new("admin-token-rotated-9876543210");
    })
    .await;
    after.seed_as("admin-token-rotated-9876543210").await;
    let id = item_of_shop_a(&after).await;
    for (method, path, form) in [
        ("GET", "/console".to_owned(), None),
        ("GET", "/console/items".to_owned(), None),
        ("GET", format!("/console/items/{id}"), None),
        (
            "POST",
            format!("/console/items/{id}/close"),
            Some(format!("csrf={}&reason=stale+session", session.csrf)),
        ),
    ] {
        let answer = console(&after, &session.cookie, method, &path, form).await;
        assert!(signed_out(&answer), "{method} {path}: {answer:?}");
    }
    assert_eq!(after.detail(id).await["item"]["status"], "pending");
    // The service that opened it still honours it (same token).
    let (s, _, _) = console(&before, &session.cookie, "GET", "/console/items", None).await;
    assert_eq!(s, 200);
}

/// An imported account could not be revoked or changed (a re-import is a 409): its token is
/// replaced or revoked through `PUT`/`DELETE /api/admin/accounts/{id}/token`, which also ends
/// the console sessions it opened.
#[super::lane]
#[tokio::test]
async fn a_revoked_account_can_no_longer_sign_in_or_call_and_its_sessions_end() {
    let app = spawn_world().await;
    let session = sign_in(&app, AGENT_REVOKED).await;
    let (s, _, _) = console(&app, &session.cookie, "GET", "/console/items", None).await;
    assert_eq!(s, 200);
    // Only a super_admin manages accounts.
    let (s, _) = app
        .send(reqwest::Method::DELETE, "/api/admin/accounts/agent-a-revoked/token", Some(PLATFORM), None)
        .await;
    assert_eq!(s, 403);
    let (s, v) = app
        .send(reqwest::Method::DELETE, "/api/admin/accounts/agent-a-revoked/token", Some(ADMIN), None)
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["data"], json!({"id": "agent-a-revoked", "token": "revoked"}));
    let (s, _) = app.get("/api/priority-items", AGENT_REVOKED).await;
    assert_eq!(s, 401);
    let answer = console(&app, &session.cookie, "GET", "/console/items", None).await;
    assert!(signed_out(&answer), "{answer:?}");
    let (s, body, _) = console(
        &app,
        &None,
        "POST",
        "/console/sign-in",
        Some(format!("token={AGENT_REVOKED}")),
    )
    .await;
    assert_eq!(s, 401, "{body}");
    // Revoking again changes nothing; an unknown account is a 404.
    let (s, _) = app
        .send(reqwest::Method::DELETE, "/api/admin/accounts/agent-a-revoked/token", Some(ADMIN), None)
        .await;
    assert_eq!(s, 200);
    let (s, v) = app
        .send(reqwest::Method::DELETE, "/api/admin/accounts/nobody/token", Some(ADMIN), None)
        .await;
    assert_eq!((s, v["code"].as_i64()), (404, Some(1005)), "{v}");
    // A re-import of the revoked account says it is revoked.
    let (s, v) = app
        .send(
            reqwest::Method::POST,
            "/api/admin/import?existing=skip",
            Some(ADMIN),
            Some(json!({"accounts": [{"id": "agent-a-revoked", "role": "agent", "shop_id": "A", "token": AGENT_REVOKED}]})),
        )
        .await;
    assert_eq!(s, 409, "{v}");
    assert!(v["msg"].as_str().unwrap().contains("revoked"), "{v}");
    // A new token brings the account back.
    let fresh = "tok-agent-a-revoked-fresh01";
    let (s, v) = app
        .put("/api/admin/accounts/agent-a-revoked/token", ADMIN, json!({"token": fresh}))
        .await;
    assert_eq!(s, 200, "{v}");
    let (s, _) = app.get("/api/priority-items", fresh).await;
    assert_eq!(s, 200);
}

#[super::lane]
#[tokio::test]
async fn replacing_an_accounts_token_ends_its_old_token_and_sessions() {
    let app = spawn_world().await;
    let old = sign_in(&app, AGENT_A).await;
    let new_token = "tok-agent-a-replaced-00001";
    // The rules of an imported token hold: not the admin token, not another account's, 16-256.
    for (token, status) in [(ADMIN, 422), (AGENT_B, 409), ("short", 422)] {
        let (s, v) = app
            .put("/api/admin/accounts/agent-a/token", ADMIN, json!({"token": token}))
            .await;
        assert_eq!(s, status, "{token}: {v}");
        assert!(!v["msg"].as_str().unwrap().contains(token), "{v}");
    }
    let (s, v) = app
        .put("/api/admin/accounts/agent-a/token", ADMIN, json!({"token": new_token}))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["data"], json!({"id": "agent-a", "token": "replaced"}));
    let (s, _) = app.get("/api/priority-items", AGENT_A).await;
    assert_eq!(s, 401);
    let (s, _) = app.get("/api/priority-items", new_token).await;
    assert_eq!(s, 200);
    let answer = console(&app, &old.cookie, "GET", "/console/items", None).await;
    assert!(signed_out(&answer), "{answer:?}");
    let new = sign_in(&app, new_token).await;
    let (s, _, _) = console(&app, &new.cookie, "GET", "/console/items", None).await;
    assert_eq!(s, 200);
    // A permission the session's account lost applies at once, not at its next sign-in.
    sqlx::query("UPDATE accounts SET perm_manual_trigger = $1 WHERE id = 'agent-a'")
        .bind(false)
        .execute(app.db.fixture_pool())
        .await
        .unwrap();
    let (s, _, _) = console(&app, &new.cookie, "GET", "/console/items", None).await;
    assert_eq!(s, 403);
}

/// A session opened before its token was revoked or replaced stays ended when the same token is
/// set again: the session's credential covers when the token was set, not only its value. It
/// used to come back to life, signed in as the account again.
#[super::lane]
#[tokio::test]
async fn a_session_stays_ended_when_its_token_is_set_again_to_the_same_value() {
    let app = spawn_world().await;
    let session = sign_in(&app, AGENT_A).await;
    let (s, _, _) = console(&app, &session.cookie, "GET", "/console/items", None).await;
    assert_eq!(s, 200);
    let (s, _) = app
        .send(reqwest::Method::DELETE, "/api/admin/accounts/agent-a/token", Some(ADMIN), None)
        .await;
    assert_eq!(s, 200);
    let answer = console(&app, &session.cookie, "GET", "/console/items", None).await;
    assert!(signed_out(&answer), "{answer:?}");
    let (s, v) = app
        .put("/api/admin/accounts/agent-a/token", ADMIN, json!({"token": AGENT_A}))
        .await;
    assert_eq!(s, 200, "{v}");
    let answer = console(&app, &session.cookie, "GET", "/console/items", None).await;
    assert!(signed_out(&answer), "revived after the same token was set again: {answer:?}");
    // Replaced by another and set back: the same.
    let again = sign_in(&app, AGENT_A).await;
    for token in ["tok-agent-a-interim-000001", AGENT_A] {
        let (s, v) = app
            .put("/api/admin/accounts/agent-a/token", ADMIN, json!({"token": token}))
            .await;
        assert_eq!(s, 200, "{v}");
    }
    let answer = console(&app, &again.cookie, "GET", "/console/items", None).await;
    assert!(signed_out(&answer), "{answer:?}");
    // A new sign-in with the token works.
    let fresh = sign_in(&app, AGENT_A).await;
    let (s, _, _) = console(&app, &fresh.cookie, "GET", "/console/items", None).await;
    assert_eq!(s, 200);
}

/// `GET /api/task-types` answered without any token; every other `/api` route asks for one.
#[super::lane]
#[tokio::test]
async fn task_types_need_a_token() {
    let app = spawn_world().await;
    let (s, v) = app
        .send(reqwest::Method::GET, "/api/task-types", None, None)
        .await;
    assert_eq!((s, v["code"].as_i64()), (401, Some(1001)), "{v}");
    let (s, _) = app.get("/api/task-types", "not-a-token-at-all-000").await;
    assert_eq!(s, 401);
    let (s, _) = app.get("/api/task-types", ENTERPRISE).await;
    assert_eq!(s, 403);
    for token in [ADMIN, PLATFORM, AGENT_A, AGENT_NO_MANUAL] {
        let (s, v) = app.get("/api/task-types", token).await;
        assert_eq!(s, 200, "{token}: {v}");
        assert_eq!(v["data"][0]["name"], "card_status", "{v}");
    }
}

/// `/health` gave enterprise and agent accounts every shop's counts and ages: queue state is for
/// operators (super_admin, platform); an agent sees what an anonymous probe sees, an enterprise
/// account is refused (README "Who may read and do what").
#[super::lane]
#[tokio::test]
async fn health_shows_queue_state_only_to_operators() {
    let app = spawn_world().await;
    item_of_shop_a(&app).await;
    for token in [ADMIN, SA_NO_DATA, SA_NO_MANUAL, PLATFORM, PLATFORM_NO_DATA] {
        let (s, v) = app.get("/health", token).await;
        assert_eq!(s, 200, "{token}: {v}");
        assert_eq!(v["data"]["database"]["items"]["pending"], 1, "{token}: {v}");
        assert!(v["data"]["queues"].is_array(), "{token}: {v}");
    }
    let (_, anonymous) = app.send(reqwest::Method::GET, "/health", None, None).await;
    for token in [AGENT_A, AGENT_NO_MANUAL] {
        let (s, v) = app.get("/health", token).await;
        assert_eq!(s, 200, "{token}: {v}");
        assert_eq!(v, anonymous, "{token}");
        assert_eq!(v["data"], json!({"status": "ok", "database": "reachable"}));
    }
    let (s, v) = app.get("/health", ENTERPRISE).await;
    assert_eq!((s, v["code"].as_i64()), (403, Some(1002)), "{v}");
    let (s, _) = app.get("/health", "not-a-token-at-all-000").await;
    assert_eq!(s, 401);
}

// ---------------------------------------------------------------- the matrix

/// The roles of the matrix, in the order of every row's expected statuses.
const ROLES: [&str; 14] = [
    "no token",
    "wrong token",
    "bootstrap admin",
    "super_admin",
    "super_admin without card data",
    "super_admin without manual trigger",
    "platform",
    "platform without card data",
    "platform without manual trigger",
    "agent of A",
    "agent of B",
    "agent of A without manual trigger",
    "enterprise",
    "revoked agent of A",
];

/// The Bearer token of each role (`None`: no header).
const TOKENS: [Option<&str>; 14] = [
    None,
    Some("tok-that-no-account-holds-01"),
    Some(ADMIN),
    Some(SA),
    Some(SA_NO_DATA),
    Some(SA_NO_MANUAL),
    Some(PLATFORM),
    Some(PLATFORM_NO_DATA),
    Some(PLATFORM_NO_MANUAL),
    Some(AGENT_A),
    Some(AGENT_B),
    Some(AGENT_NO_MANUAL),
    Some(ENTERPRISE),
    Some(AGENT_REVOKED),
];

/// One route or console page of the router (method and path pattern), the request the matrix
/// sends (`{id}`: an active item of shop A; `{csrf}`: the role's session CSRF token; `{token}`:
/// the role's token), and the status each role gets, in [`ROLES`] order. A write is sent with a
/// body the route refuses (422) once the account may call it, or naming something that does not
/// exist (404), so the matrix changes nothing.
struct Case {
    method: &'static str,
    pattern: &'static str,
    path: &'static str,
    body: Option<&'static str>,
    expect: [u16; 14],
}

/// Shorthands for the rows below.
const fn row(
    method: &'static str,
    pattern: &'static str,
    path: &'static str,
    body: Option<&'static str>,
    expect: [u16; 14],
) -> Case {
    Case {
        method,
        pattern,
        path,
        body,
        expect,
    }
}

//                     none wrong admin sa  sa-nd sa-nm plat pl-nd pl-nm ag-A ag-B ag-nm  ent  revoked
const ANYONE: [u16; 14] = [200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200];
const HEALTH: [u16; 14] = [200, 401, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 403, 401];
const OPERATORS: [u16; 14] = [401, 401, 200, 200, 200, 200, 200, 200, 200, 403, 403, 403, 403, 401];
const CONFIG: [u16; 14] = [401, 401, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 403, 401];
const SUPER_422: [u16; 14] = [401, 401, 422, 422, 422, 422, 403, 403, 403, 403, 403, 403, 403, 401];
const SUPER_404: [u16; 14] = [401, 401, 404, 404, 404, 404, 403, 403, 403, 403, 403, 403, 403, 401];
const ADMIN_422: [u16; 14] = [401, 401, 422, 422, 422, 422, 422, 422, 422, 403, 403, 403, 403, 401];
const ADMIN_404: [u16; 14] = [401, 401, 404, 404, 404, 404, 404, 404, 404, 403, 403, 403, 403, 401];
const READ_LIST: [u16; 14] = [401, 401, 200, 200, 200, 403, 200, 200, 403, 200, 200, 403, 403, 401];
const READ_ONE: [u16; 14] = [401, 401, 200, 200, 200, 403, 200, 200, 403, 200, 404, 403, 403, 401];
const ENQUEUE_422: [u16; 14] = [401, 401, 422, 422, 422, 403, 422, 422, 403, 422, 422, 403, 403, 401];
const CLOSE_422: [u16; 14] = [401, 401, 422, 422, 403, 422, 422, 403, 422, 403, 403, 403, 403, 401];
// The console: without a live session every page sends to the sign-in page (303); an enterprise
// account cannot sign in (403: a known token without access), a revoked account's session has
// ended.
const C_SIGN_IN: [u16; 14] = [401, 401, 303, 303, 303, 303, 303, 303, 303, 303, 303, 303, 403, 401];
const C_ANY: [u16; 14] = [303, 303, 303, 303, 303, 303, 303, 303, 303, 303, 303, 303, 303, 303];
const C_OVERVIEW: [u16; 14] = [303, 303, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 303, 303];
const C_LIST: [u16; 14] = [303, 303, 200, 200, 200, 403, 200, 200, 403, 200, 200, 403, 303, 303];
const C_ONE: [u16; 14] = [303, 303, 200, 200, 200, 403, 200, 200, 403, 200, 404, 403, 303, 303];
const C_CLOSE: [u16; 14] = [303, 303, 422, 422, 403, 422, 422, 403, 422, 403, 403, 403, 303, 303];
const C_RETRIGGER: [u16; 14] = [303, 303, 422, 422, 422, 403, 422, 422, 403, 422, 422, 403, 303, 303];

fn cases() -> Vec<Case> {
    let bad = Some(r#"{"nonsense": true}"#);
    let empty = Some("{}");
    let no_reason = Some(r#"{"reason": ""}"#);
    vec![
        row("GET", "/livez", "/livez", None, ANYONE),
        row("GET", "/readyz", "/readyz", None, ANYONE),
        row("GET", "/health", "/health", None, HEALTH),
        row("GET", "/metrics", "/metrics", None, OPERATORS),
        row("GET", "/openapi.json", "/openapi.json", None, ANYONE),
        row("GET", "/api/task-types", "/api/task-types", None, CONFIG),
        row("POST", "/api/admin/import", "/api/admin/import", bad, SUPER_422),
        row("PUT", "/api/admin/accounts/{id}/token", "/api/admin/accounts/agent-a/token", empty, SUPER_422),
        row("DELETE", "/api/admin/accounts/{id}/token", "/api/admin/accounts/nobody/token", None, SUPER_404),
        row("POST", "/api/orders", "/api/orders", empty, ADMIN_422),
        row("POST", "/api/payments/callback", "/api/payments/callback", empty, ADMIN_422),
        row("POST", "/api/usages/{id}/activate", "/api/usages/NOPE/activate", None, ADMIN_404),
        row("POST", "/api/package-poll", "/api/package-poll", empty, ADMIN_422),
        row("PUT", "/api/cards/{iccid}/polling", "/api/cards/NOPE/polling", empty, ADMIN_422),
        row("PUT", "/api/cards/{iccid}/stop-lock", "/api/cards/NOPE/stop-lock", empty, ADMIN_422),
        row("DELETE", "/api/cards/{iccid}", "/api/cards/NOPE", None, ADMIN_404),
        row("PUT", "/api/devices/{device_no}/polling", "/api/devices/NOPE/polling", empty, ADMIN_422),
        row("PUT", "/api/devices/{device_no}/reported-slot", "/api/devices/NOPE/reported-slot", Some(r#"{"iccid": 5}"#), ADMIN_422),
        row("PUT", "/api/bindings", "/api/bindings", empty, ADMIN_422),
        row("GET", "/api/priority-items", "/api/priority-items", None, READ_LIST),
        row("POST", "/api/priority-items", "/api/priority-items", empty, ENQUEUE_422),
        row("GET", "/api/priority-items/{id}", "/api/priority-items/{id}", None, READ_ONE),
        row("POST", "/api/priority-items/{id}/close", "/api/priority-items/{id}/close", no_reason, CLOSE_422),
        row("POST", "/api/priority-items/{id}/retrigger", "/api/priority-items/{id}/retrigger", no_reason, ENQUEUE_422),
        row("POST", "/api/manual-triggers", "/api/manual-triggers", empty, ENQUEUE_422),
        row("GET", "/api/scheduler/last-cycle", "/api/scheduler/last-cycle", None, OPERATORS),
        row("GET", "/console/static/console.css", "/console/static/console.css", None, ANYONE),
        row("GET", "/console/static/console.js", "/console/static/console.js", None, ANYONE),
        row("GET", "/console/sign-in", "/console/sign-in", None, ANYONE),
        row("POST", "/console/sign-in", "/console/sign-in", Some("token={token}"), C_SIGN_IN),
        row("POST", "/console/sign-out", "/console/sign-out", Some("csrf={csrf}"), C_ANY),
        row("GET", "/console", "/console", None, C_OVERVIEW),
        row("GET", "/console/items", "/console/items", None, C_LIST),
        row("GET", "/console/exceptions", "/console/exceptions", None, C_LIST),
        row("GET", "/console/items/{id}", "/console/items/{id}", None, C_ONE),
        row("POST", "/console/items/{id}/close", "/console/items/{id}/close", Some("csrf={csrf}&reason="), C_CLOSE),
        row("POST", "/console/items/{id}/retrigger", "/console/items/{id}/retrigger", Some("csrf={csrf}&reason="), C_RETRIGGER),
    ]
}

/// Every route and console page the router serves × every role. A route added to the router
/// (`card_polling::http::served_routes`) without a row here fails this test, and so does a row
/// for a route the router does not serve. Every API route is in the OpenAPI document too.
#[super::lane]
#[tokio::test]
async fn every_route_and_console_page_checks_every_role() {
    let cases = cases();
    let served: Vec<(String, String)> = card_polling::http::served_routes()
        .into_iter()
        .map(|(m, p)| (m.to_string(), p.to_owned()))
        .collect();
    let listed: Vec<(String, String)> = cases
        .iter()
        .map(|c| (c.method.to_owned(), c.pattern.to_owned()))
        .collect();
    for r in &served {
        assert!(listed.contains(r), "{r:?} is served but has no row in the matrix");
    }
    for r in &listed {
        assert!(served.contains(r), "{r:?} has a matrix row but is not served");
    }
    // The OpenAPI document lists every route outside the console (and nothing else).
    let doc = card_polling::http::openapi::document();
    let mut documented = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            documented.push((method.to_ascii_uppercase(), path.clone()));
        }
    }
    documented.sort();
    let mut api: Vec<(String, String)> = served
        .iter()
        .filter(|(_, p)| !p.starts_with("/console") && p != "/openapi.json")
        .cloned()
        .collect();
    api.sort();
    assert_eq!(documented, api, "the OpenAPI document and the router differ");

    let app = spawn_world().await;
    let id = item_of_shop_a(&app).await.to_string();
    // Sessions, opened before the revoked account is revoked.
    let mut sessions = Vec::new();
    for token in TOKENS {
        sessions.push(match token {
            Some(t) if t != ENTERPRISE && t != TOKENS[1].unwrap() => sign_in(&app, t).await,
            Some(t) if t == TOKENS[1].unwrap() => Session {
                cookie: Some("rakuten_console=forged0123456789abcdef".into()),
                csrf: "forged".into(),
            },
            _ => Session::default(),
        });
    }
    let (s, v) = app
        .send(reqwest::Method::DELETE, "/api/admin/accounts/agent-a-revoked/token", Some(ADMIN), None)
        .await;
    assert_eq!(s, 200, "{v}");

    let mut wrong: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for c in &cases {
        for (r, role) in ROLES.iter().enumerate() {
            let path = c.path.replace("{id}", &id);
            let got = if c.pattern.starts_with("/console") {
                let s = &sessions[r];
                let body = c.body.map(|b| {
                    b.replace("{csrf}", &s.csrf)
                        .replace("{token}", TOKENS[r].unwrap_or(""))
                });
                console(&app, &s.cookie, c.method, &path, body).await.0
            } else {
                let method = reqwest::Method::from_bytes(c.method.as_bytes()).unwrap();
                let mut req = app.client.request(method, format!("{}{path}", app.base));
                if let Some(t) = TOKENS[r] {
                    req = req.bearer_auth(t);
                }
                if let Some(b) = c.body {
                    req = req.header("content-type", "application/json").body(b);
                }
                req.send().await.unwrap().status().as_u16()
            };
            if got != c.expect[r] {
                wrong
                    .entry(format!("{} {}", c.method, c.pattern))
                    .or_default()
                    .push(format!("{role}: {got} (expected {})", c.expect[r]));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    // Nothing changed: the item is still pending, with its one creating fact.
    let d = app.detail(id.parse().unwrap()).await;
    assert_eq!(d["item"]["status"], "pending", "{d}");
    let kinds: Vec<Value> = d["events"].as_array().unwrap().iter().map(|e| e["kind"].clone()).collect();
    assert_eq!(kinds, [json!("enqueue")], "{d}");
}
