//! Who may read and do what, on every entry (`docs/readme-sections/roles.md`): every route and
//! console page the service serves × every role, no token and a wrong token
//! ([`every_route_and_console_page_checks_every_role`]); `/health` shows its detail to operators
//! only (D-health-detail-for-operators); a console session ends when its operator's token is
//! replaced under the same name (D-console-session-bound-to-token).

use std::collections::BTreeMap;

use order_gateway::roles::NamedTokens;
use order_gateway::settings::Secret;

use crate::helpers::{TestApp, spawn_app_with};

const UPSTREAM: &str = "up-token-0123456789";
const WORKER: &str = "wk-token-0123456789";
const OPERATOR: &str = "op-token-0123456789";
const METRICS: &str = "metrics-token-0123456789";
const CONSOLE_KEY: &str = "a console key of at least 32 characters, for tests";

fn tokens(s: &str) -> Option<NamedTokens> {
    Some(s.parse().unwrap())
}

async fn spawn_with_roles(operator: &str) -> TestApp {
    let operator = format!("alice:{operator}");
    spawn_app_with(move |s| {
        s.upstream_tokens = tokens(&format!("shop:{UPSTREAM}"));
        s.worker_tokens = tokens(&format!("pc-1:{WORKER}"));
        s.operator_tokens = tokens(&operator);
        s.metrics_tokens = tokens(&format!("prometheus:{METRICS}"));
        s.console_key = Some(Secret::new(CONSOLE_KEY.to_owned()));
    })
    .await
}

/// A console client: no redirect followed, so a redirect to the sign-in page is seen as such.
fn console_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// A console session: its cookie and its CSRF token.
#[derive(Debug, Clone, Default)]
struct Session {
    cookie: Option<String>,
    csrf: String,
}

