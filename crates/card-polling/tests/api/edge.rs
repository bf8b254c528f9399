//! The public edge, as card-polling serves it: TLS, connection bounds, strict JSON,
//! ids that equal a route word or a dot segment. Each such input is a test here.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rakuten_edge::testing::{
    INCOMPLETE_HEAD, TestCa, closed_within, head_with_partial_body, host_port, read_until_closed,
};
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::helpers::*;

#[tokio::test]
async fn fifty_connections_with_an_incomplete_head_are_dropped_within_the_header_timeout() {
    let app = spawn_with(Backend::Memory, |s| s.edge.header_timeout_secs = 1).await;
    let mut conns = Vec::new();
    for _ in 0..50 {
        let mut s = TcpStream::connect(host_port(&app.base)).await.unwrap();
        s.write_all(INCOMPLETE_HEAD).await.unwrap();
        conns.push(s);
    }
    let started = Instant::now();
    for s in &mut conns {
        assert!(closed_within(s, Duration::from_secs(5)).await);
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    let (status, _) = app.get("/health", ADMIN).await;
    assert_eq!(status, 200);
}

/// A head plus part of its body held the connection for 15 minutes and more.
#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_is_a_408_and_frees_the_connection() {
    let app = spawn_with(Backend::Memory, |s| {
        s.edge.body_timeout_secs = 1;
        s.edge.max_connections = 2;
    })
    .await;
    // A declared length over the route's limit is a 413 at once, with no wait for the body
    // (D-body-coding-type-and-size); one within it that does not arrive is the 408.
    for (declared, sent, status) in [
        (200, &br#"{"iccid":"#[..], "408"),
        (99_999_999_999, &b""[..], "413"),
    ] {
        let mut s = TcpStream::connect(host_port(&app.base)).await.unwrap();
        s.write_all(&head_with_partial_body(
            "/api/admin/import",
            ADMIN,
            declared,
            sent,
        ))
        .await
        .unwrap();
        let t = Instant::now();
        let answer = read_until_closed(&mut s, Duration::from_secs(10)).await;
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        rakuten_edge::testing::assert_body_refusal(&answer, status);
    }
    let (status, _) = app.get("/health", ADMIN).await;
    assert_eq!(status, 200);
}

/// `card-polling serve` on port 0; the address it wrote to `RAKUTEN_POLL_ADDR_FILE`.
async fn start_binary(dir: &Path, env: &[(&str, &str)]) -> (Child, String) {
    start_binary_logging_to(dir, env, Stdio::null()).await
}

/// [`start_binary`] with its standard output (its log) going to `stdout`.
async fn start_binary_logging_to(
    dir: &Path,
    env: &[(&str, &str)],
    stdout: Stdio,
) -> (Child, String) {
    let addr_file = dir.join("addr");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_card-polling"));
    cmd.arg("serve")
        .env("RAKUTEN_POLL_ADMIN_TOKEN", ADMIN)
        .env("RAKUTEN_POLL_LISTEN", "127.0.0.1:0")
        .env("RAKUTEN_POLL_DB_PATH", dir.join("cp.db"))
        .env("RAKUTEN_POLL_ADDR_FILE", &addr_file)
        .env("RUST_LOG", "warn")
        .stdout(stdout)
        .stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("start card-polling");
    let addr = test_util::wait_for_addr_file(
        &mut child,
        &addr_file,
        Duration::from_secs(30),
        "card-polling",
    )
    .await;
    (child, format!("http://{addr}"))
}

#[tokio::test]
async fn sigterm_with_an_incomplete_head_open_still_exits_within_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, base) = start_binary(
        dir.path(),
        &[
            ("RAKUTEN_POLL_HEADER_TIMEOUT_SECS", "600"),
            ("RAKUTEN_POLL_SHUTDOWN_DEADLINE_SECS", "1"),
        ],
    )
    .await;
    let mut stuck = TcpStream::connect(host_port(&base)).await.unwrap();
    stuck.write_all(INCOMPLETE_HEAD).await.unwrap();
    // Connections are accepted in the order they were made: once a later one is answered, the
    // stuck one is open on the server.
    let answered = reqwest::get(format!("{base}/livez")).await.unwrap();
    assert_eq!(answered.status(), 200);
    let t = Instant::now();
    let killed = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(killed.success());
    let status = test_util::wait_for_exit(
        &mut child,
        Duration::from_secs(8),
        "card-polling after SIGTERM",
    )
    .await;
    assert!(status.success(), "{status}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(closed_within(&mut stuck, Duration::from_secs(1)).await);
}

