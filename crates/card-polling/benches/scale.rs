//! Scale benchmark of the priority queue's storage paths.
//!
//! Run (full scale):
//! `cargo bench -p card-polling --bench scale -- --cards 1000000 --active 100000`
//! Options: `--cards N` (default 1,000,000), `--active M` (default 100,000), `--ops K` (operations
//! per throughput measurement, default 2,000), `--queries Q` (list queries, default 1,000),
//! `--dir PATH` (where the database lives; default the system temp dir), `--grown-mib N` (before
//! measuring, grow the database file past N MiB with a table that is then dropped, its pages left
//! free for reuse, as a deployment's file grows with its interaction logs; default 0, the file as
//! the fixtures leave it).
//!
//! Setup: 100 agents with 9 sub-shops each; cards spread evenly, so agent `ag0`'s tree holds
//! cards/100 cards (10,000 at full scale); `M` active items (one per card and task type over
//! M/3 cards spread across all agents) written directly as fixtures. Then it measures:
//! triggers merged per second (sequential and 8 concurrent callers), claims per second
//! (sequential and 8 concurrent), p50/p99 of a scoped list query for `ag0`, and the expiry job's
//! run time over every active item. It also measures the disk's fsync rate in the same directory,
//! because every committed transaction here waits for one (WAL, `fdatasync` of the WAL before each answer).

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use card_polling::domain::asset::{AssetRef, AssetType, CardRow};
use card_polling::domain::{Scope, Shop};
use card_polling::jobs::expiry::ExpiryJob;
use card_polling::priority::{CLAIM_LEASE, TriggerType};
use card_polling::store::sqlite::SqliteStore;
use card_polling::store::{Demand, ImportBatch, ItemFilter, Store};
use rakuten_types::{ManualClock, Timestamp};

const TASK_TYPES: [&str; 3] = ["card_status", "data_usage", "package"];
const AGENTS: usize = 100;
const SUBSHOPS: usize = 9;

struct Opts {
    cards: usize,
    active: usize,
    ops: usize,
    queries: usize,
    dir: std::path::PathBuf,
    grown_mib: usize,
}

fn opts() -> Opts {
    let mut o = Opts {
        cards: 1_000_000,
        active: 100_000,
        ops: 2_000,
        queries: 1_000,
        dir: std::env::temp_dir(),
        grown_mib: 0,
    };
    let args: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < args.len() {
        let val = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--cards" => o.cards = val.parse().expect("--cards N"),
            "--active" => o.active = val.parse().expect("--active M"),
            "--ops" => o.ops = val.parse().expect("--ops K"),
            "--queries" => o.queries = val.parse().expect("--queries Q"),
            "--dir" => o.dir = val.into(),
            "--grown-mib" => o.grown_mib = val.parse().expect("--grown-mib N"),
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    o
}

fn iccid(i: usize) -> String {
    format!("89{i:018}")
}

fn shop_of(i: usize) -> String {
    format!("ag{}-s{}", i % AGENTS, (i / AGENTS) % SUBSHOPS)
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

/// What the writer did between two snapshots: writes, commits, and its thread's CPU time.
#[derive(Clone, Copy)]
struct WriterMark {
    commits: u64,
    writes: u64,
    cpu_ns: u64,
}

fn writer_mark(sqlite: &SqliteStore) -> WriterMark {
    let (commits, writes) = sqlite.write_stats();
    WriterMark {
        commits,
        writes,
        cpu_ns: writer_cpu_ns(),
    }
}

/// CPU time of the thread named `sqlite-writer`, in nanoseconds (the first field of Linux's
/// `/proc/self/task/<tid>/schedstat`; 0 where that is not readable). Per write, it leaves out the
/// fsync latency that moves the rate from run to run (the kernel's share of it still varies).
fn writer_cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() == "sqlite-writer" {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
            return stat
                .split_whitespace()
                .next()
                .and_then(|ns| ns.parse().ok())
                .unwrap_or(0);
        }
    }
    0
}