/// Signs in through the form; `None` when the token opens no session.
async fn sign_in(app: &TestApp, token: &str) -> Option<Session> {
    let resp = console_client()
        .post(app.url("/console/sign-in"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={token}"))
        .send()
        .await
        .unwrap();
    let cookie = resp
        .headers()
        .get("set-cookie")?
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let cookie = Some(cookie);
    let (status, body) = console(app, &cookie, "GET", "/console", None).await;
    assert_eq!(status, 200, "{body}");
    let csrf = body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a CSRF field on the page")
        .to_owned();
    Some(Session { cookie, csrf })
}

/// What the matrix records for a redirect to the sign-in page (the console's "not signed in").
const TO_SIGN_IN: u16 = 1;

/// One console request: its status ([`TO_SIGN_IN`] for a redirect to the sign-in page) and body.
async fn console(
    app: &TestApp,
    cookie: &Option<String>,
    method: &str,
    path: &str,
    form: Option<String>,
) -> (u16, String) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut req = console_client().request(method, app.url(path));
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
    let to_sign_in = resp
        .headers()
        .get("location")
        .is_some_and(|l| l == "/console/sign-in");
    let status = if status == 303 && to_sign_in {
        TO_SIGN_IN
    } else {
        status
    };
    (status, resp.text().await.unwrap())
}

/// The roles of the matrix, in the order of every row's expected statuses.
const ROLES: [&str; 7] = [
    "no token",
    "wrong token",
    "upstream",
    "worker",
    "metrics",
    "operator",
    "api (operator)",
];

/// The Bearer token of each role (`None`: no header).
fn role_tokens(app: &TestApp) -> [Option<String>; 7] {
    [
        None,
        Some("not-a-configured-token-0123".into()),
        Some(UPSTREAM.into()),
        Some(WORKER.into()),
        Some(METRICS.into()),
        Some(OPERATOR.into()),
        Some(app.token.clone()),
    ]
}

/// One route or page (method and path pattern), the request the matrix sends (`{csrf}`: the
/// role's session CSRF token, `{token}`: the role's token) and the status each role gets, in
/// [`ROLES`] order. A write is sent with a body the route refuses (422) once the caller may call
/// it, or naming something that does not exist (404), so the matrix changes nothing.
struct Case {
    method: &'static str,
    pattern: &'static str,
    path: &'static str,
    body: Option<&'static str>,
    expect: [u16; 7],
}

const fn row(
    method: &'static str,
    pattern: &'static str,
    path: &'static str,
    body: Option<&'static str>,
    expect: [u16; 7],
) -> Case {
    Case {
        method,
        pattern,
        path,
        body,
        expect,
    }
}

const S: u16 = TO_SIGN_IN;
//                          none wrong  up   wk  metr  op   api
const ANYONE: [u16; 7] = [200, 200, 200, 200, 200, 200, 200];
const HEALTH: [u16; 7] = [200, 401, 200, 200, 200, 200, 200];
const METRICS_ROW: [u16; 7] = [401, 401, 403, 403, 200, 200, 200];
const UP_200: [u16; 7] = [401, 401, 200, 403, 403, 200, 200];
const UP_404: [u16; 7] = [401, 401, 404, 403, 403, 404, 404];
// A worker reads only the task it holds; any other answers like a missing one
// (D-worker-reads-held-task).
const READ_404: [u16; 7] = [401, 401, 404, 404, 403, 404, 404];
const UP_422: [u16; 7] = [401, 401, 422, 403, 403, 422, 422];
const WK_200: [u16; 7] = [401, 401, 403, 200, 403, 200, 200];
const WK_422: [u16; 7] = [401, 401, 403, 422, 403, 422, 422];
const OP_200: [u16; 7] = [401, 401, 403, 403, 403, 200, 200];
const OP_422: [u16; 7] = [401, 401, 403, 403, 403, 422, 422];
// The console: operators only (another role's token signs in to a 403 page that names it);
// without a live session every page sends to the sign-in page.
const C_SIGN_IN: [u16; 7] = [401, 401, 403, 403, 403, 303, 303];
const C_PAGE: [u16; 7] = [S, S, S, S, S, 200, 200];
const C_404: [u16; 7] = [S, S, S, S, S, 404, 404];
const C_422: [u16; 7] = [S, S, S, S, S, 422, 422];
const C_SIGN_OUT: [u16; 7] = [S, S, S, S, S, S, S];

#[rustfmt::skip]
fn cases() -> Vec<Case> {
    let empty = Some("{}");
    let form = Some("csrf={csrf}&reason=");
    vec![
        row("GET", "/livez", "/livez", None, ANYONE),
        row("GET", "/readyz", "/readyz", None, ANYONE),
        row("GET", "/openapi.json", "/openapi.json", None, ANYONE),
        row("GET", "/health", "/health", None, HEALTH),
        row("GET", "/metrics", "/metrics", None, METRICS_ROW),
        row("POST", "/api/orders", "/api/orders", empty, UP_422),
        row("GET", "/api/orders", "/api/orders", None, UP_200),
        row("GET", "/api/orders/lease", "/api/orders/lease?worker_id=w1&wait=0", None, WK_200),
        row("GET", "/api/orders/{task_id}", "/api/orders/nope", None, READ_404),
        row("POST", "/api/orders/{task_id}/renew", "/api/orders/nope/renew", empty, WK_422),
        row("POST", "/api/orders/{task_id}/report", "/api/orders/nope/report", empty, WK_422),
        row("POST", "/api/orders/{task_id}/reclaim", "/api/orders/nope/reclaim", empty, OP_422),
        row("POST", "/api/orders/{task_id}/resolve", "/api/orders/nope/resolve", empty, OP_422),
        row("POST", "/api/orders/{task_id}/cancel", "/api/orders/nope/cancel", empty, OP_422),
        row("GET", "/api/alerts", "/api/alerts", None, OP_200),
        row("GET", "/api/workers", "/api/workers", None, OP_200),
        row("DELETE", "/api/workers/{worker_id}", "/api/workers/nope", None, OP_422),
        row("POST", "/api/account/queries", "/api/account/queries", empty, UP_422),
        row("GET", "/api/account/queries", "/api/account/queries", None, UP_200),
        row("GET", "/api/account/queries/lease", "/api/account/queries/lease?worker_id=w1&wait=0", None, WK_200),
        row("GET", "/api/account/queries/{query_id}", "/api/account/queries/nope", None, UP_404),
        row("POST", "/api/account/queries/{query_id}/result", "/api/account/queries/nope/result", empty, WK_422),
        row("GET", "/console/static/console.css", "/console/static/console.css", None, ANYONE),
        row("GET", "/console/static/console.js", "/console/static/console.js", None, ANYONE),
        row("GET", "/console/sign-in", "/console/sign-in", None, ANYONE),
        row("POST", "/console/sign-in", "/console/sign-in", Some("token={token}"), C_SIGN_IN),
        row("GET", "/console", "/console", None, C_PAGE),
        row("GET", "/console/attention", "/console/attention", None, C_PAGE),
        row("GET", "/console/tasks", "/console/tasks", None, C_PAGE),
        row("GET", "/console/tasks/{task_id}", "/console/tasks/nope", None, C_404),
        row("POST", "/console/tasks/{task_id}/reclaim", "/console/tasks/nope/reclaim", form, C_422),
        row("POST", "/console/tasks/{task_id}/resolve", "/console/tasks/nope/resolve", form, C_422),
        row("POST", "/console/tasks/{task_id}/cancel", "/console/tasks/nope/cancel", form, C_422),
        row("POST", "/console/workers/{worker_id}/retire", "/console/workers/nope/retire", form, C_422),
        row("GET", "/console/alerts", "/console/alerts", None, C_PAGE),
        row("GET", "/console/queries", "/console/queries", None, C_PAGE),
        row("GET", "/console/queries/{query_id}", "/console/queries/nope", None, C_404),
        // The last: it ends the sessions it is sent with.
        row("POST", "/console/sign-out", "/console/sign-out", Some("csrf={csrf}"), C_SIGN_OUT),
    ]
}

/// Every route and console page the service serves × every role, no token and a wrong token. A
/// path the service serves (`order_gateway::http::served_paths`) without a row fails this test,
/// and so does a method a served path answers (anything but 405) without its row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_and_console_page_checks_every_role() {
    let cases = cases();
    let served = order_gateway::http::served_paths();
    // "/console/" only redirects to "/console", for anyone.
    let served: Vec<&str> = served.into_iter().filter(|p| *p != "/console/").collect();
    let listed: Vec<(&str, &str)> = cases.iter().map(|c| (c.method, c.pattern)).collect();
    for p in &served {
        assert!(
            listed.iter().any(|(_, lp)| lp == p),
            "{p} is served but has no row in the matrix"
        );
    }
    for (m, p) in &listed {
        assert!(
            served.contains(p),
            "{m} {p} has a matrix row but is not served"
        );
    }

    let app = spawn_with_roles(OPERATOR).await;
    let tokens = role_tokens(&app);
    let mut sessions = Vec::new();
    for (r, token) in tokens.iter().enumerate() {
        let session = match token {
            Some(t) if r != 1 => sign_in(&app, t).await,
            // A cookie the service never signed.
            Some(_) => Some(Session {
                cookie: Some("rakuten_console=forged0123456789abcdef".into()),
                csrf: "forged".into(),
            }),
            None => None,
        };
        sessions.push(session.unwrap_or_default());
    }
    let op = sessions[5].clone();
    assert!(op.cookie.is_some(), "an operator signs in");

    // A method a served path answers must have its row: every other one is 405.
    let concrete = |p: &str| {
        p.replace("{task_id}", "nope")
            .replace("{query_id}", "nope")
            .replace("{worker_id}", "nope")
    };
    for p in &served {
        for m in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
            if listed.contains(&(m, *p)) {
                continue;
            }
            let method = reqwest::Method::from_bytes(m.as_bytes()).unwrap();
            let got = console_client()
                .request(method, app.url(&concrete(p)))
                .bearer_auth(OPERATOR)
                .header("cookie", op.cookie.clone().unwrap())
                .send()
                .await
                .unwrap()
                .status()
                .as_u16();
            assert_eq!(
                got, 405,
                "{m} {p} is answered ({got}) but has no row in the matrix"
            );
        }
    }

    let mut wrong: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for c in &cases {
        for (r, role) in ROLES.iter().enumerate() {
            let got = if c.pattern.starts_with("/console") {
                let s = &sessions[r];
                let body = c.body.map(|b| {
                    b.replace("{csrf}", &s.csrf)
                        .replace("{token}", tokens[r].as_deref().unwrap_or(""))
                });
                console(&app, &s.cookie, c.method, c.path, body).await.0
            } else {
                let method = reqwest::Method::from_bytes(c.method.as_bytes()).unwrap();
                let mut req = app.client.request(method, app.url(c.path));
                if let Some(t) = &tokens[r] {
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
    // Nothing was created.
    let list = app.list("").await;
    assert_eq!(list.assert_ok()["total"], 0, "{:?}", list.body);
}

/// `/health` gave a metrics-only token (and upstream and worker tokens) the whole answer: active
/// tasks, workers and alerts. Only an operator gets them; everyone else gets the status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_shows_tasks_workers_and_alerts_only_to_operators() {
    let app = spawn_with_roles(OPERATOR).await;
    app.submit("po-health").await.assert_ok();
    for token in [None, Some(UPSTREAM), Some(WORKER), Some(METRICS)] {
        let mut req = app.client.get(app.url("/health"));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let a = crate::helpers::answer(req.send().await.unwrap()).await;
        let data = a.assert_ok();
        let keys: Vec<&String> = data.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["status"], "{token:?}: {data}");
    }
    for token in [OPERATOR, app.token.as_str()] {
        let req = app.client.get(app.url("/health")).bearer_auth(token);
        let a = crate::helpers::answer(req.send().await.unwrap()).await;
        let data = a.assert_ok();
        for key in ["queued", "active", "workers", "alerts"] {
            assert!(data.get(key).is_some(), "{key}: {data}");
        }
        assert_eq!(data["queued"], 1, "{data}");
    }
}

/// A console session kept working after its operator's token was replaced under the same name;
/// rotating a leaked token ends the sessions it opened, while a restart with the same token and
/// console key keeps them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_session_ends_when_its_operators_token_is_replaced() {
    let before = spawn_with_roles(OPERATOR).await;
    let session = sign_in(&before, OPERATOR).await.expect("signed in");
    // The same token and console key (another instance, or a restart): the session holds.
    let same = spawn_with_roles(OPERATOR).await;
    let (status, body) = console(&same, &session.cookie, "GET", "/console/tasks", None).await;
    assert_eq!(status, 200, "{body}");
    // The name's token replaced: the session is over, on every page and form.
    let rotated = spawn_with_roles("op-token-rotated-0123456789").await;
    for (method, path, form) in [
        ("GET", "/console", None),
        ("GET", "/console/tasks", None),
        (
            "POST",
            "/console/tasks/nope/cancel",
            Some(format!("csrf={}&reason=x", session.csrf)),
        ),
    ] {
        let (status, _) = console(&rotated, &session.cookie, method, path, form).await;
        assert_eq!(status, TO_SIGN_IN, "{method} {path}");
    }
    // The new token signs in.
    assert!(
        sign_in(&rotated, "op-token-rotated-0123456789")
            .await
            .is_some()
    );
}