/// SIGTERM or SIGINT stopped the service without a word in its log, so a
/// stop could not be told from a crash. It now logs at INFO `shutting down (signal SIGTERM)` (or
/// `SIGINT`) when the shutdown starts and `card-polling stopped` when everything has ended.
#[tokio::test]
async fn sigterm_and_sigint_are_logged_when_the_shutdown_starts_and_when_it_ends() {
    for (flag, name) in [("-TERM", "SIGTERM"), ("-INT", "SIGINT")] {
        let dir = tempfile::tempdir().unwrap();
        let log_path = dir.path().join("stdout.log");
        let log = std::fs::File::create(&log_path).unwrap();
        let (mut child, _base) = start_binary_logging_to(
            dir.path(),
            &[("RUST_LOG", "info"), ("RAKUTEN_LOG_FORMAT", "json")],
            Stdio::from(log),
        )
        .await;
        let killed = Command::new("kill")
            .arg(flag)
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(killed.success());
        let status = test_util::wait_for_exit(
            &mut child,
            Duration::from_secs(15),
            &format!("card-polling after {name}"),
        )
        .await;
        assert!(status.success(), "{name}: {status}");
        let text = std::fs::read_to_string(&log_path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}")))
            .collect();
        let at = |message: &str| {
            lines
                .iter()
                .position(|l| l["level"] == "INFO" && l["fields"]["message"] == message)
                .unwrap_or_else(|| panic!("{name}: no INFO line {message:?} in:\n{text}"))
        };
        let shutting_down = at(&format!("shutting down (signal {name})"));
        let stopped = at("card-polling stopped");
        assert!(shutting_down < stopped, "{text}");
        assert_eq!(lines[shutting_down]["fields"]["signal"], name, "{text}");
    }
}

#[tokio::test]
async fn connections_past_the_cap_get_a_503_envelope() {
    let app = spawn_with(Backend::Memory, |s| s.edge.max_connections = 1).await;
    let mut held = TcpStream::connect(host_port(&app.base)).await.unwrap();
    held.write_all(INCOMPLETE_HEAD).await.unwrap();
    // Connections are accepted in the order they were made: the held one takes the one place
    // before the next connection is accepted.
    let (status, v) = app.get("/health", ADMIN).await;
    assert_eq!(status, 503, "{v}");
    assert_eq!(
        (v["success"].as_bool(), v["code"].as_i64()),
        (Some(false), Some(1503))
    );
}

#[tokio::test]
async fn a_duplicate_key_at_any_depth_of_any_body_is_a_422() {
    let app = spawn_seeded().await;
    let order = app.order("card", "CA1", "main").await;
    for (path, body) in [
        (
            "/api/payments/callback",
            format!(
                r#"{{"payment_id":"P29","order_id":"{order}","status":"failed","status":"paid"}}"#
            ),
        ),
        (
            "/api/priority-items",
            r#"{"asset_type":"card","asset_id":"CA1","asset_id":"CB1","reason":"x"}"#.to_owned(),
        ),
        (
            "/api/admin/import",
            r#"{"cards":[{"iccid":"NEW1","shop_id":"A","shop_id":"B"}]}"#.to_owned(),
        ),
    ] {
        let resp = app
            .client
            .post(format!("{}{path}", app.base))
            .bearer_auth(ADMIN)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 422, "{path}");
        let v: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(v["code"], 1003, "{v}");
        assert!(v["msg"].as_str().unwrap().contains("duplicate key"), "{v}");
    }
    // Nothing was paid.
    let paid = app.pay(&order, "P29", "paid").await;
    assert_eq!(paid["replayed"], false, "{paid}");
}

#[tokio::test]
async fn an_id_equal_to_a_route_word_or_a_dot_segment_is_a_422() {
    let app = spawn_seeded().await;
    for iccid in [".", "polling", "close"] {
        let (s, v) = app
            .post(
                "/api/admin/import",
                ADMIN,
                json!({"cards": [{"iccid": iccid, "shop_id": "A"}]}),
            )
            .await;
        assert_eq!((s, v["code"].as_i64()), (422, Some(1003)), "{iccid}: {v}");
    }
    let (s, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "retrigger", "reason": "x"}),
        )
        .await;
    assert_eq!((s, v["code"].as_i64()), (422, Some(1003)), "{v}");
}

#[tokio::test]
async fn card_polling_over_tls_answers_a_client_trusting_its_ca() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("card-polling test CA");
    let files = ca.write_leaf(dir.path());
    let mut app = spawn_with(Backend::Memory, |s| {
        s.edge.tls_cert_path = Some(files.cert.clone());
        s.edge.tls_key_path = Some(files.key.clone());
    })
    .await;
    let plain = app.base.clone();
    app.base = plain.replace("http://", "https://");
    app.client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).unwrap())
        .build()
        .unwrap();
    app.seed().await;
    let (s, v) = app.get("/api/priority-items", PLATFORM).await;
    assert_eq!(s, 200, "{v}");
    assert!(reqwest::get(format!("{plain}/health")).await.is_err());
    assert!(reqwest::get(format!("{}/health", app.base)).await.is_err());
}

