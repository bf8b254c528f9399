//! The edge's bounds, against a real listener on 127.0.0.1:0.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use rakuten_edge::testing::{
    INCOMPLETE_HEAD, TestCa, closed_within, head_with_partial_body, read_until_closed,
};
use rakuten_edge::{EdgeConfig, TlsReloader};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

fn router() -> Router {
    Router::new()
        .route("/health", get(|| async { "ok" }))
        .route(
            "/echo",
            axum::routing::post(|body: axum::body::Bytes| async move { body }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                "late"
            }),
        )
}

struct Running {
    addr: SocketAddr,
    stop: CancellationToken,
    handle: JoinHandle<std::io::Result<()>>,
}

async fn start(config: EdgeConfig) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let s = stop.clone();
    let handle = tokio::spawn(rakuten_edge::serve(
        listener,
        router(),
        config,
        async move { s.cancelled().await },
    ));
    Running { addr, stop, handle }
}

#[tokio::test]
async fn fifty_incomplete_heads_are_dropped_within_the_header_timeout() {
    let running = start(EdgeConfig {
        header_timeout: Duration::from_secs(1),
        ..EdgeConfig::plain()
    })
    .await;
    let mut conns = Vec::new();
    for _ in 0..50 {
        let mut s = TcpStream::connect(running.addr).await.unwrap();
        s.write_all(INCOMPLETE_HEAD).await.unwrap();
        conns.push(s);
    }
    for s in &mut conns {
        assert!(closed_within(s, Duration::from_secs(5)).await);
    }
}

/// A head plus part of its body (or a `Content-Length` of 99,999,999,999 and no
/// body at all) held the connection for 15 minutes and more.
#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_is_a_408_and_the_connection_closes() {
    let running = start(EdgeConfig {
        body_timeout: Duration::from_secs(1),
        ..EdgeConfig::plain()
    })
    .await;
    for (declared, sent) in [(100, &b"{\"a\":"[..]), (99_999_999_999, &b""[..])] {
        let mut s = TcpStream::connect(running.addr).await.unwrap();
        s.write_all(&head_with_partial_body("/echo", "t", declared, sent))
            .await
            .unwrap();
        let t = Instant::now();
        let answer = read_until_closed(&mut s, Duration::from_secs(10)).await;
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains("\"code\":1003"), "{answer}");
        assert!(
            answer.to_ascii_lowercase().contains("connection: close"),
            "{answer}"
        );
    }
    // A body that arrives in time is untouched.
    let r = reqwest::Client::new()
        .post(format!("http://{}/echo", running.addr))
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), "hello");
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_timeout() {
    let running = start(EdgeConfig {
        header_timeout: Duration::from_secs(1),
        ..EdgeConfig::plain()
    })
    .await;
    let mut s = TcpStream::connect(running.addr).await.unwrap();
    s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf).await.unwrap();
    assert!(
        std::str::from_utf8(&buf[..n])
            .unwrap()
            .starts_with("HTTP/1.1 200")
    );
    assert!(closed_within(&mut s, Duration::from_secs(5)).await);
}

#[tokio::test]
async fn shutdown_finishes_within_the_deadline_whatever_clients_do() {
    let running = start(EdgeConfig {
        header_timeout: Duration::from_secs(600),
        shutdown_deadline: Duration::from_millis(500),
        ..EdgeConfig::plain()
    })
    .await;
    let mut stuck = TcpStream::connect(running.addr).await.unwrap();
    stuck.write_all(INCOMPLETE_HEAD).await.unwrap();
    let mut slow = TcpStream::connect(running.addr).await.unwrap();
    slow.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t = Instant::now();
    running.stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), running.handle)
        .await
        .expect("serve returned within the deadline")
        .unwrap()
        .unwrap();
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert!(closed_within(&mut stuck, Duration::from_secs(1)).await);
    assert!(closed_within(&mut slow, Duration::from_secs(1)).await);
}

#[tokio::test]
async fn a_connection_past_the_cap_gets_a_503_envelope() {
    let running = start(EdgeConfig {
        max_connections: 2,
        ..EdgeConfig::plain()
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(running.addr).await.unwrap();
        s.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        held.push(s);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let r = reqwest::get(format!("http://{}/health", running.addr))
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "1");
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["code"], 1503);
    assert_eq!(body["success"], false);
    drop(held);
    // The cap frees as connections close.
    let mut ok = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let r = reqwest::get(format!("http://{}/health", running.addr))
            .await
            .unwrap();
        if r.status() == 200 {
            ok = true;
            break;
        }
    }
    assert!(ok, "the cap never freed");
}

#[tokio::test]
async fn https_is_served_and_a_reloaded_certificate_applies_to_new_connections_only() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("first CA");
    let files = ca.write_leaf(dir.path());
    let reloader = TlsReloader::new(files.clone()).unwrap();
    let running = start(EdgeConfig {
        tls: Some(reloader.clone()),
        ..EdgeConfig::plain()
    })
    .await;
    let url = format!("https://localhost:{}/health", running.addr.port());
    let client = |ca_pem: &str| {
        reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap())
            .resolve("localhost", running.addr)
            .build()
            .unwrap()
    };
    let trusting = client(&ca.pem());
    assert_eq!(trusting.get(&url).send().await.unwrap().status(), 200);
    // A client that does not trust the CA is refused.
    let other = TestCa::new("second CA");
    assert!(client(&other.pem()).get(&url).send().await.is_err());
    // Plain HTTP on the TLS port gets no answer.
    assert!(
        reqwest::get(format!("http://{}/health", running.addr))
            .await
            .is_err()
    );

    // Swap to a leaf of another CA: the open keep-alive connection keeps working, new ones
    // need the new CA.
    let _ = other.write_leaf(dir.path());
    Arc::clone(&reloader).reload().unwrap();
    assert_eq!(trusting.get(&url).send().await.unwrap().status(), 200);
    assert!(client(&ca.pem()).get(&url).send().await.is_err());
    assert_eq!(
        client(&other.pem())
            .get(&url)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    // A broken file keeps the current certificate.
    std::fs::write(&files.key, "not a key").unwrap();
    assert!(reloader.reload().is_err());
    assert_eq!(
        client(&other.pem())
            .get(&url)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
}

#[test]
fn a_plain_listener_on_a_public_address_warns() {
    assert!(rakuten_edge::warn_if_plain_public(
        "t",
        "0.0.0.0:1".parse().unwrap(),
        false
    ));
    assert!(!rakuten_edge::warn_if_plain_public(
        "t",
        "0.0.0.0:1".parse().unwrap(),
        true
    ));
    assert!(!rakuten_edge::warn_if_plain_public(
        "t",
        "127.0.0.1:1".parse().unwrap(),
        false
    ));
    assert!(!rakuten_edge::warn_if_plain_public(
        "t",
        "[::1]:1".parse().unwrap(),
        false
    ));
}

/// A URI or header section over the bounds was answered by hyper with a bare
/// 414/431 and no body; the edge now answers with the envelope (code 1004) and closes.
#[tokio::test]
async fn an_oversized_request_head_gets_414_or_431_with_the_envelope() {
    let running = start(EdgeConfig::plain()).await;
    let base = format!("http://{}", running.addr);
    rakuten_edge::testing::assert_oversized_heads_get_the_envelope(&base, "/health", "t").await;
    // Within the bounds the same route answers.
    let mut s = TcpStream::connect(running.addr).await.unwrap();
    s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = read_until_closed(&mut s, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    running.stop.cancel();
}
