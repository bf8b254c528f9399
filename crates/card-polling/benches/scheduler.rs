//! Scheduler benchmark: with N cards (default 1,000,000) under ordinary
//! polling at full rate (every card, every task type, at its interval), measures the scheduling
//! cycle time and the hint-to-execution latency of priority items (`started_at - enqueued_at`
//! of the item, milliseconds, system clock), once with the in-process hint channel and once with
//! Redis.
//!
//! Run: `cargo bench -p card-polling --bench scheduler -- --cards 1000000 --secs 60`
//!
//! The service's settings are its **production defaults** (what `card-polling serve` would run
//! with, `RAKUTEN_POLL_*` variables included), except the simulated carrier's latency (20 ms) and
//! what a flag below sets. Options: `--cards N`, `--secs S` (measured seconds per hint channel,
//! default 60), `--rate R` (priority enqueues per second, default 20), `--latency-ms L` (simulated
//! carrier latency, default 20), `--hints memory|redis|both` (default both), `--redis URL`
//! (default `redis://127.0.0.1:6379/`), `--dir PATH` (database directory, default temp dir), and
//! overrides of the settings `--concurrency C` (executions per task type), `--backpressure N`
//! (per-shard queue depth bound), `--backpressure-secs S` (seconds of queued work per task type),
//! `--shard-batch N`.
//!
//! Each run (one per hint channel) ends with one line holding a JSON object with `cards`,
//! `secs`, `backend`, `hints`, `instances`, `due_polls_per_s`, `executed_polls_per_s`,
//! `priority_p50_ms`, `priority_p99_ms`, `cycle_p99_ms`, so the last line of the output is the
//! last run's figures, for scripts that compare runs.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;
use tokio_util::sync::CancellationToken;

use card_polling::Application;
use card_polling::domain::asset::{AssetRef, AssetType, CardRow};
use card_polling::domain::{Account, Role, Shop};
use card_polling::priority::manual::{self, ManualRequest};
use card_polling::settings::{HintChannelSetting, Secret, Settings};
use card_polling::store::{EnqueueAction, ImportBatch};
use card_polling::upstream::SimCarrier;
use rakuten_types::{Clock, SystemClock, Timestamp};

struct Opts {
    cards: usize,
    secs: u64,
    rate: u64,
    latency_ms: u64,
    concurrency: Option<u64>,
    hints: Vec<&'static str>,
    redis: String,
    dir: std::path::PathBuf,
    backpressure: Option<u64>,
    backpressure_secs: Option<f64>,
    shard_batch: Option<i64>,
    backend: &'static str,
    pg: String,
    instances: usize,
}

/// `card-polling serve`'s settings as the binary would parse them with no flags.
#[derive(clap::Parser)]
struct Defaults {
    #[command(flatten)]
    settings: Settings,
}

fn production_settings(db: &std::path::Path) -> Settings {
    use clap::Parser;
    let db = db.display().to_string();
    Defaults::try_parse_from([
        "bench",
        "--db-path",
        db.as_str(),
        "--admin-token",
        "bench-admin-token-0123",
    ])
    .expect("the service's default settings parse")
    .settings
}