/// `rediss://` is accepted and speaks TLS: against the machine's plain-text Redis the handshake
/// fails (it would connect in clear text, or refuse the scheme, without TLS support).
/// A `redis-server` speaking only TLS on a free port, with a leaf of `ca` for 127.0.0.1. Redis
/// cannot bind port 0 and report it, so a port is picked and the start retried on a clash.
struct TlsRedis {
    child: Child,
    port: u16,
}

impl TlsRedis {
    async fn start(dir: &Path, ca: &TestCa) -> TlsRedis {
        let files = ca.write_leaf(dir);
        let ca_file = dir.join("redis-ca.pem");
        std::fs::write(&ca_file, ca.pem()).unwrap();
        for _ in 0..10 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut child = Command::new("redis-server")
                .args(["--port", "0", "--tls-port", &port.to_string()])
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .arg("--tls-cert-file")
                .arg(&files.cert)
                .arg("--tls-key-file")
                .arg(&files.key)
                .arg("--tls-ca-cert-file")
                .arg(&ca_file)
                .args(["--tls-auth-clients", "no"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server must be installed (the machine's Redis package)");
            let listening = test_util::poll_within(Duration::from_secs(10), async || {
                if child.try_wait().unwrap().is_some() {
                    return Ok(false); // the port was taken meanwhile: try another
                }
                match TcpStream::connect(("127.0.0.1", port)).await {
                    Ok(_) => Ok(true),
                    Err(_) => Err(()),
                }
            })
            .await;
            if listening == Ok(true) {
                return TlsRedis { child, port };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("redis-server with TLS did not start on any of 10 ports");
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `rediss://` speaks TLS to a real TLS Redis and verifies its certificate
/// against `RAKUTEN_POLL_REDIS_CA_PATH` (earlier only the handshake against a plain-text Redis was
/// tried).
#[test_util::lane(redis)]
#[tokio::test]
async fn a_rediss_url_speaks_tls_to_redis() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("redis test CA");
    let redis = TlsRedis::start(dir.path(), &ca).await;
    let url = format!("rediss://127.0.0.1:{}/", redis.port);
    let mut s = card_polling::Settings::for_tests(dir.path().join("cp.db"), ADMIN);
    s.hint_channel = card_polling::settings::HintChannelSetting::Redis(
        card_polling::settings::Secret::new(url.clone()),
    );
    let connect = |s: card_polling::Settings| async move {
        tokio::time::timeout(
            Duration::from_secs(20),
            card_polling::startup::connect_hints(&s),
        )
        .await
        .expect("the TLS attempt ends")
    };

    // Trusting the test CA: connected over TLS, and Redis answered its PING.
    let ca_file = dir.path().join("trusted-ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    s.redis_ca_path = Some(ca_file);
    connect(s.clone())
        .await
        .expect("rediss:// with the CA file");

    // The system roots do not know the test CA: the certificate is refused.
    s.redis_ca_path = None;
    let e = connect(s.clone())
        .await
        .expect_err("a server certificate of an unknown CA is refused");
    let msg = format!("{e:#}");
    assert!(!msg.contains("feature"), "TLS support missing: {msg}");

    // Nor does another CA.
    let other = dir.path().join("other-ca.pem");
    std::fs::write(&other, TestCa::new("another CA").pem()).unwrap();
    s.redis_ca_path = Some(other);
    connect(s.clone())
        .await
        .expect_err("a server certificate of another CA is refused");

    // Plain redis:// to the machine's Redis still works.
    s.redis_ca_path = None;
    s.hint_channel = card_polling::settings::HintChannelSetting::Redis(
        card_polling::settings::Secret::new(redis_url()),
    );
    connect(s)
        .await
        .expect("Redis must be running (REDIS_URL_TEST)");
}

/// A URI or header section over the bounds was answered with a bare 414/431
/// and no body; now the JSON envelope (code 1004) answers, and the connection closes.
#[tokio::test]
async fn an_oversized_request_head_gets_414_or_431_with_the_envelope() {
    let app = spawn_with(Backend::Memory, |_| {}).await;
    rakuten_edge::testing::assert_oversized_heads_get_the_envelope(
        &app.base,
        "/api/priority-items",
        PLATFORM,
    )
    .await;
}
