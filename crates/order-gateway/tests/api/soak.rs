//! 50 concurrent clients mixing new and duplicate submits, leases, renewals, reports and reads.
//! No answer may be a 5xx or mention "database is locked". Runs 10 s in the suite; the
//! 60 s version: `SOAK_SECONDS=60 cargo test -p order-gateway --test api soak`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::helpers::{TOKEN, spawn_app};

#[test_util::lane(soak)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_clients_mixing_operations_get_no_5xx_and_no_lock_errors() {
    let secs: u64 = std::env::var("SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let app = spawn_app().await;
    let base = app.address.clone();
    let deadline = Instant::now() + Duration::from_secs(secs);
    let requests = Arc::new(AtomicU64::new(0));
    let finished = Arc::new(AtomicU64::new(0));
    let mut clients = Vec::new();
    for i in 0..50u64 {
        let base = base.clone();
        let requests = requests.clone();
        let finished = finished.clone();
        clients.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut n = 0u64;
            let check = |status: u16, body: &str, what: &str| {
                assert!(status < 500, "{what}: {status} {body}");
                assert!(!body.contains("database is locked"), "{what}: {body}");
            };
            while Instant::now() < deadline {
                n += 1;
                match i % 5 {
                    0 | 1 => {
                        // New ids, and every third request repeats an earlier one.
                        let id = if n.is_multiple_of(3) { format!("c{i}-{}", n / 2) } else { format!("c{i}-{n}") };
                        let r = client
                            .post(format!("{base}/api/orders"))
                            .bearer_auth(TOKEN)
                            .json(&json!({"task_id": id, "site": "rakuten", "intent": {"item_url": "https://item.rakuten.co.jp/shop/a/", "options": {"n": n}}}))
                            .send()
                            .await
                            .unwrap();
                        let s = r.status().as_u16();
                        check(s, &r.text().await.unwrap(), "submit");
                        requests.fetch_add(1, Ordering::Relaxed);
                    }
                    2 | 3 => {
                        let worker = format!("w{i}");
                        let r = client
                            .get(format!("{base}/api/orders/lease?worker_id={worker}&wait=0.05"))
                            .bearer_auth(TOKEN)
                            .send()
                            .await
                            .unwrap();
                        let s = r.status().as_u16();
                        let body = r.text().await.unwrap();
                        check(s, &body, "lease");
                        requests.fetch_add(1, Ordering::Relaxed);
                        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
                        if let Some(id) = v["data"]["task_id"].as_str() {
                            let token = v["data"]["lease_token"].as_str().unwrap();
                            let steps = [
                                ("renew", json!({"worker_id": worker, "lease_token": token})),
                                ("report", json!({"worker_id": worker, "state": "ordered"})),
                                ("report", json!({"worker_id": worker, "state": "ordered"})),
                                ("report", json!({"worker_id": worker, "lease_token": token, "state": "paid", "terminal": true})),
                            ];
                            for (path, body) in steps {
                                let r = client
                                    .post(format!("{base}/api/orders/{id}/{path}"))
                                    .bearer_auth(TOKEN)
                                    .json(&body)
                                    .send()
                                    .await
                                    .unwrap();
                                let s = r.status().as_u16();
                                check(s, &r.text().await.unwrap(), path);
                                requests.fetch_add(1, Ordering::Relaxed);
                                finished.fetch_add(u64::from(body["terminal"] == true && s == 200), Ordering::Relaxed);
                            }
                        }
                    }
                    _ => {
                        let urls = [
                            format!("{base}/api/orders?status=queued&limit=5"),
                            format!("{base}/api/orders/c0-1"),
                            format!("{base}/health"),
                        ];
                        let r = client
                            .get(&urls[(n % 3) as usize])
                            .bearer_auth(TOKEN)
                            .send()
                            .await
                            .unwrap();
                        let s = r.status().as_u16();
                        check(s, &r.text().await.unwrap(), "read");
                        // A report from someone who holds nothing: always 6001/6002, never 5xx.
                        let r = client
                            .post(format!("{base}/api/orders/c1-{n}/report"))
                            .bearer_auth(TOKEN)
                            .json(&json!({"worker_id": "intruder", "state": "created"}))
                            .send()
                            .await
                            .unwrap();
                        let s = r.status().as_u16();
                        check(s, &r.text().await.unwrap(), "stray report");
                        requests.fetch_add(2, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for c in clients {
        c.await.expect("client panicked");
    }
    let total = requests.load(Ordering::Relaxed);
    let done = finished.load(Ordering::Relaxed);
    eprintln!("soak: {total} requests in {secs} s, {done} tasks finished");
    assert!(done > 0, "no task went through in the soak");
    // The gate held throughout: at most one active task now.
    let list = app.list("?status=leased").await;
    assert!(list.assert_ok()["total"].as_i64().unwrap() <= 1);
    let running = app.list("?status=running").await;
    assert!(
        list.data()["total"].as_i64().unwrap() + running.assert_ok()["total"].as_i64().unwrap()
            <= 1
    );
}