fn opts() -> Opts {
    let mut o = Opts {
        cards: 1_000_000,
        secs: 60,
        rate: 20,
        latency_ms: 20,
        concurrency: None,
        hints: vec!["memory", "redis"],
        redis: "redis://127.0.0.1:6379/".into(),
        dir: std::env::temp_dir(),
        backpressure: None,
        backpressure_secs: None,
        shard_batch: None,
        backend: "sqlite",
        pg: std::env::var("DATABASE_URL_TEST")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into()),
        instances: 1,
    };
    let args: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < args.len() {
        let val = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--cards" => o.cards = val.parse().expect("--cards N"),
            "--secs" => o.secs = val.parse().expect("--secs S"),
            "--rate" => o.rate = val.parse().expect("--rate R"),
            "--latency-ms" => o.latency_ms = val.parse().expect("--latency-ms L"),
            "--concurrency" => o.concurrency = Some(val.parse().expect("--concurrency C")),
            "--hints" => {
                o.hints = match val.as_str() {
                    "memory" => vec!["memory"],
                    "redis" => vec!["redis"],
                    "both" => vec!["memory", "redis"],
                    other => panic!("--hints memory|redis|both, not {other:?}"),
                }
            }
            "--redis" => o.redis = val,
            "--backpressure" => o.backpressure = Some(val.parse().expect("--backpressure N")),
            "--backpressure-secs" => {
                o.backpressure_secs = Some(val.parse().expect("--backpressure-secs S"))
            }
            "--shard-batch" => o.shard_batch = Some(val.parse().expect("--shard-batch N")),
            "--dir" => o.dir = val.into(),
            "--backend" => {
                o.backend = match val.as_str() {
                    "sqlite" => "sqlite",
                    "postgres" => "postgres",
                    other => panic!("--backend sqlite|postgres, not {other:?}"),
                }
            }
            "--pg" => o.pg = val,
            "--instances" => o.instances = val.parse().expect("--instances N"),
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    assert!(o.instances >= 1, "--instances N needs N >= 1");
    assert!(
        o.instances == 1 || o.backend == "postgres",
        "--instances above 1 needs --backend postgres (SQLite is one process's file)"
    );
    o
}

/// A fresh PostgreSQL schema for one bench run: (its name, the URL whose search path is it).
async fn pg_schema(base: &str) -> (String, String) {
    use sqlx::Connection;
    let name = format!("cpbench_{}", uuid::Uuid::now_v7().simple());
    let mut c = sqlx::PgConnection::connect(base)
        .await
        .expect("PostgreSQL (--pg URL)");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {name}")))
        .execute(&mut c)
        .await
        .expect("create schema");
    let sep = if base.contains('?') { '&' } else { '?' };
    (
        name.clone(),
        format!("{base}{sep}options=-c%20search_path%3D{name}"),
    )
}

async fn pg_drop_schema(base: &str, name: &str) {
    use sqlx::Connection;
    if let Ok(mut c) = sqlx::PgConnection::connect(base).await {
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA IF EXISTS {name} CASCADE"
        )))
        .execute(&mut c)
        .await;
    }
}

fn iccid(i: usize) -> String {
    format!("89{i:018}")
}

fn fsync_rate(dir: &std::path::Path) -> f64 {
    let path = dir.join("fsync-probe.bin");
    let mut f = std::fs::File::create(&path).expect("probe file");
    let n = 200;
    let t = Instant::now();
    for _ in 0..n {
        f.write_all(&[0u8; 4096]).expect("write");
        f.sync_data().expect("fsync");
    }
    let rate = n as f64 / t.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(path);
    rate
}

fn pct<T: Copy + Ord>(v: &mut [T], p: f64) -> Option<T> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    Some(v[((v.len() as f64 - 1.0) * p).round() as usize])
}

async fn import(app: &Application, cards: usize) {
    let store = app.state().store.clone();
    let now = SystemClock.now();
    let shops = (0..100)
        .map(|a| Shop {
            id: format!("ag{a}"),
            parent_id: None,
            name: String::new(),
        })
        .collect();
    store
        .domain_import(
            &ImportBatch {
                shops,
                ..ImportBatch::default()
            },
            now,
        )
        .await
        .expect("shops");
    let t = Instant::now();
    for chunk in (0..cards).collect::<Vec<_>>().chunks(100_000) {
        let cards = chunk
            .iter()
            .map(|&i| CardRow {
                iccid: iccid(i),
                shop_id: format!("ag{}", i % 100),
                polling_enabled: true,
                stop_locked: false,
            })
            .collect();
        store
            .domain_import(
                &ImportBatch {
                    cards,
                    ..ImportBatch::default()
                },
                now,
            )
            .await
            .expect("cards");
    }
    match app.postgres() {
        Some(pg) => sqlx::query("ANALYZE").execute(pg.pool()).await.map(|_| ()),
        None => sqlx::query("ANALYZE")
            .execute(app.sqlite().fixture_pool())
            .await
            .map(|_| ()),
    }
    .expect("analyze");
    println!(
        "setup: {cards} cards and {} schedule rows imported in {:.1?}",
        cards * 3,
        t.elapsed()
    );
}

