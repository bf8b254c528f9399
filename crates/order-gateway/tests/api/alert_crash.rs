//! kill -9 between an alert's raise and its delivery: the raise and its outbox row commit
//! together, so the restarted gateway delivers the same event (same `event_id`). Runs the real
//! binary with real time (short TTL and periods); the receiver binds 127.0.0.1:0.

use std::time::Duration;

use serde_json::{Value, json};

use crate::binary::Binary;
use crate::helpers::TOKEN;
use crate::receiver::Receiver;

async fn start(dir: &std::path::Path, db: &std::path::Path, hook: &str) -> Binary {
    Binary::start(
        dir,
        &[
            ("RAKUTEN_GATEWAY_DB_PATH", db.to_str().unwrap()),
            ("RAKUTEN_LEASE_TTL_SECONDS", "1"),
            ("RAKUTEN_ALERT_WEBHOOK_URLS", hook),
            ("RAKUTEN_ALERT_WEBHOOK_MAX_BACKOFF_SECONDS", "1"),
        ],
    )
    .await
}

async fn until<T>(what: &str, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    test_util::wait_for(what, Duration::from_secs(30), async || {
        f().await.ok_or("not yet")
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_between_an_alert_raise_and_its_delivery_still_delivers_it_after_restart() {
    let rx = Receiver::start().await;
    // Down for now: every attempt before the kill fails.
    rx.fail_next(usize::MAX);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gw.db");
    let client = reqwest::Client::new();

    let mut gw = start(dir.path(), &db, &rx.url).await;
    let base = gw.base.clone();
    let submitted: Value = client
        .post(format!("{base}/api/orders"))
        .bearer_auth(TOKEN)
        .json(&json!({"task_id": "po-k9-alert", "site": "rakuten", "intent": {"item_url": "https://item.rakuten.co.jp/shop/a/", "quantity": 1}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(submitted["data"]["created"], true);
    let g: Value = client
        .get(format!("{base}/api/orders/lease?worker_id=w1&wait=0"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(g["data"]["task_id"], "po-k9-alert", "{g}");

    // The lease lapses, the task goes stale, the alert is raised and its delivery attempted.
    let event_id = until("a failed delivery of the task_stale raise", async || {
        rx.received()
            .iter()
            .map(|r| serde_json::from_str::<Value>(&r.body).unwrap())
            .find(|b| b["subject"] == "po-k9-alert" && b["state"] == "raised")
            .map(|b| b["event_id"].as_str().unwrap().to_owned())
    })
    .await;
    assert!(rx.delivered().is_empty());
    gw.child.kill().unwrap(); // SIGKILL
    gw.child.wait().unwrap();

    // The receiver is back; so is the gateway, which finds the event still pending.
    rx.fail_next(0);
    // A new port: the old one may be taken meanwhile.
    let _gw = start(dir.path(), &db, &rx.url).await;
    let delivered = until("the delivery after restart", async || {
        rx.delivered()
            .into_iter()
            .find(|b| b["subject"] == "po-k9-alert" && b["state"] == "raised")
    })
    .await;
    assert_eq!(delivered["event_id"], event_id.as_str(), "the same event");
    assert_eq!(delivered["kind"], "task_stale");
}
