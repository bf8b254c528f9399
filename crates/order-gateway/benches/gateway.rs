//! order-gateway benchmark: a plain binary (`harness = false`).
//!
//! `cargo bench -p order-gateway --bench gateway` (optionally `BENCH_SECONDS=5`).
//!
//! Reports, over real HTTP on loopback:
//! - the disk's fdatasync rate, measured before and after in the database's directory;
//! - submit throughput with 1, 16 and 64 concurrent clients (requests/s), and the writer's operations
//!   per commit (= per fsync, `synchronous=FULL`);
//! - lease hand-off latency p50/p99: a long-poll is waiting, a task is submitted, time until the
//!   long-poll returns it (measured from the submit's acknowledgement, and from its sending); and
//!   the same with 1 and 1,000 long-polls of distinct workers waiting, with the writer's
//!   operations per round (a handful with one wake per task, not one per waiter);
//! - full cycles per second: submit → lease → terminal report, one client;
//! - `BENCH_PART=handoff`: only the hand-off, with where its time goes step by step
//!   (`order_gateway::lease::probe`) and the 1 and 1,000 waiters figures;
//! - server RSS idle and with 1,000 open long-polls (the real binary as a child process).
//!
//! Throughput phases run the server in this process (to read the writer's counters); clients
//! share the same 2 cores, so figures are a lower bound for a dedicated server.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
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

/// fsync rate for `secs`, in the pattern SQLite's WAL uses: a 4,120-byte frame (24-byte header +
/// 4 KiB page) appended, then fsync. Disks here vary a lot over minutes, so every phase measures
/// its own rate right before it runs.
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