/// Writes per commit and the writer's CPU per write between two marks.
fn per_commit(a: WriterMark, b: WriterMark) -> String {
    let (c, o) = (b.commits - a.commits, b.writes - a.writes);
    format!(
        "{o} writes in {c} commits, {:.1} per commit; writer CPU {:.0} µs per write",
        o as f64 / c.max(1) as f64,
        (b.cpu_ns - a.cpu_ns) as f64 / 1000.0 / o.max(1) as f64
    )
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

#[tokio::main]
async fn main() {
    let o = opts();
    let dir = tempfile::tempdir_in(&o.dir).expect("bench dir");
    println!(
        "card-polling scale bench: cards={} active={} ops={} queries={} grown_mib={} dir={}",
        o.cards,
        o.active,
        o.ops,
        o.queries,
        o.grown_mib,
        dir.path().display()
    );
    println!(
        "fsync rate: {:.0}/s (4 KiB write + fdatasync)",
        fsync_rate(dir.path())
    );
    let clock = ManualClock::at_fixed_date();
    let now = rakuten_types::Clock::now(&clock);
    let sqlite = SqliteStore::open(&dir.path().join("bench.db"))
        .await
        .expect("open");
    let store: Arc<dyn Store> = Arc::new(sqlite.clone());
    store.meta_feature_enabled_at(now).await.expect("meta");

    // ---- setup: shops, cards (through the import path), active items (fixtures)
    let t = Instant::now();
    let mut shops = Vec::new();
    for a in 0..AGENTS {
        shops.push(Shop {
            id: format!("ag{a}"),
            parent_id: None,
            name: String::new(),
        });
        for s in 0..SUBSHOPS {
            shops.push(Shop {
                id: format!("ag{a}-s{s}"),
                parent_id: Some(format!("ag{a}")),
                name: String::new(),
            });
        }
    }
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
    for chunk in (0..o.cards).collect::<Vec<_>>().chunks(100_000) {
        let cards = chunk
            .iter()
            .map(|&i| CardRow {
                iccid: iccid(i),
                shop_id: shop_of(i),
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
    println!(
        "setup: {} cards imported in {:.1?} (bulk import: parts of 10,000 cards, one writer \
         operation each)",
        o.cards,
        t.elapsed()
    );

    let t = Instant::now();
    let item_cards = o.active.div_ceil(3);
    let step = (o.cards / item_cards).max(1);
    let enq = now.minus(Duration::from_secs(3600)).to_rfc3339();
    let mut tx = sqlite.fixture_pool().begin().await.expect("tx");
    let mut created = 0;
    'outer: for c in 0..item_cards {
        let i = c * step;
        for tt in TASK_TYPES {
            if created == o.active {
                break 'outer;
            }
            sqlx::query(
                "INSERT INTO priority_items (iccid, task_type, asset_type, asset_id, shop_id, status, trigger_type, \
                   last_trigger_type, trigger_count, enqueued_at, last_triggered_at, attempts, max_attempts, next_run_at) \
                 VALUES (?1, ?2, 'card', ?1, ?3, 'pending', 'purchase_activated', 'purchase_activated', 1, ?4, ?4, 0, 3, ?4)",
            )
            .bind(iccid(i))
            .bind(tt)
            .bind(shop_of(i))
            .bind(&enq)
            .execute(&mut *tx)
            .await
            .expect("item");
            created += 1;
        }
    }
    tx.commit().await.expect("commit");
    if o.grown_mib > 0 {
        // SQLite below 1 GiB pays a whole-page-cache scan at many commits (D-bench-grown-database): a
        // deployment's file passes 1 GiB within its first hour of logs, the fixtures' does not.
        let pool = sqlite.fixture_pool();
        sqlx::query("CREATE TABLE bench_growth (x BLOB)")
            .execute(pool)
            .await
            .expect("growth table");
        sqlx::query(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1) \
             INSERT INTO bench_growth SELECT zeroblob(1048576) FROM n",
        )
        .bind(o.grown_mib as i64)
        .execute(pool)
        .await
        .expect("growth rows");
        sqlx::query("DROP TABLE bench_growth")
            .execute(pool)
            .await
            .expect("growth drop");
        let pages: i64 = sqlx::query_scalar("PRAGMA page_count")
            .fetch_one(pool)
            .await
            .expect("page count");
        println!("setup: database grown to {pages} pages (its growth table dropped)");
    }
    sqlx::query("ANALYZE")
        .execute(sqlite.fixture_pool())
        .await
        .expect("analyze");
    println!(
        "setup: {created} active items written in {:.1?}",
        t.elapsed()
    );
    let agent_cards: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM cards WHERE shop_id IN (SELECT descendant_id FROM shop_closure WHERE ancestor_id = 'ag0')",
    )
    .fetch_one(sqlite.pool())
    .await
    .expect("count");
    let agent_items: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM priority_items WHERE shop_id IN (SELECT descendant_id FROM shop_closure WHERE ancestor_id = 'ag0')",
    )
    .fetch_one(sqlite.pool())
    .await
    .expect("count");
    println!("agent ag0: {agent_cards} cards, {agent_items} items in scope");

    let demand = |n: usize, tt: &str| Demand {
        trigger_type: TriggerType::ManualTrigger,
        source: "manual:bench".into(),
        event_id: format!("bench-{n}"),
        operator: Some("bench".into()),
        reason: Some("bench".into()),
        task_types: vec![tt.to_owned()],
    };
    let card_with_item = |n: usize| iccid(((n * 7919) % item_cards) * step);

    // ---- triggers merged per second
    let t = Instant::now();
    for n in 0..o.ops {
        let asset = AssetRef {
            asset_type: AssetType::Card,
            asset_id: card_with_item(n),
        };
        let out = store
            .item_enqueue_manual(&Scope::All, &asset, &demand(n, "card_status"), now)
            .await
            .expect("merge");
        assert_eq!(out.len(), 1);
    }
    let e = t.elapsed();
    println!(
        "merge, 1 caller: {} triggers in {:.2?} = {:.0}/s",
        o.ops,
        e,
        o.ops as f64 / e.as_secs_f64()
    );
    let w0 = writer_mark(&sqlite);
    let t = Instant::now();
    let mut hs = Vec::new();
    for w in 0..8 {
        let store = store.clone();
        let ops = o.ops;
        let cards: Vec<String> = (0..ops / 8)
            .map(|k| card_with_item(o.ops + w * ops + k))
            .collect();
        hs.push(tokio::spawn(async move {
            for (k, c) in cards.into_iter().enumerate() {
                let asset = AssetRef {
                    asset_type: AssetType::Card,
                    asset_id: c,
                };
                let d = Demand {
                    trigger_type: TriggerType::ManualTrigger,
                    source: format!("manual:bench{w}"),
                    event_id: format!("bench-w{w}-{k}"),
                    operator: Some("bench".into()),
                    reason: Some("bench".into()),
                    task_types: vec!["data_usage".into()],
                };
                store
                    .item_enqueue_manual(&Scope::All, &asset, &d, now)
                    .await
                    .expect("merge");
            }
        }));
    }
    for h in hs {
        h.await.expect("join");
    }
    let e = t.elapsed();
    let n = (o.ops / 8) * 8;
    println!(
        "merge, 8 callers: {n} triggers in {:.2?} = {:.0}/s ({})",
        e,
        n as f64 / e.as_secs_f64(),
        per_commit(w0, writer_mark(&sqlite))
    );

    // ---- claims per second
    let due = store.item_due(now, (o.ops * 2) as i64).await.expect("due");
    let (first, second) = due.split_at(due.len() / 2);
    let t = Instant::now();
    for (k, id) in first.iter().enumerate() {
        let c = store
            .item_claim(*id, &format!("tok-{k}"), now, CLAIM_LEASE)
            .await
            .expect("claim");
        assert!(c.is_some());
    }
    let e = t.elapsed();
    println!(
        "claim, 1 claimer: {} claims in {:.2?} = {:.0}/s",
        first.len(),
        e,
        first.len() as f64 / e.as_secs_f64()
    );
    let w0 = writer_mark(&sqlite);
    let t = Instant::now();
    let mut hs = Vec::new();
    for w in 0..8 {
        let store = store.clone();
        let ids: Vec<i64> = second.iter().skip(w).step_by(8).copied().collect();
        hs.push(tokio::spawn(async move {
            for id in ids {
                store
                    .item_claim(id, &format!("w{w}-{id}"), now, CLAIM_LEASE)
                    .await
                    .expect("claim");
            }
        }));
    }
    for h in hs {
        h.await.expect("join");
    }
    let e = t.elapsed();
    println!(
        "claim, 8 claimers: {} claims in {:.2?} = {:.0}/s ({})",
        second.len(),
        e,
        second.len() as f64 / e.as_secs_f64(),
        per_commit(w0, writer_mark(&sqlite))
    );

    // ---- p99 of a scoped list query
    let scope = Scope::ShopTree("ag0".into());
    for (label, filter) in [
        (
            "default page (limit 50)",
            ItemFilter {
                limit: 50,
                ..ItemFilter::default()
            },
        ),
        (
            "status=pending, task_type=package",
            ItemFilter {
                limit: 50,
                status: Some(card_polling::priority::ItemStatus::Pending),
                task_type: Some("package".into()),
                ..ItemFilter::default()
            },
        ),
    ] {
        let mut lat = Vec::with_capacity(o.queries);
        for _ in 0..o.queries {
            let t = Instant::now();
            let page = store.item_list(&scope, &filter).await.expect("list");
            lat.push(t.elapsed());
            assert!(!page.is_empty());
        }
        lat.sort();
        println!(
            "scoped list ag0 [{label}]: {} queries, p50 {:.2?}, p99 {:.2?}, max {:.2?}",
            o.queries,
            pct(&lat, 0.5),
            pct(&lat, 0.99),
            lat[lat.len() - 1]
        );
    }

    // ---- expiry job
    let later = now.plus(Duration::from_secs(25 * 3600));
    let clock2 = ManualClock::new(later);
    let job = ExpiryJob::new(store.clone(), Arc::new(clock2), Duration::from_secs(60));
    let t = Instant::now();
    let expired = job.run_once(later).await.expect("expiry");
    println!("expiry job: {expired} items expired in {:.2?}", t.elapsed());
    let _: Timestamp = later;
}