async fn run(o: &Opts, db: &std::path::Path, pg_url: Option<&str>, backend: &str, first: bool) {
    let mut settings = production_settings(db);
    if let Some(url) = pg_url {
        settings.db_url = Some(Secret::new(url.to_owned()));
    }
    if let Some(v) = o.shard_batch {
        settings.shard_batch = v;
    }
    if let Some(v) = o.backpressure {
        settings.backpressure_depth = v;
    }
    if let Some(v) = o.concurrency {
        settings.executor_concurrency = v;
    }
    if let Some(v) = o.backpressure_secs {
        settings.backpressure_secs = v;
    }
    settings.sim_latency_ms = o.latency_ms;
    if first {
        println!(
            "settings: shards={} shard_batch={} backpressure_depth={} backpressure_secs={} drain_max={} executor_concurrency={}/type executor_tick_ms={}",
            settings.shards,
            settings.shard_batch,
            settings.backpressure_depth,
            settings.backpressure_secs,
            settings.drain_max,
            settings.executor_concurrency,
            settings.executor_tick_ms
        );
    }
    if backend == "redis" {
        settings.hint_channel = HintChannelSetting::Redis(Secret::new(o.redis.clone()));
        settings.hint_prefix = format!("card-polling-bench:{}:", uuid::Uuid::now_v7());
    }
    let sim = Arc::new(SimCarrier::new(settings.sim_config()));
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    // Instance 0 imports (the others then find the schedule synced); every instance runs its own
    // executor pool and scheduler cycle, as `card-polling serve` would.
    let mut apps = Vec::with_capacity(o.instances);
    for n in 0..o.instances {
        let mut s = settings.clone();
        s.instance_id = Some(format!("bench-{n}"));
        // Each instance listens on a port of its own (the bench makes no HTTP calls).
        s.port = 0;
        let app = Application::build(s, clock.clone(), sim.clone())
            .await
            .expect("build (is Redis running?)");
        if first && n == 0 {
            import(&app, o.cards).await;
        }
        apps.push(app);
    }
    let app = &apps[0];
    let hints = app.state().hints.clone();
    let store = app.state().store.clone();
    let types = settings.task_types.clone();
    let shutdown = CancellationToken::new();
    let cycles: Arc<Mutex<Vec<(u64, usize, usize)>>> = Arc::default();
    let phases: Arc<Mutex<Vec<card_polling::scheduler::cycle::CyclePhases>>> = Arc::default();
    let mut pools = Vec::new();
    let mut tasks = Vec::new();
    for app in &apps {
        let scheduler = app.scheduler().clone().flushed_by_pool();
        let pool = scheduler.pool().clone();
        pools.push(pool.clone());
        tasks.push(tokio::spawn(
            pool.clone().run(shutdown.clone(), scheduler.config().tick),
        ));
        let (s, stop, cycles, clock, phases) = (
            scheduler.clone(),
            shutdown.clone(),
            cycles.clone(),
            clock.clone(),
            phases.clone(),
        );
        tasks.push(tokio::spawn(async move {
            loop {
                let r = s.run_once(clock.now()).await;
                let skipped = r.ordinary_skipped_for_backpressure.values().sum();
                let taken = r.ordinary_taken.values().sum();
                cycles.lock().unwrap().push((r.duration_us, taken, skipped));
                phases.lock().unwrap().push(r.phases_us);
                let pause = if r.saturated(s.config().drain_max, s.config().recovery_limit as usize)
                {
                    s.config().tick / 4
                } else {
                    s.config().tick
                };
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(pause) => {}
                }
            }
        }));
    }
    let executed_now = |pools: &[Arc<card_polling::executor::pool::ExecutorPool>]| -> u64 {
        pools
            .iter()
            .flat_map(|p| p.depths())
            .map(|d| d.executed_ordinary)
            .sum()
    };
    // Warm-up: let ordinary polling reach its pace.
    tokio::time::sleep(Duration::from_secs(10)).await;
    cycles.lock().unwrap().clear();
    phases.lock().unwrap().clear();
    let executed_before = executed_now(&pools);
    let polls_before = sim.total_poll_calls();
    let writes_before = write_stats(app);
    let operator = Account {
        id: "bench".into(),
        role: Role::Platform,
        shop_id: None,
        perm_manual_trigger: true,
        perm_card_data: true,
    };
    let started = Instant::now();
    let mut ids = Vec::new();
    let gap = Duration::from_secs_f64(1.0 / o.rate.max(1) as f64);
    let mut next = Instant::now();
    while started.elapsed() < Duration::from_secs(o.secs) {
        let (card, tt) = {
            let mut rng = rand::rng();
            (
                iccid(rng.random_range(0..o.cards)),
                types.names()[rng.random_range(0..3)].clone(),
            )
        };
        let asset = AssetRef {
            asset_type: AssetType::Card,
            asset_id: card,
        };
        let tts = [tt];
        let req = ManualRequest {
            asset: &asset,
            task_types: &tts,
            reason: Some("bench"),
            event_id: None,
        };
        let items = manual::enqueue(store.as_ref(), &types, &operator, req, clock.now())
            .await
            .expect("enqueue");
        hints.push_items(&items).await;
        ids.extend(
            items
                .iter()
                .filter(|i| i.action == EnqueueAction::Created)
                .map(|i| i.item_id),
        );
        next += gap;
        tokio::time::sleep_until(next.into()).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let executed = executed_now(&pools) - executed_before;
    let polls = sim.total_poll_calls() - polls_before;
    let (c1, o1) = write_stats(app);
    let (commits, writes) = (c1 - writes_before.0, o1 - writes_before.1);
    // Let the last items run.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let depths: Vec<_> = pools.iter().flat_map(|p| p.depths()).collect();
    shutdown.cancel();
    for t in tasks {
        let _ = t.await;
    }

    let mut lat = Vec::new();
    let mut not_started = 0;
    for id in &ids {
        const LATENCY_ROW: &str =
            "SELECT enqueued_at, started_at FROM priority_items WHERE id = $1";
        let (enq, start): (String, Option<String>) = match app.postgres() {
            Some(pg) => {
                sqlx::query_as(LATENCY_ROW)
                    .bind(id)
                    .fetch_one(pg.pool())
                    .await
            }
            None => {
                sqlx::query_as(LATENCY_ROW)
                    .bind(id)
                    .fetch_one(app.sqlite().pool())
                    .await
            }
        }
        .expect("latency row");
        match start {
            Some(s) => {
                let e = Timestamp::parse(&enq).unwrap().as_millis();
                let s = Timestamp::parse(&s).unwrap().as_millis();
                lat.push(s - e);
            }
            None => not_started += 1,
        }
    }
    let mut cyc: Vec<u64> = cycles.lock().unwrap().iter().map(|c| c.0).collect();
    let ncycles = cyc.len();
    let skipped: usize = cycles.lock().unwrap().iter().map(|c| c.2).sum();
    let taken: usize = cycles.lock().unwrap().iter().map(|c| c.1).sum();
    let due_rate = o.cards as f64 * (1.0 / 300.0 + 1.0 / 600.0 + 1.0 / 1800.0);
    println!("--- {} x{}, hints {backend}", o.backend, o.instances);
    println!(
        "ordinary polling: {:.0} polls/s executed, {:.0} carrier calls/s (due rate at full pace {:.0}/s); {taken} ordinary entries taken in {ncycles} cycles; {skipped} shard batches skipped for back-pressure",
        executed as f64 / elapsed,
        polls as f64 / elapsed,
        due_rate
    );
    println!(
        "group-commit writer: {writes} writes in {commits} commits ({:.0} commits/s, {:.1} writes per commit)",
        commits as f64 / elapsed,
        writes as f64 / commits.max(1) as f64
    );
    println!(
        "cycle time: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        pct(&mut cyc, 0.5).unwrap_or(0) as f64 / 1000.0,
        pct(&mut cyc, 0.99).unwrap_or(0) as f64 / 1000.0,
        pct(&mut cyc, 1.0).unwrap_or(0) as f64 / 1000.0
    );
    {
        let ph = phases.lock().unwrap();
        let n = ph.len().max(1) as u64;
        let avg = |f: fn(&card_polling::scheduler::cycle::CyclePhases) -> u64| {
            ph.iter().map(f).sum::<u64>() as f64 / n as f64 / 1000.0
        };
        println!(
            "cycle phases (mean ms): flush {:.2}, hints {:.2}, manual {:.2}, recovery read {:.2}, ordinary batches {:.2}",
            avg(|p| p.flush),
            avg(|p| p.hints),
            avg(|p| p.manual),
            avg(|p| p.recovery),
            avg(|p| p.ordinary)
        );
    }
    println!(
        "hint-to-execution latency ({} priority items created, {} not started): p50 {} ms, p99 {} ms, max {} ms",
        ids.len(),
        not_started,
        pct(&mut lat, 0.5).unwrap_or(-1),
        pct(&mut lat, 0.99).unwrap_or(-1),
        pct(&mut lat, 1.0).unwrap_or(-1)
    );
    for d in depths {
        println!(
            "  {}: queued ordinary {} priority {} manual {} in flight {}",
            d.task_type, d.ordinary, d.priority, d.manual, d.in_flight
        );
    }
    println!(
        "{}",
        serde_json::json!({
            "cards": o.cards,
            "secs": o.secs,
            "backend": o.backend,
            "hints": backend,
            "instances": o.instances,
            "due_polls_per_s": (due_rate * 10.0).round() / 10.0,
            "executed_polls_per_s": (executed as f64 / elapsed * 10.0).round() / 10.0,
            "priority_p50_ms": pct(&mut lat, 0.5),
            "priority_p99_ms": pct(&mut lat, 0.99),
            "cycle_p99_ms": pct(&mut cyc, 0.99).map(|us| us as f64 / 1000.0),
        })
    );
    // The next run opens the same file: this one's writer commits and closes first.
    app.state().store.shutdown().await;
}

