//! The HTTP carrier adapter against a small fake carrier served in the test on
//! port 0: success, typed errors and the spec's retry rules, timeout, 5xx, a malformed answer, a
//! suspended card's resume, and no credential (Bearer token, URL userinfo, URL query) in the
//! tracing output, the interaction-log rows or the item's failure reason.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};

use card_polling::executor::Executor;
use card_polling::settings::Secret;
use card_polling::upstream::HttpCarrier;
use card_polling::upstream::http::parse_carrier_url;
use rakuten_types::Clock;

use super::helpers::*;

const TOKEN: &str = "carrier-token-s3cr3t-0042";
const URL_PASSWORD: &str = "userinfo-pw-77";
const QUERY_KEY: &str = "query-apikey-9931";

/// What the fake carrier does for one card.
#[derive(Debug, Clone)]
enum Fake {
    Ok,
    Suspended,
    Typed(u16, &'static str, &'static str),
    /// Never answers.
    Hang,
    Status(u16),
    Malformed,
    /// Answers a typed failure whose message echoes the Authorization header and the query.
    EchoCredentials,
    /// Answers 200 and streams its body without end, as fast as it is read.
    Endless,
    /// Answers 200 and sends its body one byte every 50 ms, without end.
    Trickle,
}

#[derive(Default)]
struct FakeState {
    behaviour: Mutex<HashMap<String, Fake>>,
    /// (path, Authorization header, body) of every call.
    calls: Mutex<Vec<(String, Option<String>, Value)>>,
    /// Bytes an endless answer handed to the connection so far.
    streamed: std::sync::atomic::AtomicUsize,
    /// Set when the reader of an endless answer went away (its stream was dropped).
    abandoned: tokio::sync::Notify,
}

/// An endless body: chunks of 16 KiB for as long as they are read. For the machine's sake it stops
/// producing after [`ENDLESS_SAFETY_STOP`] bytes and then waits forever (a reader that read that
/// far already failed the test).
const CHUNK: usize = 16 * 1024;
const ENDLESS_SAFETY_STOP: usize = 64 * 1024 * 1024;

/// Counts the bytes handed out and says when it is dropped (the client closed the connection).
struct Endless(Shared);

impl Drop for Endless {
    fn drop(&mut self) {
        self.0.abandoned.notify_one();
    }
}

fn endless_body(st: &Shared, every: Option<Duration>) -> axum::body::Body {
    let guard = Endless(st.clone());
    let stream = futures::stream::unfold(guard, move |guard| async move {
        use std::sync::atomic::Ordering;
        if let Some(pause) = every {
            tokio::time::sleep(pause).await;
            guard.0.streamed.fetch_add(1, Ordering::SeqCst);
            return Some((Ok::<_, std::io::Error>(vec![b' ']), guard));
        }
        if guard.0.streamed.load(Ordering::SeqCst) >= ENDLESS_SAFETY_STOP {
            futures::future::pending::<()>().await;
        }
        guard.0.streamed.fetch_add(CHUNK, Ordering::SeqCst);
        // Valid JSON so far: an object whose string never ends.
        Some((Ok(vec![b'x'; CHUNK]), guard))
    });
    let head = futures::stream::once(async { Ok(b"{\"summary\": \"".to_vec()) });
    axum::body::Body::from_stream(futures::StreamExt::chain(head, stream))
}

type Shared = Arc<FakeState>;

