//! kill -9 between a lease and its first report: the acknowledged lease survives the restart and
//! the task then expires to `stale`, never back to `queued`. Runs the real binary.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::binary::Binary;
use crate::helpers::TOKEN;

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
    let db = db.to_str().unwrap();
    let client = reqwest::Client::new();

    let mut gw = Binary::start(dir.path(), &[("RAKUTEN_GATEWAY_DB_PATH", db)]).await;
    let base = gw.base.clone();
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

    gw.child.kill().unwrap(); // SIGKILL
    gw.child.wait().unwrap();

    // Restarted on the same database (a new port: the old one may be taken meanwhile).
    let gw = Binary::start(dir.path(), &[("RAKUTEN_GATEWAY_DB_PATH", db)]).await;
    let base = gw.base.clone();
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

    let status = test_util::poll_within(Duration::from_secs(15), async || {
        let t = get(&client, format!("{base}/api/orders/po-k9")).await;
        let status = t["data"]["status"].as_str().unwrap().to_owned();
        assert_ne!(status, "queued");
        if status == "stale" {
            Ok(status)
        } else {
            Err(status)
        }
    })
    .await
    .unwrap_or_else(|last| last);
    assert_eq!(status, "stale");
    let other = get(
        &client,
        format!("{base}/api/orders/lease?worker_id=w2&wait=0"),
    )
    .await;
    assert!(other["data"].is_null(), "{other}");
    drop(gw);
}

#[tokio::test]
async fn sigterm_stops_the_gateway_promptly_even_with_a_long_poll_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gw.db");
    let client = reqwest::Client::new();
    let mut gw = Binary::start(
        dir.path(),
        &[("RAKUTEN_GATEWAY_DB_PATH", db.to_str().unwrap())],
    )
    .await;
    let base = gw.base.clone();
    let poll = tokio::spawn({
        let client = client.clone();
        let url = format!("{base}/api/orders/lease?worker_id=w1&wait=60");
        async move { get(&client, url).await }
    });
    crate::helpers::wait_for_long_polls(&client, &base, "orders", 1).await;
    let stopped_at = Instant::now();
    gw.terminate();
    let answer = poll.await.unwrap();
    assert!(answer["data"].is_null(), "{answer}");
    let status = gw.exited_within(Duration::from_secs(10)).await;
    assert!(status.success(), "exit status {status:?}");
    assert!(stopped_at.elapsed() < Duration::from_secs(10));
}

/// With its log pipe closed (`serve 2>&1 | head -1`), the first log line the gateway
/// could not write made it panic and exit 101. It now serves on, and stops cleanly on SIGTERM.
#[tokio::test]
async fn the_gateway_serves_on_and_stops_cleanly_when_its_log_pipe_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gw.db");
    let client = reqwest::Client::new();
    let mut gw = Binary::start_with_logs_closed(
        dir.path(),
        &[("RAKUTEN_GATEWAY_DB_PATH", db.to_str().unwrap())],
    )
    .await;
    let base = gw.base.clone();
    // Each request writes an access log line at INFO into the closed pipe.
    for _ in 0..3 {
        let answer = get(
            &client,
            format!("{base}/api/orders/lease?worker_id=w1&wait=0"),
        )
        .await;
        assert_eq!(answer["success"], true, "{answer}");
    }
    assert!(gw.child.try_wait().unwrap().is_none(), "the gateway exited");
    gw.terminate();
    let status = gw.exited_within(Duration::from_secs(10)).await;
    assert!(status.success(), "exit status {status:?}");
}

/// A bad setting with standard error full or closed (`2>/dev/full`, `2>&1 | head -1`)
/// exited 101 (`eprintln!` panicked) instead of the documented 2, which a supervisor reads as
/// "do not restart".
#[test]
fn a_bad_setting_exits_2_even_when_standard_error_cannot_be_written() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_order-gateway"))
        .arg("serve")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .current_dir(tempfile::tempdir().unwrap().path())
        .stdout(std::process::Stdio::null())
        .stderr(full)
        .status()
        .expect("run order-gateway");
    assert_eq!(status.code(), Some(2), "{status:?}");
}