#[tokio::main]
async fn main() {
    let o = opts();
    let dir = tempfile::tempdir_in(&o.dir).expect("bench dir");
    println!(
        "card-polling scheduler bench: cards={} secs={} rate={}/s latency={} ms hints={:?} dir={}",
        o.cards,
        o.secs,
        o.rate,
        o.latency_ms,
        o.hints,
        dir.path().display()
    );
    println!(
        "fsync rate: {:.0}/s (4 KiB write + fdatasync)",
        fsync_rate(dir.path())
    );
    let db = dir.path().join("bench.db");
    let pg = match o.backend {
        "postgres" => Some(pg_schema(&o.pg).await),
        _ => None,
    };
    println!("backend: {} with {} instance(s)", o.backend, o.instances);
    for (i, hints) in o.hints.iter().enumerate() {
        run(&o, &db, pg.as_ref().map(|p| p.1.as_str()), hints, i == 0).await;
    }
    if let Some((name, _)) = pg {
        pg_drop_schema(&o.pg, &name).await;
    }
}

/// `(commits, writes)` of the store's writer: SQLite's group commit; `(0, 0)` on PostgreSQL, where
/// each write is its own commit.
fn write_stats(app: &Application) -> (u64, u64) {
    match app.postgres() {
        Some(pg) => pg.write_stats(),
        None => app.sqlite().write_stats(),
    }
}