async fn answer(
    path: &str,
    st: &Shared,
    headers: &HeaderMap,
    query: Option<String>,
    body: Value,
) -> Response {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    st.calls
        .lock()
        .unwrap()
        .push((path.to_owned(), auth.clone(), body.clone()));
    if path == "resume" {
        return Json(json!({"resumed": true})).into_response();
    }
    let iccid = body["iccid"].as_str().unwrap_or_default().to_owned();
    let b = st
        .behaviour
        .lock()
        .unwrap()
        .get(&iccid)
        .cloned()
        .unwrap_or(Fake::Ok);
    match b {
        Fake::Ok => Json(json!({"summary": format!("{} fine", body["task_type"].as_str().unwrap_or("?"))})).into_response(),
        Fake::Suspended => Json(json!({"summary": "suspended", "suspended": true})).into_response(),
        Fake::Typed(status, kind, message) => (
            StatusCode::from_u16(status).unwrap(),
            Json(json!({"error": {"kind": kind, "message": message}})),
        )
            .into_response(),
        // Never answers: only the client's own timeout ends the call.
        Fake::Hang => std::future::pending().await,
        Fake::Status(s) => (StatusCode::from_u16(s).unwrap(), "<html>upstream down</html>").into_response(),
        Fake::Malformed => (StatusCode::OK, "{\"summ").into_response(),
        Fake::Endless => (StatusCode::OK, endless_body(st, None)).into_response(),
        Fake::Trickle => (
            StatusCode::OK,
            endless_body(st, Some(Duration::from_millis(50))),
        )
            .into_response(),
        Fake::EchoCredentials => (
            StatusCode::BAD_GATEWAY,
            Json(json!({"error": {"kind": "unavailable", "message": format!(
                "saw {} query {}", auth.unwrap_or_default(), query.unwrap_or_default()
            )}})),
        )
            .into_response(),
    }
}

