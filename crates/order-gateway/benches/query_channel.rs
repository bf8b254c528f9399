//! Account-query channel benchmark: a plain binary (`harness = false`).
//!
//! `cargo bench -p order-gateway --bench query_channel` (optionally `BENCH_SECONDS=5`).
//!
//! Over real HTTP on loopback, with 1, 4 and 16 concurrent simulated workers, each looping
//! submit → lease (`wait=0`) → result (a ~1 KiB `order_list` success) → GET: end-to-end queries per
//! second, p50/p99 latency of each call, and the writer's operations per commit (= per fsync,
//! `synchronous=FULL`). The disk's fsync rate is measured right before each phase. The server runs
//! in this process on the same 2 cores as the clients, so figures are a lower bound.

use std::sync::Arc;
use std::time::{Duration, Instant};

use order_gateway::{Application, Settings};
use rakuten_types::SystemClock;
use serde_json::{Value, json};

/// At least 16 characters, as the binary requires of every token.
const TOKEN: &str = "bench-token-0123456789";

fn bench_seconds() -> f64 {
    std::env::var("BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5.0)
}

/// fsync rate for `secs` (4,120-byte append + fsync, like a WAL frame).
fn fsync_rate(dir: &std::path::Path, secs: f64) -> f64 {
    use std::os::unix::fs::FileExt;
    let path = dir.join("fsync-probe");
    let f = std::fs::File::create(&path).expect("probe file");
    let buf = vec![7u8; 4120];
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        f.write_all_at(&buf, 32 + n * 4120).unwrap();
        f.sync_all().unwrap();
        n += 1;
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    drop(f);
    let _ = std::fs::remove_file(path);
    rate
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

/// Latencies of one worker's calls.
#[derive(Default)]
struct Lat {
    submit: Vec<Duration>,
    lease: Vec<Duration>,
    result: Vec<Duration>,
    get: Vec<Duration>,
    done: u64,
}

fn result_body(worker: &str, token: &Value) -> Value {
    let orders: Vec<Value> = (0..3)
        .map(|i| json!({"order_number": format!("306087-20260813-{i:010}"), "order_date": "2026-08-13T00:00:00.000Z",
                        "shop_id": 306087, "shop_name": "bench shop", "items": [{"item_id": 1001, "item_name": "tea", "item_url": "https://item.rakuten.co.jp/simshop/sample-tea/"}]}))
        .collect();
    json!({"worker_id": worker, "lease_token": token, "success": true, "result": {
        "kind": "order_list", "since": null, "max_pages": 1, "window_fully_covered": true,
        "orders": orders.clone(), "raw_pages": [{"page": 1, "total_pages": 1, "orders": orders}]}})
}

async fn call(req: reqwest::RequestBuilder) -> (Duration, Value) {
    let t = Instant::now();
    let v: Value = req
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    (t.elapsed(), v)
}

async fn worker_loop(
    base: String,
    client: reqwest::Client,
    me: usize,
    run: u32,
    until: Instant,
) -> Lat {
    let worker = format!("bench-w{me}");
    let mut lat = Lat::default();
    let mut n = 0u64;
    while Instant::now() < until {
        let id = format!("bq-{run}-{me}-{n}");
        n += 1;
        let (d, v) = call(
            client
                .post(format!("{base}/api/account/queries"))
                .json(&json!({"query_id": id, "site": "rakuten", "kind": "order_list", "params": {"max_pages": 1}})),
        )
        .await;
        assert_eq!(v["code"], 0, "{v}");
        lat.submit.push(d);
        // Another worker may have taken it; lease until something comes (it always does:
        // every worker submits before it leases).
        let grant = loop {
            let (d, v) = call(client.get(format!(
                "{base}/api/account/queries/lease?worker_id={worker}&wait=0"
            )))
            .await;
            lat.lease.push(d);
            if !v["data"].is_null() {
                break v["data"].clone();
            }
        };
        let qid = grant["query_id"].as_str().unwrap().to_owned();
        let (d, v) = call(
            client
                .post(format!("{base}/api/account/queries/{qid}/result"))
                .json(&result_body(&worker, &grant["lease_token"])),
        )
        .await;
        assert_eq!(v["data"]["status"], "succeeded", "{v}");
        lat.result.push(d);
        let (d, v) = call(client.get(format!("{base}/api/account/queries/{qid}"))).await;
        assert_eq!(v["data"]["status"], "succeeded");
        lat.get.push(d);
        lat.done += 1;
    }
    lat
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let secs = bench_seconds();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut settings = Settings::for_tests(dir.path().join("bench.db"), TOKEN);
    settings.sweep_interval_seconds = 3600.0;
    let app = Application::build(settings, Arc::new(SystemClock))
        .await
        .expect("build");
    let base = format!("http://127.0.0.1:{}", app.port());
    let store = app.sqlite_store();
    tokio::spawn(app.run_until_stopped(std::future::pending()));
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .unwrap();
    println!("account query channel: submit → lease → result → GET, {secs} s per phase");
    println!(
        "| workers | queries/s | ops/commit | fsync/s before | p50 / p99 submit ms | p50 / p99 lease ms | p50 / p99 result ms | p50 / p99 GET ms |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (run, workers) in [1usize, 4, 16].into_iter().enumerate() {
        let fsync = fsync_rate(dir.path(), 1.0);
        let (c0, o0) = store.write_stats();
        let start = Instant::now();
        let until = start + Duration::from_secs_f64(secs);
        let handles: Vec<_> = (0..workers)
            .map(|me| {
                tokio::spawn(worker_loop(
                    base.clone(),
                    client.clone(),
                    me,
                    run as u32,
                    until,
                ))
            })
            .collect();
        let mut all = Lat::default();
        for h in handles {
            let l = h.await.unwrap();
            all.submit.extend(l.submit);
            all.lease.extend(l.lease);
            all.result.extend(l.result);
            all.get.extend(l.get);
            all.done += l.done;
        }
        let elapsed = start.elapsed().as_secs_f64();
        let (c1, o1) = store.write_stats();
        let per_commit = (o1 - o0) as f64 / ((c1 - c0).max(1)) as f64;
        let mut cols = Vec::new();
        for v in [
            &mut all.submit,
            &mut all.lease,
            &mut all.result,
            &mut all.get,
        ] {
            v.sort();
            cols.push(format!(
                "{} / {}",
                ms(percentile(v, 0.5)),
                ms(percentile(v, 0.99))
            ));
        }
        println!(
            "| {workers} | {:.0} | {per_commit:.2} | {fsync:.0} | {} |",
            all.done as f64 / elapsed,
            cols.join(" | ")
        );
    }
}