fn fsync_line(dir: &std::path::Path, when: &str) -> f64 {
    let r = fsync_rate(dir, 1.0);
    println!("  [disk {when}: {r:.0} fsync/s]");
    r
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

struct Bench {
    base: String,
    client: reqwest::Client,
}

impl Bench {
    async fn submit(&self, id: &str) -> Value {
        self.client
            .post(format!("{}/api/orders", self.base))
            .bearer_auth(TOKEN)
            .json(&json!({"task_id": id, "site": "rakuten", "intent": {"item_url": "https://item.rakuten.co.jp/shop/a/", "quantity": 1}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    async fn lease(&self, worker: &str, wait: f64) -> Value {
        self.client
            .get(format!(
                "{}/api/orders/lease?worker_id={worker}&wait={wait}",
                self.base
            ))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    async fn finish(&self, id: &str, worker: &str) {
        let v: Value = self
            .client
            .post(format!("{}/api/orders/{id}/report", self.base))
            .bearer_auth(TOKEN)
            .json(&json!({"worker_id": worker, "state": "paid", "terminal": true}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(v["code"], 0, "{v}");
    }
}

async fn submit_throughput(b: &Arc<Bench>, clients: usize, secs: f64, tag: &str) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let start = Instant::now();
    let mut handles = Vec::new();
    for c in 0..clients {
        let (b, done) = (b.clone(), done.clone());
        let tag = tag.to_owned();
        handles.push(tokio::spawn(async move {
            let mut i = 0u64;
            while Instant::now() < deadline {
                let v = b.submit(&format!("{tag}-{c}-{i}")).await;
                assert_eq!(v["code"], 0, "{v}");
                i += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

/// `waiters` long-polls of distinct workers loop (lease with a long wait → report the task
/// finished → lease again); each round submits one task and times its submit's acknowledgement →
/// the grant arriving at whichever poll was woken. Returns p50, p99 and the writer's operations
/// per round (a handful when one waiter wakes per task; over `waiters` when all of them do).
async fn handoff_with_waiters(
    b: &Arc<Bench>,
    store: &order_gateway::store::sqlite::SqliteStore,
    waiters: usize,
    rounds: usize,
) -> (Duration, Duration, f64) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    let stop = tokio_util::sync::CancellationToken::new();
    let mut polls = Vec::with_capacity(waiters);
    for w in 0..waiters {
        let (b, tx, stop) = (b.clone(), tx.clone(), stop.clone());
        polls.push(tokio::spawn(async move {
            let worker = format!("wait-{waiters}-{w}");
            while !stop.is_cancelled() {
                let v = b.lease(&worker, 60.0).await;
                if let Some(id) = v["data"]["task_id"].as_str() {
                    let _ = tx.send((id.to_owned(), Instant::now()));
                    b.finish(id, &worker).await;
                }
            }
        }));
    }
    // Let every poll reach its wait.
    tokio::time::sleep(Duration::from_millis(500 + waiters as u64)).await;
    let mut lat = Vec::with_capacity(rounds);
    let (_, o0) = store.write_stats();
    for i in 0..rounds {
        let id = format!("w{waiters}-{i}");
        let ack = b.submit(&id).await;
        let acked = Instant::now();
        assert_eq!(ack["code"], 0);
        let (got, at) = rx.recv().await.unwrap();
        assert_eq!(got, id);
        lat.push(at.saturating_duration_since(acked));
        // Let the winner report and wait again before the next task.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_, o1) = store.write_stats();
    stop.cancel();
    for p in polls {
        p.abort();
    }
    lat.sort();
    (
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        (o1 - o0) as f64 / rounds as f64,
    )
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    // BENCH_PART: `single` (the SQLite figures above), `matrix` (SQLite vs PostgreSQL, 1 and 3
    // instances), `handoff` (only the hand-off: its step breakdown and the 1 and 1,000
    // waiters figures), or `all` (default: single and matrix).
    let part = std::env::var("BENCH_PART").unwrap_or_else(|_| "all".into());
    if part == "handoff" {
        rt.block_on(handoff::run());
    }
    if part == "all" || part == "single" {
        rt.block_on(run());
    }
    if part == "all" || part == "matrix" {
        rt.block_on(matrix::run());
    }
}

/// SQLite vs PostgreSQL, 1 and 3 gateway instances: submit throughput, hand-off latency
/// (a long-poll waits on one instance, the task is submitted on the next), account-query cycles.
/// PostgreSQL: `DATABASE_URL_TEST` (default `postgres://postgres@127.0.0.1:5432/test`), a fresh
/// schema per configuration, dropped afterwards. All instances run in this process.
mod matrix {
    use super::*;
    use test_util::PgSchema;
    use tokio::task::JoinHandle;
    use tokio_util::sync::CancellationToken;

    struct Cluster {
        nodes: Vec<Arc<Bench>>,
        stop: CancellationToken,
        servers: Vec<JoinHandle<anyhow::Result<()>>>,
        schema: Option<PgSchema>,
    }

    async fn cluster(dir: &std::path::Path, name: &str, pg: bool, n: usize) -> Cluster {
        let schema = if pg {
            Some(PgSchema::new().await)
        } else {
            None
        };
        let stop = CancellationToken::new();
        let (mut nodes, mut servers) = (Vec::new(), Vec::new());
        for _ in 0..n {
            let mut settings = Settings::for_tests(dir.join(format!("{name}.db")), TOKEN);
            settings.lease_max_wait_seconds = 60.0;
            settings.db_url = schema
                .as_ref()
                .map(|s| order_gateway::settings::Secret::new(s.url.clone()));
            let app = Application::build(settings, Arc::new(SystemClock))
                .await
                .unwrap();
            nodes.push(Arc::new(Bench {
                base: format!("http://127.0.0.1:{}", app.port()),
                client: reqwest::Client::builder()
                    .pool_max_idle_per_host(64)
                    .build()
                    .unwrap(),
            }));
            let stop = stop.clone();
            servers.push(tokio::spawn(
                app.run_until_stopped(async move { stop.cancelled().await }),
            ));
        }
        Cluster {
            nodes,
            stop,
            servers,
            schema,
        }
    }

    impl Cluster {
        async fn shutdown(self) {
            self.stop.cancel();
            for s in self.servers {
                s.await.unwrap().unwrap();
            }
            // The instances are stopped: nothing holds the schema any more.
            drop(self.schema);
        }

        async fn handoff(&self, rounds: usize) -> (Duration, Duration) {
            let n = self.nodes.len();
            let mut lat = Vec::with_capacity(rounds);
            for i in 0..rounds {
                let (waiter, submitter) = (&self.nodes[i % n], &self.nodes[(i + 1) % n]);
                let poll = tokio::spawn({
                    let w = waiter.clone();
                    async move {
                        let v = w.lease("hw", 10.0).await;
                        (v, Instant::now())
                    }
                });
                tokio::time::sleep(Duration::from_millis(15)).await;
                let id = format!("h-{i}");
                let ack = submitter.submit(&id).await;
                let acked = Instant::now();
                assert_eq!(ack["code"], 0);
                let (v, returned) = poll.await.unwrap();
                assert_eq!(v["data"]["task_id"], id.as_str(), "{v}");
                lat.push(returned.saturating_duration_since(acked));
                submitter.finish(&id, "hw").await;
            }
            lat.sort();
            (percentile(&lat, 0.5), percentile(&lat, 0.99))
        }

        async fn submits(&self, clients: usize, secs: f64, tag: &str) -> f64 {
            let done = Arc::new(AtomicU64::new(0));
            let deadline = Instant::now() + Duration::from_secs_f64(secs);
            let start = Instant::now();
            let mut handles = Vec::new();
            for c in 0..clients {
                let (b, done) = (self.nodes[c % self.nodes.len()].clone(), done.clone());
                let tag = tag.to_owned();
                handles.push(tokio::spawn(async move {
                    let mut i = 0u64;
                    while Instant::now() < deadline {
                        let v = b.submit(&format!("{tag}-{c}-{i}")).await;
                        assert_eq!(v["code"], 0, "{v}");
                        i += 1;
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }));
            }
            for h in handles {
                h.await.unwrap();
            }
            done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
        }

        /// `workers` loops of submit query → lease (wait 0) → success result; results per second.
        async fn query_cycles(&self, workers: usize, secs: f64) -> f64 {
            let done = Arc::new(AtomicU64::new(0));
            let deadline = Instant::now() + Duration::from_secs_f64(secs);
            let start = Instant::now();
            let mut handles = Vec::new();
            for w in 0..workers {
                let (b, done) = (self.nodes[w % self.nodes.len()].clone(), done.clone());
                handles.push(tokio::spawn(async move {
                    let worker = format!("qw{w}");
                    let mut i = 0u64;
                    while Instant::now() < deadline {
                        let q: Value = b
                            .client
                            .post(format!("{}/api/account/queries", b.base))
                            .bearer_auth(TOKEN)
                            .json(&json!({"query_id": format!("q-{w}-{i}"), "site": "rakuten", "kind": "order_list", "params": {"max_pages": 1}}))
                            .send()
                            .await
                            .unwrap()
                            .json()
                            .await
                            .unwrap();
                        assert_eq!(q["code"], 0, "{q}");
                        i += 1;
                        let g: Value = b
                            .client
                            .get(format!(
                                "{}/api/account/queries/lease?worker_id={worker}&wait=0",
                                b.base
                            ))
                            .bearer_auth(TOKEN)
                            .send()
                            .await
                            .unwrap()
                            .json()
                            .await
                            .unwrap();
                        let Some(id) = g["data"]["query_id"].as_str() else {
                            continue;
                        };
                        let r: Value = b
                            .client
                            .post(format!("{}/api/account/queries/{id}/result", b.base))
                            .bearer_auth(TOKEN)
                            .json(&json!({"worker_id": worker, "lease_token": g["data"]["lease_token"], "success": true,
                                "result": {"kind": "order_list", "since": null, "max_pages": 1, "window_fully_covered": true, "orders": [], "raw_pages": []}}))
                            .send()
                            .await
                            .unwrap()
                            .json()
                            .await
                            .unwrap();
                        assert_eq!(r["code"], 0, "{r}");
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }));
            }
            for h in handles {
                h.await.unwrap();
            }
            done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
        }
    }

    pub async fn run() {
        let secs = bench_seconds();
        let dir = tempfile::Builder::new()
            .prefix("gw-matrix")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        println!(
            "# order-gateway matrix: SQLite vs PostgreSQL, 1 and 3 instances ({secs} s phases)"
        );
        println!(
            "| backend | instances | fsync/s | submit x16 req/s | submit x64 req/s | hand-off p50 | hand-off p99 | query cycles x8 /s |"
        );
        println!("|---|---|---|---|---|---|---|---|");
        for (name, pg, n) in [
            ("sqlite", false, 1),
            ("postgres", true, 1),
            ("postgres", true, 3),
        ] {
            let fsync = fsync_rate(dir.path(), 1.0);
            let c = cluster(dir.path(), &format!("{name}-{n}"), pg, n).await;
            // Hand-off first: it needs an empty queue.
            let (p50, p99) = c.handoff(200).await;
            let q = c.query_cycles(8, secs).await;
            let s16 = c.submits(16, secs, "s16").await;
            let s64 = c.submits(64, secs, "s64").await;
            println!(
                "| {name} | {n} | {fsync:.0} | {s16:.0} | {s64:.0} | {} | {} | {q:.0} |",
                ms(p50),
                ms(p99)
            );
            c.shutdown().await;
        }
    }
}

/// An in-process SQLite gateway serving on a loopback port, and a client for it.
struct Served {
    b: Arc<Bench>,
    store: Arc<order_gateway::store::sqlite::SqliteStore>,
    stop: tokio_util::sync::CancellationToken,
    server: tokio::task::JoinHandle<anyhow::Result<()>>,
    /// The orders' long-poll notifier (a submit's hand-off can be turned off on it).
    notifier: order_gateway::lease::notify::LeaseNotifier,
}

/// Starts a gateway on the database file `db` (long-polls may wait 60 s); the client keeps up
/// to `idle_per_host` idle connections (0: reqwest's default).
async fn serve_sqlite(db: &std::path::Path, idle_per_host: usize) -> Served {
    let mut settings = Settings::for_tests(db.to_path_buf(), TOKEN);
    settings.lease_max_wait_seconds = 60.0;
    let app = Application::build(settings, Arc::new(SystemClock))
        .await
        .unwrap();
    let store = app.sqlite_store();
    let notifier = app.state().lease_notifier.clone();
    let base = format!("http://127.0.0.1:{}", app.port());
    let stop = tokio_util::sync::CancellationToken::new();
    let server = tokio::spawn({
        let stop = stop.clone();
        app.run_until_stopped(async move { stop.cancelled().await })
    });
    let mut client = reqwest::Client::builder();
    if idle_per_host > 0 {
        client = client.pool_max_idle_per_host(idle_per_host);
    }
    let b = Arc::new(Bench {
        base,
        client: client.build().unwrap(),
    });
    Served {
        b,
        store,
        stop,
        server,
        notifier,
    }
}

async fn run() {
    let secs = bench_seconds();
    let dir = tempfile::Builder::new()
        .prefix("gw-bench")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    println!("# order-gateway bench ({secs} s phases)");
    println!(
        "machine: {} cores, {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/cpuinfo")
            .unwrap_or_default()
            .lines()
            .find(|l| l.starts_with("model name"))
            .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
            .unwrap_or_default()
    );
    fsync_line(dir.path(), "at start");

    // In-process server: throughput, hand-off, cycles.
    let Served {
        b,
        store,
        stop,
        server,
        ..
    } = serve_sqlite(&dir.path().join("bench.db"), 64).await;

    fsync_line(dir.path(), "before submit x1");
    let (c0, o0) = store.write_stats();
    let one = submit_throughput(&b, 1, secs, "s1").await;
    let (c1, o1) = store.write_stats();
    fsync_line(dir.path(), "before submit x16");
    let sixteen = submit_throughput(&b, 16, secs, "s16").await;
    let (c2, o2) = store.write_stats();
    fsync_line(dir.path(), "before submit x64");
    let sixty_four = submit_throughput(&b, 64, secs, "s64").await;
    let (c3, o3) = store.write_stats();
    println!(
        "submit, 1 client:   {one:.0} req/s  ({:.2} ops per commit/fsync, {:.0} commits/s)",
        (o1 - o0) as f64 / (c1 - c0).max(1) as f64,
        (c1 - c0) as f64 / secs
    );
    println!(
        "submit, 16 clients: {sixteen:.0} req/s  ({:.2} ops per commit/fsync, {:.0} commits/s)",
        (o2 - o1) as f64 / (c2 - c1).max(1) as f64,
        (c2 - c1) as f64 / secs
    );
    println!(
        "submit, 64 clients: {sixty_four:.0} req/s  ({:.2} ops per commit/fsync, {:.0} commits/s)",
        (o3 - o2) as f64 / (c3 - c2).max(1) as f64,
        (c3 - c2) as f64 / secs
    );

    // The hand-off needs an empty queue; finishing thousands of queued tasks one by one through
    // the gate would take long, so it uses a fresh database.
    stop.cancel();
    server.await.unwrap().unwrap();

    let Served {
        b,
        store,
        stop,
        server,
        ..
    } = serve_sqlite(&dir.path().join("bench2.db"), 0).await;

    // Hand-off latency.
    fsync_line(dir.path(), "before hand-off");
    let rounds = 300;
    let mut from_ack = Vec::with_capacity(rounds);
    let mut from_send = Vec::with_capacity(rounds);
    for i in 0..rounds {
        let poll = tokio::spawn({
            let b = b.clone();
            async move {
                let v = b.lease("hw", 10.0).await;
                (v, Instant::now())
            }
        });
        // Let the poll reach its wait.
        tokio::time::sleep(Duration::from_millis(15)).await;
        let id = format!("h-{i}");
        let sent = Instant::now();
        let ack = b.submit(&id).await;
        let acked = Instant::now();
        assert_eq!(ack["code"], 0);
        let (v, returned) = poll.await.unwrap();
        assert_eq!(v["data"]["task_id"], id.as_str(), "{v}");
        from_ack.push(returned.saturating_duration_since(acked));
        from_send.push(returned.saturating_duration_since(sent));
        b.finish(&id, "hw").await;
    }
    from_ack.sort();
    from_send.sort();
    println!(
        "hand-off (waiting long-poll gets a new task), {rounds} rounds: from submit ack p50 {} p99 {}; from submit sent p50 {} p99 {}",
        ms(percentile(&from_ack, 0.5)),
        ms(percentile(&from_ack, 0.99)),
        ms(percentile(&from_send, 0.5)),
        ms(percentile(&from_send, 0.99)),
    );

    // Hand-off with 1 and 1,000 long-polls waiting: one wake per task.
    for waiters in [1, 1000] {
        fsync_line(
            dir.path(),
            &format!("before hand-off with {waiters} waiting"),
        );
        let (p50, p99, attempts) = handoff_with_waiters(&b, &store, waiters, 200).await;
        println!(
            "hand-off with {waiters} long-polls waiting, 200 rounds: from submit ack p50 {} p99 {}; {attempts:.2} writer ops per round (submit, the woken poll's lease, its report, its next poll, the poll the freed gate wakes: about 5 whatever the number waiting)",
            ms(p50),
            ms(p99)
        );
    }

    // Full cycles.
    fsync_line(dir.path(), "before full cycles");
    let (c0, o0) = store.write_stats();
    let start = Instant::now();
    let mut cycles = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        let id = format!("c-{cycles}");
        b.submit(&id).await;
        let g = b.lease("cw", 0.0).await;
        assert_eq!(g["data"]["task_id"], id.as_str(), "{g}");
        b.finish(&id, "cw").await;
        cycles += 1;
    }
    let rate = cycles as f64 / start.elapsed().as_secs_f64();
    let (c1, o1) = store.write_stats();
    println!(
        "full cycle submit → lease → terminal report, 1 client: {rate:.0} cycles/s ({:.2} ops per commit)",
        (o1 - o0) as f64 / (c1 - c0).max(1) as f64
    );
    stop.cancel();
    server.await.unwrap().unwrap();

    // RSS of the real binary.
    // Port 0: the binary writes the address it bound; nothing picks a port in advance.
    let addr_file = dir.path().join("rss.addr");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_order-gateway"))
        .arg("serve")
        .env("RAKUTEN_API_TOKEN", TOKEN)
        .env("RAKUTEN_GATEWAY_PORT", "0")
        .env("RAKUTEN_GATEWAY_ADDR_FILE", &addr_file)
        .env("RAKUTEN_GATEWAY_DB_PATH", dir.path().join("rss.db"))
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut base = String::new();
    for _ in 0..400 {
        if let Ok(addr) = std::fs::read_to_string(&addr_file) {
            base = format!("http://{}", addr.trim());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!base.is_empty(), "the gateway did not write its address");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = rss_kib(child.id());
    let polls = 1000;
    let mut handles = Vec::with_capacity(polls);
    let many = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    for i in 0..polls {
        let (c, base) = (many.clone(), base.clone());
        handles.push(tokio::spawn(async move {
            let _ = c
                .get(format!("{base}/api/orders/lease?worker_id=p{i}&wait=30"))
                .bearer_auth(TOKEN)
                .send()
                .await;
        }));
    }
    tokio::time::sleep(Duration::from_secs(4)).await;
    let loaded = rss_kib(child.id());
    println!(
        "server RSS: idle {:.1} MiB; with {polls} open long-polls {:.1} MiB",
        idle as f64 / 1024.0,
        loaded as f64 / 1024.0
    );
    let _ = child.kill();
    let _ = child.wait();
    for h in handles {
        h.abort();
    }
    fsync_line(dir.path(), "at end");
}

/// `BENCH_PART=handoff`: the hand-off alone, on SQLite, with the time of each
/// step from the submit's wake-up to the grant reaching the client (timestamps from
/// `order_gateway::lease::probe`), then the hand-off with 1 and 1,000 long-polls waiting.
mod handoff {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use order_gateway::lease::probe::{self, Step};

    use super::{fsync_line, handoff_with_waiters, ms, percentile};

    static EVENTS: Mutex<Vec<(Step, Instant)>> = Mutex::new(Vec::new());
    static RECORDING: AtomicBool = AtomicBool::new(true);

    fn record(step: Step) {
        if !RECORDING.load(Ordering::Relaxed) {
            return;
        }
        let at = Instant::now();
        EVENTS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((step, at));
    }

    fn take() -> Vec<(Step, Instant)> {
        std::mem::take(&mut *EVENTS.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The first `step` at or after index `from`: its index and time.
    fn find(ev: &[(Step, Instant)], from: usize, step: Step) -> Option<(usize, Instant)> {
        ev.iter()
            .enumerate()
            .skip(from)
            .find(|(_, (s, _))| *s == step)
            .map(|(i, (_, t))| (i, *t))
    }

    fn us(d: Duration) -> String {
        format!("{:.0} µs", d.as_secs_f64() * 1e6)
    }

    pub(super) async fn run() {
        let dir = tempfile::Builder::new()
            .prefix("gw-bench-handoff")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        println!("# order-gateway hand-off bench (BENCH_PART=handoff)");
        println!(
            "machine: {} cores; load average at start: {}",
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .trim()
        );
        assert!(probe::install(record), "the probe is installed once");
        let super::Served {
            b,
            store,
            stop,
            server,
            notifier,
        } = super::serve_sqlite(&dir.path().join("handoff.db"), 0).await;
        // The steps below are the wake-up path's (the path of a poll on another PostgreSQL
        // instance); a submit's hand-off (D-handoff-in-submit-commit) has none of them.
        notifier.set_handoff(false);
        println!("(the wake-up path: submits' hand-offs turned off)");

        let fsync = fsync_line(dir.path(), "before the hand-off breakdown");
        let rounds = 300;
        let names = [
            "submit notified → poll woken (task wake-up)",
            "poll woken → writer batch begins (channel + writer wake-up)",
            "batch begins → COMMIT starts (BEGIN IMMEDIATE, SAVEPOINT, lease SQL, RELEASE)",
            "COMMIT (the WAL fsync)",
            "COMMIT done → lease returned to the handler (reply + task wake-up)",
            "lease returned → grant received by the client (JSON, HTTP, client)",
        ];
        let mut steps: Vec<Vec<Duration>> = vec![Vec::new(); names.len()];
        let mut notify_to_ack = Vec::with_capacity(rounds);
        let mut ack_to_grant = Vec::with_capacity(rounds);
        let mut submit_commit = Vec::with_capacity(rounds);
        for i in 0..rounds {
            let poll = tokio::spawn({
                let b = b.clone();
                async move {
                    let v = b.lease("hw", 10.0).await;
                    (v, Instant::now())
                }
            });
            tokio::time::sleep(Duration::from_millis(15)).await;
            take();
            let id = format!("hb-{i}");
            let ack = b.submit(&id).await;
            let acked = Instant::now();
            assert_eq!(ack["code"], 0);
            let (v, granted) = poll.await.unwrap();
            assert_eq!(v["data"]["task_id"], id.as_str(), "{v}");
            let ev = take();
            b.finish(&id, "hw").await;
            // The submit's own batch, then the woken poll's.
            let Some((sc_i, _)) = find(&ev, 0, Step::SubmitCommitted) else {
                continue;
            };
            if let (Some((_, cs)), Some((_, cd))) = (
                find(&ev, 0, Step::WriterCommitStart),
                find(&ev, 0, Step::WriterCommitDone),
            ) {
                submit_commit.push(cd.saturating_duration_since(cs));
            }
            let Some((n_i, notified)) = find(&ev, sc_i, Step::SubmitNotified) else {
                continue;
            };
            let Some((w_i, woken)) = find(&ev, n_i, Step::PollWoken) else {
                continue;
            };
            let (Some((b_i, begin)), Some((_, lease_back))) = (
                find(&ev, w_i, Step::WriterBatchBegin),
                find(&ev, w_i, Step::LeaseReturned),
            ) else {
                continue;
            };
            let (Some((c_i, commit_start)), Some((_, commit_done))) = (
                find(&ev, b_i, Step::WriterCommitStart),
                find(&ev, b_i, Step::WriterCommitDone),
            ) else {
                continue;
            };
            let _ = c_i;
            let marks = [
                notified,
                woken,
                begin,
                commit_start,
                commit_done,
                lease_back,
                granted,
            ];
            for (k, w) in marks.windows(2).enumerate() {
                steps[k].push(w[1].saturating_duration_since(w[0]));
            }
            notify_to_ack.push(acked.saturating_duration_since(notified));
            ack_to_grant.push(granted.saturating_duration_since(acked));
        }
        for v in steps
            .iter_mut()
            .chain([&mut notify_to_ack, &mut ack_to_grant, &mut submit_commit])
        {
            v.sort();
        }
        println!(
            "hand-off breakdown, {} of {rounds} rounds fully traced (disk {fsync:.0} fsync/s = {:.2} ms per fsync):",
            ack_to_grant.len(),
            1000.0 / fsync.max(1.0)
        );
        println!("| step | p50 | p99 |");
        println!("|---|---|---|");
        for (name, v) in names.iter().zip(&steps) {
            println!(
                "| {name} | {} | {} |",
                us(percentile(v, 0.5)),
                us(percentile(v, 0.99))
            );
        }
        println!(
            "| (meanwhile) submit notified → ack received by the client | {} | {} |",
            us(percentile(&notify_to_ack, 0.5)),
            us(percentile(&notify_to_ack, 0.99))
        );
        println!(
            "| (reference) the submit's own COMMIT | {} | {} |",
            us(percentile(&submit_commit, 0.5)),
            us(percentile(&submit_commit, 0.99))
        );
        println!(
            "| **hand-off: ack received → grant received** | {} | {} |",
            ms(percentile(&ack_to_grant, 0.5)),
            ms(percentile(&ack_to_grant, 0.99))
        );

        RECORDING.store(false, Ordering::Relaxed);
        for waiters in [1, 1000] {
            let fsync = fsync_line(
                dir.path(),
                &format!("before hand-off with {waiters} waiting"),
            );
            let (p50, p99, ops) = handoff_with_waiters(&b, &store, waiters, 200).await;
            println!(
                "hand-off with {waiters} long-polls waiting, 200 rounds: from submit ack p50 {} p99 {}; {ops:.2} writer ops per round; disk {fsync:.0} fsync/s",
                ms(p50),
                ms(p99)
            );
        }
        fsync_line(dir.path(), "at end");
        println!(
            "load average at end: {}",
            std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .trim()
        );
        stop.cancel();
        server.await.unwrap().unwrap();
    }
}