/// Starts the fake carrier on port 0; returns its base URL (`http://127.0.0.1:PORT/carrier`).
async fn fake_carrier() -> (String, Shared) {
    let st: Shared = Arc::default();
    let router = Router::new()
        .route(
            "/carrier/poll",
            post(
                |State(st): State<Shared>,
                 axum::extract::RawQuery(q): axum::extract::RawQuery,
                 headers: HeaderMap,
                 Json(body): Json<Value>| async move {
                    answer("poll", &st, &headers, q, body).await
                },
            ),
        )
        .route(
            "/carrier/resume",
            post(
                |State(st): State<Shared>,
                 axum::extract::RawQuery(q): axum::extract::RawQuery,
                 headers: HeaderMap,
                 Json(body): Json<Value>| async move {
                    answer("resume", &st, &headers, q, body).await
                },
            ),
        )
        .with_state(st.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    (format!("http://127.0.0.1:{}/carrier", addr.port()), st)
}

/// An executor over the app's store whose carrier is the HTTP adapter at `url`.
fn executor_with(app: &TestApp, url: &str, token: Option<&str>, timeout: Duration) -> Executor {
    let carrier = HttpCarrier::with_timeout(
        parse_carrier_url(url).unwrap(),
        token.map(Secret::new),
        timeout,
    )
    .unwrap();
    Executor::new(
        app.store.clone(),
        Arc::new(carrier),
        Arc::new(app.clock.clone()),
        app.settings.task_types.clone(),
        100,
        4,
        app.hints.clone(),
    )
}

async fn one_item(app: &TestApp, iccid: &str, task_type: &str) -> i64 {
    let (s, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": iccid, "task_types": [task_type], "reason": "carrier test"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    v["data"]["items"][0]["item_id"].as_i64().unwrap()
}

/// (operation, request summary, response summary, outcome) of an item's interaction logs.
async fn logs_of(app: &TestApp, id: i64) -> Vec<(String, String, String, String)> {
    sqlx::query_as(
        "SELECT operation, request_summary, response_summary, outcome FROM integration_logs \
         WHERE item_id = $1 ORDER BY id",
    )
    .bind(id)
    .fetch_all(app.db.pool())
    .await
    .unwrap()
}

async fn run(app: &TestApp, exec: &Executor) {
    exec.run_once(app.clock.now()).await.expect("executor round");
}

#[super::lane]
#[tokio::test]
async fn http_carrier_success_completes_the_item_with_the_contract_request_and_a_summary_log() {
    let app = spawn_seeded().await;
    let (url, fake) = fake_carrier().await;
    let exec = executor_with(&app, &url, Some(TOKEN), Duration::from_secs(5));
    let id = one_item(&app, "CA1", "data_usage").await;
    run(&app, &exec).await;
    let d = app.detail(id).await;
    assert_eq!(d["item"]["status"], "completed", "{d}");
    let calls = fake.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1);
    let (path, auth, body) = &calls[0];
    assert_eq!(path, "poll");
    assert_eq!(auth.as_deref(), Some(format!("Bearer {TOKEN}").as_str()));
    assert_eq!(body["iccid"], "CA1");
    assert_eq!(body["task_type"], "data_usage");
    assert_eq!(body["attempt"], 1);
    assert!(body["request_id"].as_str().is_some_and(|s| s.len() == 36), "{body}");
    let logs = logs_of(&app, id).await;
    assert_eq!(
        logs,
        vec![(
            "poll".into(),
            "poll data_usage iccid=CA1 attempt=1".into(),
            "data_usage fine".into(),
            "ok".into()
        )]
    );
}

#[super::lane]
#[tokio::test]
async fn http_carrier_typed_errors_follow_the_spec_retry_rules() {
    let app = spawn_seeded().await;
    let (url, fake) = fake_carrier().await;
    fake.behaviour
        .lock()
        .unwrap()
        .insert("CA1".into(), Fake::Typed(404, "unknown_card", "no such ICCID"));
    fake.behaviour
        .lock()
        .unwrap()
        .insert("CA11".into(), Fake::Typed(503, "unavailable", "maintenance window"));
    fake.behaviour
        .lock()
        .unwrap()
        .insert("CB1".into(), Fake::Typed(200, "timeout", "HSS did not answer"));
    let exec = executor_with(&app, &url, None, Duration::from_secs(5));
    let unknown = one_item(&app, "CA1", "card_status").await;
    let unavailable = one_item(&app, "CA11", "card_status").await;
    let timeout = one_item(&app, "CB1", "card_status").await;
    run(&app, &exec).await;
    // An unknown card is a business failure: failed at once, never retried.
    let d = app.detail(unknown).await;
    assert_eq!(d["item"]["status"], "failed", "{d}");
    assert_eq!(d["item"]["attempts"], 1);
    assert_eq!(logs_of(&app, unknown).await[0].3, "unknown_card");
    // A carrier failure or the carrier's own timeout: recoverable, back to pending.
    let d = app.detail(unavailable).await;
    assert_eq!(d["item"]["status"], "pending", "{d}");
    let log = &logs_of(&app, unavailable).await[0];
    assert_eq!(log.3, "failed");
    assert_eq!(log.2, "carrier call failed: unavailable: maintenance window");
    let d = app.detail(timeout).await;
    assert_eq!(d["item"]["status"], "pending", "{d}");
    assert_eq!(logs_of(&app, timeout).await[0].3, "timeout");
    // The second attempt is sent as attempt 2.
    app.advance(3600);
    run(&app, &exec).await;
    let calls = fake.calls.lock().unwrap().clone();
    let ca11: Vec<_> = calls.iter().filter(|c| c.2["iccid"] == "CA11").collect();
    assert_eq!(ca11.len(), 2);
    assert_eq!(ca11[1].2["attempt"], 2);
    app.assert_invariants().await;
}

#[super::lane]
#[tokio::test]
async fn http_carrier_no_answer_within_the_timeout_is_a_recoverable_timeout() {
    let app = spawn_seeded().await;
    let (url, fake) = fake_carrier().await;
    fake.behaviour.lock().unwrap().insert("CA1".into(), Fake::Hang);
    // The production timeout is the spec's 30 s; a short one keeps the test brief.
    let exec = executor_with(&app, &url, None, Duration::from_millis(300));
    let id = one_item(&app, "CA1", "card_status").await;
    let t = std::time::Instant::now();
    run(&app, &exec).await;
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    let d = app.detail(id).await;
    assert_eq!(d["item"]["status"], "pending", "{d}");
    let log = &logs_of(&app, id).await[0];
    assert_eq!(log.3, "timeout");
    assert_eq!(log.2, "carrier call timed out");
}

#[super::lane]
#[tokio::test]
async fn http_carrier_5xx_without_a_typed_body_is_a_recoverable_failure() {
    let app = spawn_seeded().await;
    let (url, fake) = fake_carrier().await;
    fake.behaviour.lock().unwrap().insert("CA1".into(), Fake::Status(502));
    let exec = executor_with(&app, &url, None, Duration::from_secs(5));
    let id = one_item(&app, "CA1", "card_status").await;
    run(&app, &exec).await;
    let d = app.detail(id).await;
    assert_eq!(d["item"]["status"], "pending", "{d}");
    let log = &logs_of(&app, id).await[0];
    assert_eq!(log.3, "failed");
    assert_eq!(log.2, "carrier call failed: carrier HTTP 502");
}

#[super::lane]
#[tokio::test]
async fn http_carrier_malformed_answer_is_an_invalid_response_retried_until_the_limit() {
    let app = spawn_seeded().await;
    let (url, fake) = fake_carrier().await;
    fake.behaviour.lock().unwrap().insert("CA1".into(), Fake::Malformed);
    let exec = executor_with(&app, &url, None, Duration::from_secs(5));
    let id = one_item(&app, "CA1", "card_status").await;
    for _ in 0..3 {
        run(&app, &exec).await;
        app.advance(3600);
    }
    let d = app.detail(id).await;
    assert_eq!(d["item"]["status"], "failed", "{d}");
    assert_eq!(d["item"]["attempts"], 3);
    let logs = logs_of(&app, id).await;
    assert_eq!(logs.len(), 3);
    assert!(logs.iter().all(|l| l.3 == "invalid_response"), "{logs:?}");
    app.assert_invariants().await;
}

#[super::lane]
#[tokio::test]
async fn http_carrier_suspended_card_is_resumed_through_the_resume_call() {
    let app = spawn_seeded().await;
    let (url, fake) = fake_carrier().await;
    fake.behaviour.lock().unwrap().insert("CA1".into(), Fake::Suspended);
    let exec = executor_with(&app, &url, None, Duration::from_secs(5));
    let id = one_item(&app, "CA1", "card_status").await;
    run(&app, &exec).await;
    assert_eq!(app.detail(id).await["item"]["status"], "completed");
    let logs = logs_of(&app, id).await;
    assert_eq!(logs.len(), 2, "{logs:?}");
    assert_eq!(logs[1].0, "resume");
    assert_eq!(logs[1].3, "ok");
    let calls = fake.calls.lock().unwrap().clone();
    assert_eq!(calls[1].0, "resume");
    assert_eq!(calls[1].2["iccid"], "CA1");
}

/// A `tracing` writer into a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[super::lane]
#[tokio::test]
async fn http_carrier_credentials_never_reach_tracing_logs_interaction_rows_or_reasons() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let app = spawn_seeded().await;
    let (url, fake) = fake_carrier().await;
    fake.behaviour
        .lock()
        .unwrap()
        .insert("CA1".into(), Fake::EchoCredentials);
    // Userinfo and an API key in the query, plus the Bearer token: three credentials.
    let url = url.replacen(
        "http://",
        &format!("http://carrier-user:{URL_PASSWORD}@"),
        1,
    ) + &format!("?api_key={QUERY_KEY}");
    // The settings path `serve` takes: parse, Debug-print, build the carrier (which logs).
    let mut settings = app.settings.clone();
    settings.carrier_url = Some(url.parse().expect("carrier URL"));
    settings.carrier_token = Some(Secret::new(TOKEN));
    tracing::info!(?settings, "settings");
    let _carrier = card_polling::startup::carrier(&settings).expect("carrier");

    let exec = executor_with(&app, &url, Some(TOKEN), Duration::from_secs(5));
    let id = one_item(&app, "CA1", "card_status").await;
    for _ in 0..3 {
        run(&app, &exec).await;
        app.advance(3600);
    }
    let d = app.detail(id).await;
    assert_eq!(d["item"]["status"], "failed", "{d}");
    // The fake really received every credential (so the checks below are not vacuous).
    let calls = fake.calls.lock().unwrap().clone();
    assert_eq!(calls[0].1.as_deref(), Some(format!("Bearer {TOKEN}").as_str()));

    let mut texts = vec![d.to_string()];
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT request_summary, response_summary FROM integration_logs")
            .fetch_all(app.db.pool())
            .await
            .unwrap();
    assert!(!rows.is_empty());
    for (req, resp) in &rows {
        texts.push(req.clone());
        texts.push(resp.clone());
    }
    assert!(
        rows.iter().any(|r| r.1.contains("saw Bearer ***")),
        "the echoed token is replaced: {rows:?}"
    );
    let events: Vec<(Option<String>, Option<String>)> =
        sqlx::query_as("SELECT reason, result FROM priority_item_events")
            .fetch_all(app.db.pool())
            .await
            .unwrap();
    texts.extend(events.into_iter().flat_map(|e| [e.0, e.1]).flatten());
    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        log.contains("http://127.0.0.1:"),
        "the redacted carrier URL is logged at start: {log}"
    );
    texts.push(log);
    for t in &texts {
        for secret in [TOKEN, URL_PASSWORD, QUERY_KEY, "carrier-user"] {
            assert!(!t.contains(secret), "{secret} leaked into: {t}");
        }
    }
}

