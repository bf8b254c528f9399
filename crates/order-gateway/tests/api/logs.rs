//! The gateway process's logs: with `RAKUTEN_LOG_FORMAT=json` every line is one JSON
//! object; the start line names the address, the storage driver and the database; each request
//! gets one `info` line with route, status, latency, task and worker ids — and the token appears
//! nowhere. A bad setting is one line naming the flag and the variable, exit 2.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::TOKEN;

#[tokio::test]
async fn json_logs_have_a_start_line_and_one_line_per_request_without_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gw.db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_order-gateway"))
        .arg("serve")
        .env("RAKUTEN_API_TOKEN", TOKEN)
        .env("RAKUTEN_GATEWAY_PORT", "0")
        .env("RAKUTEN_GATEWAY_DB_PATH", &db)
        .env("RAKUTEN_LOG_FORMAT", "json")
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start order-gateway");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut lines: Vec<Value> = Vec::new();
    let next = |rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>| {
        let line = rx.try_recv().ok()?;
        Some(serde_json::from_str::<Value>(&line).unwrap_or_else(|e| panic!("{e}: {line}")))
    };
    let start = test_util::wait_for("the start line", Duration::from_secs(20), async || {
        while let Some(v) = next(&mut rx) {
            lines.push(v);
        }
        lines
            .iter()
            .find(|v| v["fields"]["storage"].is_string())
            .cloned()
            .ok_or_else(|| format!("{lines:?}"))
    })
    .await;
    assert_eq!(start["fields"]["storage"], "sqlite", "{start}");
    assert_eq!(
        start["fields"]["database"],
        db.display().to_string(),
        "{start}"
    );
    let addr = start["fields"]["addr"].as_str().unwrap().to_owned();
    assert!(addr.starts_with("127.0.0.1:"), "{start}");

    let http = reqwest::Client::new();
    let base = format!("http://{addr}");
    http.post(format!("{base}/api/orders"))
        .bearer_auth(TOKEN)
        .json(&json!({"task_id": "po-log", "site": "rakuten",
            "intent": {"item_url": "https://item.rakuten.co.jp/shop/x/", "quantity": 1}}))
        .send()
        .await
        .unwrap();
    http.get(format!("{base}/api/orders/lease?worker_id=w-log&wait=0"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    http.post(format!("{base}/api/orders/po-log/report"))
        .bearer_auth(TOKEN)
        .json(&json!({"worker_id": "w-log", "state": "created"}))
        .send()
        .await
        .unwrap();
    http.get(format!("{base}/api/account/queries/q-log"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let requests = test_util::wait_for("four request lines", Duration::from_secs(10), async || {
        while let Some(v) = next(&mut rx) {
            lines.push(v);
        }
        let reqs: Vec<Value> = lines
            .iter()
            .filter(|v| v["fields"]["message"] == "request")
            .cloned()
            .collect();
        if reqs.len() >= 4 {
            Ok(reqs)
        } else {
            Err(format!("{lines:?}"))
        }
    })
    .await;
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(requests.len(), 4, "{requests:?}");
    let f = |i: usize| requests[i]["fields"].clone();
    assert_eq!(requests[0]["level"], "INFO");
    assert_eq!(f(0)["route"], "/api/orders");
    // The submit and the lease name the task they stored or handed out (D-gateway-access-log).
    assert_eq!(f(0)["task_id"], "po-log");
    assert_eq!(f(1)["task_id"], "po-log");
    assert_eq!(f(0)["status"], 200);
    assert!(f(0)["latency_ms"].is_number(), "{}", f(0));
    assert_eq!(f(1)["route"], "/api/orders/lease");
    assert_eq!(f(1)["worker_id"], "w-log");
    assert_eq!(f(2)["route"], "/api/orders/{task_id}/report");
    assert_eq!(f(2)["task_id"], "po-log");
    assert_eq!(f(2)["query_id"], "", "a task route has no query id");
    assert_eq!(f(2)["worker_id"], "w-log");
    assert_eq!(f(3)["route"], "/api/account/queries/{query_id}");
    assert_eq!(f(3)["query_id"], "q-log");
    assert_eq!(f(3)["task_id"], "", "a query route has no task id");
    for l in &lines {
        assert!(
            !l.to_string().contains(TOKEN),
            "the token reached the log: {l}"
        );
    }
}

#[test]
fn a_bad_setting_is_one_line_naming_flag_and_variable_and_exit_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_order-gateway"))
        .arg("serve")
        .env("RAKUTEN_API_TOKEN", TOKEN)
        .env("RAKUTEN_LEASE_TTL_SECONDS", "-1")
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--lease-ttl-seconds / RAKUTEN_LEASE_TTL_SECONDS"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
