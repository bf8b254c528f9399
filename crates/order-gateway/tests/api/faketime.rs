//! Real processes and a real clock step (libfaketime, not an injected
//! clock): two `order-gateway` processes on one PostgreSQL schema, one of them 120 s ahead. A 60 s
//! lease granted through the healthy one stays `leased` over many sweeps of the fast one (before
//! the fix the fast instance's sweeper made it `stale` within 2 s), and the fast instance's skew
//! is an alert record, in `/health` and in its `clocks` row.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::binary::Binary;
use crate::helpers::TOKEN;
use test_util::PgSchema;

async fn get(client: &reqwest::Client, url: String) -> Value {
    let r = client.get(url).bearer_auth(TOKEN).send().await.unwrap();
    r.json().await.unwrap()
}

#[test_util::lane(postgres, faketime)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_120_s_ahead_under_libfaketime_leaves_a_healthy_lease_leased_and_raises_clock_skew()
 {
    let db = Arc::new(PgSchema::new().await);
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("RAKUTEN_GATEWAY_DB_URL", db.url.as_str()),
        ("RAKUTEN_LEASE_TTL_SECONDS", "60"),
        ("RAKUTEN_SWEEP_INTERVAL_SECONDS", "0.2"),
        ("RAKUTEN_CLOCK_SKEW_ALERT_SECONDS", "2"),
        ("RAKUTEN_WORKER_OFFLINE_ALERT_SECONDS", "100000"),
    ];
    let healthy = Binary::start(dir.path(), &env).await;
    let fast = Binary::start_faked(dir.path(), &env, "+120s").await;
    let client = reqwest::Client::new();

    let submitted = client
        .post(format!("{}/api/orders", healthy.base))
        .bearer_auth(TOKEN)
        .json(&json!({"task_id": "po-ft", "site": "rakuten",
                      "intent": {"item_url": "https://item.rakuten.co.jp/shop/a/", "quantity": 1}}))
        .send()
        .await
        .unwrap();
    assert_eq!(submitted.status(), 200);
    let g = get(
        &client,
        format!("{}/api/orders/lease?worker_id=w-ft&wait=0", healthy.base),
    )
    .await;
    assert_eq!(g["data"]["task_id"], "po-ft", "{g}");
    let leased_at = Instant::now();

    // Ten sweep intervals of the fast instance and more: wait for its clock_skew record (the
    // elected instance's alert job runs every sweep interval too), checking the task each round.
    let alert = test_util::wait_for(
        "a clock_skew alert, 2 s after the lease",
        Duration::from_secs(20),
        async || {
            let t = get(&client, format!("{}/api/orders/po-ft", fast.base)).await;
            assert_eq!(t["data"]["status"], "leased", "{t}");
            let a = get(
                &client,
                format!("{}/api/alerts?state=open&kind=clock_skew", healthy.base),
            )
            .await;
            match a["data"]["items"].as_array().and_then(|i| i.first()) {
                Some(first) if leased_at.elapsed() > Duration::from_secs(2) => Ok(first.clone()),
                _ => Err(a),
            }
        },
    )
    .await;
    assert!(
        alert["summary"].as_str().unwrap().contains("ahead of"),
        "{alert}"
    );

    // /health (either instance) shows the fast one's offset, about -120 s, and flags it.
    let h = get(&client, format!("{}/health", healthy.base)).await;
    let clocks = h["data"]["clocks"].as_array().unwrap().clone();
    let skewed: Vec<&Value> = clocks.iter().filter(|c| c["skewed"] == true).collect();
    assert_eq!(skewed.len(), 1, "{h}");
    assert_eq!(skewed[0]["instance_id"], alert["subject"], "{h}");
    let offset = skewed[0]["offset_ms"].as_i64().unwrap();
    assert!((-125_000..-115_000).contains(&offset), "{offset}");
    assert!(
        clocks
            .iter()
            .any(|c| c["skewed"] == false && c["offset_ms"].as_i64().unwrap().abs() < 2_000),
        "the healthy instance reports too: {h}"
    );
    assert!(
        h["data"]["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["kind"] == "clock_skew"),
        "{h}"
    );
    let t = get(&client, format!("{}/api/orders/po-ft", healthy.base)).await;
    assert_eq!(t["data"]["status"], "leased", "{t}");
    drop(fast);
    drop(healthy);
}