/// A carrier that streams its answer without end took the service from 20 MiB to 1 GiB in under
/// a second (up to 128 calls at once per task type): the answer is read in chunks and the call
/// fails with a typed error (`answer_too_large`, recoverable) once it passes
/// `RAKUTEN_POLL_CARRIER_MAX_ANSWER_BYTES`, well before the timeout, and the connection is dropped
/// there, so no more than the cap is ever held.
#[super::lane]
#[tokio::test]
async fn a_carrier_answer_past_the_cap_fails_the_call_without_holding_it() {
    let app = spawn_seeded().await;
    let (url, fake) = fake_carrier().await;
    fake.behaviour.lock().unwrap().insert("CA1".into(), Fake::Endless);
    // A timeout far longer than the read of the cap: the cap, not the clock, ends the call.
    let exec = executor_with(&app, &url, None, Duration::from_secs(20));
    let id = one_item(&app, "CA1", "card_status").await;
    let started = std::time::Instant::now();
    run(&app, &exec).await;
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the call ran to the timeout: {:?}",
        started.elapsed()
    );
    // The carrier sees its connection closed: nobody reads the rest.
    tokio::time::timeout(Duration::from_secs(10), fake.abandoned.notified())
        .await
        .expect("the endless answer is abandoned");
    let streamed = fake.streamed.load(std::sync::atomic::Ordering::SeqCst);
    // The cap (64 KiB by default) plus what the sockets' buffers took in: far below the 64 MiB
    // a reader of the whole answer takes before the fake stops.
    assert!(streamed < 32 * 1024 * 1024, "{streamed} bytes were read");
    let d = app.detail(id).await;
    assert_eq!(d["item"]["status"], "pending", "recoverable: {d}");
    let log = &logs_of(&app, id).await[0];
    assert_eq!(log.3, "answer_too_large", "{log:?}");
    assert_eq!(
        log.2, "carrier answer larger than 65536 bytes",
        "{log:?}"
    );
    // Below the limit of attempts it is retried like any recoverable failure, then failed.
    for _ in 0..2 {
        app.advance(3600);
        run(&app, &exec).await;
    }
    let d = app.detail(id).await;
    assert_eq!(d["item"]["status"], "failed", "{d}");
    assert_eq!(
        d["item"]["failure_reason"],
        "maximum attempts reached; last error: carrier answer larger than 65536 bytes"
    );
    app.assert_invariants().await;
}

/// An answer that never ends but stays under the cap (a trickle) is cut by the call's timeout,
/// which counts to the end of the body.
#[super::lane]
#[tokio::test]
async fn a_carrier_answer_that_trickles_without_end_is_cut_at_the_timeout() {
    let app = spawn_seeded().await;
    let (url, fake) = fake_carrier().await;
    fake.behaviour.lock().unwrap().insert("CA1".into(), Fake::Trickle);
    let exec = executor_with(&app, &url, None, Duration::from_millis(500));
    let id = one_item(&app, "CA1", "card_status").await;
    let started = std::time::Instant::now();
    run(&app, &exec).await;
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    let log = &logs_of(&app, id).await[0];
    assert_eq!(log.3, "timeout", "{log:?}");
    tokio::time::timeout(Duration::from_secs(10), fake.abandoned.notified())
        .await
        .expect("the trickling answer is abandoned");
}
