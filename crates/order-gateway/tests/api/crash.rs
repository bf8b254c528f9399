//! kill -9 between a lease and its first report: the acknowledged lease survives the restart and
//! the task then expires to `stale`, never back to `queued`. Runs the real binary.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helpers::TOKEN;

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start(db: &std::path::Path, port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_order-gateway"))
        .arg("serve")
        .env("RAKUTEN_API_TOKEN", TOKEN)
        .env("RAKUTEN_GATEWAY_PORT", port.to_string())
        .env("RAKUTEN_GATEWAY_DB_PATH", db)
        .env("RAKUTEN_LEASE_TTL_SECONDS", "3")
        .env("RAKUTEN_SWEEP_INTERVAL_SECONDS", "0.2")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start order-gateway")
}

pub(crate) async fn wait_up(client: &reqwest::Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if client.get(format!("{base}/health")).send().await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("gateway did not come up");
}

async fn get(client: &reqwest::Client, url: String) -> Value {
    client
        .get(url)
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn kill_9_between_lease_and_first_report_keeps_the_task_leased_then_stale_never_queued() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("data").join("gw.db");
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();

    let mut child = start(&db, port);
    wait_up(&client, &base).await;
    let s: Value = client
        .post(format!("{base}/api/orders"))
        .bearer_auth(TOKEN)
        .json(&json!({"task_id": "po-k9", "site": "rakuten", "intent": {"item_url": "https://item.rakuten.co.jp/shop/a/", "quantity": 1}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(s["data"]["created"], true);
    let g = get(
        &client,
        format!("{base}/api/orders/lease?worker_id=w1&wait=0"),
    )
    .await;
    assert_eq!(g["data"]["task_id"], "po-k9", "{g}");

    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let mut child = start(&db, port);
    wait_up(&client, &base).await;
    let t = get(&client, format!("{base}/api/orders/po-k9")).await;
    assert_eq!(t["data"]["status"], "leased", "{t}");
    assert_eq!(t["data"]["lease_owner"], "w1");
    // Another worker gets nothing; the task stays out of the queue.
    let other = get(
        &client,
        format!("{base}/api/orders/lease?worker_id=w2&wait=0"),
    )
    .await;
    assert!(other["data"].is_null(), "{other}");

    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        let t = get(&client, format!("{base}/api/orders/po-k9")).await;
        let status = t["data"]["status"].as_str().unwrap().to_owned();
        assert_ne!(status, "queued");
        if status == "stale" || Instant::now() > deadline {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(status, "stale");
    let other = get(
        &client,
        format!("{base}/api/orders/lease?worker_id=w2&wait=0"),
    )
    .await;
    assert!(other["data"].is_null(), "{other}");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test]
async fn sigterm_stops_the_gateway_promptly_even_with_a_long_poll_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gw.db");
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let mut child = start(&db, port);
    wait_up(&client, &base).await;
    let poll = tokio::spawn({
        let client = client.clone();
        let url = format!("{base}/api/orders/lease?worker_id=w1&wait=60");
        async move { get(&client, url).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stopped_at = Instant::now();
    let killed = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(killed.success());
    let answer = poll.await.unwrap();
    assert!(answer["data"].is_null(), "{answer}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "gateway still running after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "exit status {status:?}");
    assert!(stopped_at.elapsed() < Duration::from_secs(10));
}
