//! Retention benchmark: simulated days at 100,000 cards on the real SQLite
//! store and the real retention job, on the injected (manual) clock, to show that the history
//! tables level off.
//!
//! Run: `cargo bench -p card-polling --bench retention -- --days 10`
//! and, to see the 90-day tables level off within the span, `… -- --days 10 --history-days 3`.
//! Options: `--cards N` (100,000), `--days D` (10), `--sample S` (1 in S ordinary polls written,
//! default 1,000), `--polls-per-s P` (the spec's pace: 5,556/s per 1,000,000 cards, so N × 0.005556),
//! `--priority-per-day K` (priority items enqueued, executed and completed per day, 2,400),
//! `--retrigger-every R` (1 in R of them fails instead and is retriggered an hour later, the
//! retrigger completing; 100, 0 for none),
//! `--manual-per-day M` (ordinary manual triggers per day, 480), `--log-days L` (7),
//! `--history-days H` (90), `--batch B` (1,000), `--pause-ms MS` (0: the pause between batches is
//! wall time between two write transactions, it never changes what one batch holds),
//! `--dir PATH` (where the database lives; default the system temp dir).
//!
//! Per simulated hour it writes, with timestamps spread across the hour, through the store's own
//! write paths: ordinary polls (`poll_record`: one interaction log each, the schedule row moved),
//! priority items (`item_enqueue_manual` → `item_claim` → `item_begin_attempt` → `item_finish`
//! with one log: audit facts, a trigger event, a log) and ordinary manual triggers
//! (`manual_trigger_request` → `poll_record` serving it); 1 in R priority items fails and is
//! retriggered (`item_retrigger`) in the next hour, so the retention rule that keeps a retrigger's
//! predecessor while the retrigger exists (D-retrigger-predecessor-kept) is part of the load. Ordinary polls are
//! sampled: 1 in S is
//! written, so the interaction-log counts are 1/S of full scale (printed). Then it sets the clock
//! to the end of the hour and runs the retention job once, as production does every hour.
//!
//! Per simulated day it prints row counts per table (`priority_items` and `item_sources` level off
//! once `--history-days` have passed, D-retention-batches), the database size (page_count × page_size,
//! free pages, the WAL file), rows pruned that day and the longest wall time one prune batch took
//! (its whole write transaction, commit included: how long it held the writer). The last line is
//! one JSON object with every day's figures.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use card_polling::domain::asset::{AssetRef, AssetType, CardRow};
use card_polling::domain::{Scope, Shop};
use card_polling::jobs::retention::{Retention, RetentionJob};
use card_polling::priority::{CLAIM_LEASE, TriggerType};
use card_polling::store::sqlite::SqliteStore;
use card_polling::store::{
    ClaimedItem, Demand, Finish, ImportBatch, ManualTriggerOutcome, ManualTriggerRequest, NewLog,
    PollRecord, Store,
};
use card_polling::telemetry::PollMetrics;
use rakuten_types::{Clock, ManualClock, Timestamp};
use serde_json::json;

const TASK_TYPES: [&str; 3] = ["card_status", "data_usage", "package"];
const HOUR: Duration = Duration::from_secs(3600);
const DAY_SECS: u64 = 24 * 3600;

struct Opts {
    cards: usize,
    days: u64,
    sample: u64,
    polls_per_s: f64,
    priority_per_day: f64,
    retrigger_every: usize,
    manual_per_day: f64,
    log_days: u64,
    history_days: u64,
    batch: i64,
    pause_ms: u64,
    dir: std::path::PathBuf,
}

fn opts() -> Opts {
    let mut o = Opts {
        cards: 100_000,
        days: 10,
        sample: 1000,
        polls_per_s: f64::NAN,
        priority_per_day: 2_400.0,
        retrigger_every: 100,
        manual_per_day: 480.0,
        log_days: 7,
        history_days: 90,
        batch: 1_000,
        pause_ms: 0,
        dir: std::env::temp_dir(),
    };
    let args: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < args.len() {
        let val = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--cards" => o.cards = val.parse().expect("--cards N"),
            "--days" => o.days = val.parse().expect("--days D"),
            "--sample" => o.sample = val.parse().expect("--sample S"),
            "--polls-per-s" => o.polls_per_s = val.parse().expect("--polls-per-s P"),
            "--priority-per-day" => o.priority_per_day = val.parse().expect("--priority-per-day"),
            "--retrigger-every" => o.retrigger_every = val.parse().expect("--retrigger-every R"),
            "--manual-per-day" => o.manual_per_day = val.parse().expect("--manual-per-day"),
            "--log-days" => o.log_days = val.parse().expect("--log-days L"),
            "--history-days" => o.history_days = val.parse().expect("--history-days H"),
            "--batch" => o.batch = val.parse().expect("--batch B"),
            "--pause-ms" => o.pause_ms = val.parse().expect("--pause-ms MS"),
            "--dir" => o.dir = val.into(),
            // cargo bench passes `--bench`; anything unknown is skipped.
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    if o.polls_per_s.is_nan() {
        // The spec's pace: 1,000,000 cards are due 5,556 polls/s.
        o.polls_per_s = o.cards as f64 * 5_556.0 / 1_000_000.0;
    }
    assert!(o.sample >= 1, "--sample must be at least 1");
    o
}

fn iccid(i: usize) -> String {
    format!("89{i:018}")
}

fn log(op: &str) -> NewLog {
    NewLog {
        operation: op.into(),
        request_summary: "poll card_status".into(),
        response_summary: "status=active usage_mb=1234".into(),
        latency_ms: 20,
        outcome: "ok".into(),
    }
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

const TABLES: [(&str, &str); 6] = [
    ("interaction_logs", "integration_logs"),
    ("audit_facts", "priority_item_events"),
    ("trigger_events", "priority_trigger_events"),
    ("manual_triggers", "manual_triggers"),
    ("priority_items", "priority_items"),
    ("item_sources", "priority_item_sources"),
];

async fn scalar(pool: &sqlx::SqlitePool, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(pool)
        .await
        .expect(sql)
}

/// Runs a claimed item's attempt at `run` and finishes it 20 ms later with one log: failed for
/// good when `fail`, else completed.
async fn run_item(store: &dyn Store, claim: ClaimedItem, fail: bool, run: Timestamp) {
    let claim = store.item_begin_attempt(&claim, run).await.expect("begin");
    let finish = if fail {
        Finish::Failed {
            reason: "bench: business check".into(),
            result: "failed".into(),
            after_call: true,
        }
    } else {
        Finish::Completed {
            result: "ok".into(),
        }
    };
    store
        .item_finish(
            &claim,
            &finish,
            &[log("poll")],
            run.plus(Duration::from_millis(20)),
        )
        .await
        .expect("finish");
}

/// Spreads `n` instants evenly across the hour starting at `start`.
fn spread(start: Timestamp, k: u64, n: u64) -> Timestamp {
    start.plus(Duration::from_millis(k * 3_600_000 / n.max(1)))
}

#[tokio::main]
async fn main() {
    let o = opts();
    let wall = Instant::now();
    let dir = tempfile::tempdir_in(&o.dir).expect("bench dir");
    let db_path = dir.path().join("retention.db");
    let per_hour_polls = o.polls_per_s * 3600.0;
    let written_per_hour = (per_hour_polls / o.sample as f64).round() as u64;
    println!(
        "card-polling retention bench: cards={} days={} ordinary polls {:.1}/s = {:.0}/h, sampled 1 in {} = {} written/h (interaction-log counts below are 1/{} of full scale); priority items {}/day (1 in {} failed and retriggered), manual triggers {}/day (full rate); retention logs {} d, history {} d, batch {}, pause {} ms; dir={}",
        o.cards,
        o.days,
        o.polls_per_s,
        per_hour_polls,
        o.sample,
        written_per_hour,
        o.sample,
        o.priority_per_day,
        o.retrigger_every,
        o.manual_per_day,
        o.log_days,
        o.history_days,
        o.batch,
        o.pause_ms,
        dir.path().display()
    );
    println!(
        "fsync rate: {:.0}/s (4 KiB write + fdatasync)",
        fsync_rate(dir.path())
    );

    let clock = Arc::new(ManualClock::at_fixed_date());
    let t0 = clock.now();
    let sqlite = SqliteStore::open(&db_path).await.expect("open");
    let pool = sqlite.pool().clone();
    let store: Arc<dyn Store> = Arc::new(sqlite);
    store.meta_feature_enabled_at(t0).await.expect("meta");
    let metrics = Arc::new(PollMetrics::new());
    let job = RetentionJob::new(
        store.clone(),
        clock.clone(),
        metrics,
        Retention {
            logs: Duration::from_secs(o.log_days * DAY_SECS),
            // The opt-in deletion of priority facts (`RAKUTEN_POLL_RETENTION_HISTORY_DAYS`): what
            // this benchmark measures; by default the job keeps them.
            history: Some(Duration::from_secs(o.history_days * DAY_SECS)),
            manual_triggers: Duration::from_secs(o.history_days * DAY_SECS),
            batch: o.batch,
            pause: Duration::from_millis(o.pause_ms),
            every: HOUR,
        },
    );

    // ---- setup: one shop, the cards through the import path (schedule rows included)
    let t = Instant::now();
    store
        .domain_import(
            &ImportBatch {
                shops: vec![Shop {
                    id: "s0".into(),
                    parent_id: None,
                    name: String::new(),
                }],
                ..ImportBatch::default()
            },
            t0,
        )
        .await
        .expect("shop");
    for chunk in (0..o.cards).collect::<Vec<_>>().chunks(100_000) {
        let cards = chunk
            .iter()
            .map(|&i| CardRow {
                iccid: iccid(i),
                shop_id: "s0".into(),
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
                t0,
            )
            .await
            .expect("cards");
    }
    println!("setup: {} cards imported in {:.1?}", o.cards, t.elapsed());
    println!(
        "day | {:>16} {:>11} {:>14} {:>15} {:>14} {:>12} | {:>9} {:>10} {:>8} | {:>9} {:>12} | wall",
        "interaction_logs",
        "audit_facts",
        "trigger_events",
        "manual_triggers",
        "priority_items",
        "item_sources",
        "db_MiB",
        "free_pages",
        "wal_MiB",
        "pruned",
        "max_batch_ms"
    );

    let mut poll_no: usize = 0;
    let mut prio_no: usize = 0;
    let mut manual_no: usize = 0;
    let mut prio_due = 0.0f64;
    let mut manual_due = 0.0f64;
    // Items failed in the previous hour, retriggered in this one.
    let mut to_retrigger: Vec<i64> = Vec::new();
    let mut days_out = Vec::new();
    let mut worst_batch = Duration::ZERO;
    let mut runs_ms: Vec<f64> = Vec::new();
    for day in 1..=o.days {
        let mut pruned = [0u64; 5];
        let mut max_batch = Duration::ZERO;
        let mut batches = 0u64;
        for h in 0..24u64 {
            let start = t0.plus(Duration::from_secs((day - 1) * DAY_SECS + h * 3600));
            // Ordinary polls, 500 records per write transaction (as the executor's recorder
            // batches them), one interaction log each.
            let mut batch = Vec::with_capacity(500);
            for k in 0..written_per_hour {
                let at = spread(start, k, written_per_hour);
                let c = poll_no % o.cards;
                let tt = TASK_TYPES[(poll_no / o.cards) % TASK_TYPES.len()];
                poll_no += 1;
                batch.push(PollRecord {
                    iccid: iccid(c),
                    task_type: tt.into(),
                    manual_trigger_id: None,
                    result: "ok".into(),
                    logs: vec![log("poll")],
                    at,
                    next_poll_at: at.plus(HOUR),
                });
                if batch.len() == 500 {
                    store.poll_record(&batch).await.expect("poll_record");
                    batch.clear();
                }
            }
            if !batch.is_empty() {
                store.poll_record(&batch).await.expect("poll_record");
            }
            // Priority items: enqueued, claimed, executed and completed within seconds.
            prio_due += o.priority_per_day / 24.0;
            let n = prio_due.floor() as u64;
            prio_due -= n as f64;
            for k in 0..n {
                let at = spread(start, k, n);
                let c = (prio_no * 7919) % o.cards;
                let tt = TASK_TYPES[prio_no % TASK_TYPES.len()];
                prio_no += 1;
                let asset = AssetRef {
                    asset_type: AssetType::Card,
                    asset_id: iccid(c),
                };
                let d = Demand {
                    trigger_type: TriggerType::ManualTrigger,
                    source: "manual:bench".into(),
                    event_id: format!("ev-{prio_no}"),
                    operator: Some("bench".into()),
                    reason: Some("bench".into()),
                    task_types: vec![tt.into()],
                };
                let out = store
                    .item_enqueue_manual(&Scope::All, &asset, &d, at)
                    .await
                    .expect("enqueue");
                let id = out[0].item_id;
                let run = at.plus(Duration::from_secs(1));
                let claim = store
                    .item_claim(id, &format!("tok-{prio_no}"), run, CLAIM_LEASE)
                    .await
                    .expect("claim")
                    .expect("claimable");
                let fails = o.retrigger_every > 0 && prio_no.is_multiple_of(o.retrigger_every);
                run_item(&*store, claim, fails, run).await;
                if fails {
                    to_retrigger.push(id);
                }
            }
            // Last hour's failed items, retriggered by an operator; each retrigger completes.
            for (k, id) in std::mem::take(&mut to_retrigger).into_iter().enumerate() {
                let at = spread(start, k as u64, 60);
                let out = store
                    .item_retrigger(&Scope::All, id, "bench", "bench", at)
                    .await
                    .expect("retrigger");
                let run = at.plus(Duration::from_secs(1));
                let claim = store
                    .item_claim(out.item_id, &format!("tok-r{id}"), run, CLAIM_LEASE)
                    .await
                    .expect("claim")
                    .expect("claimable");
                run_item(&*store, claim, false, run).await;
            }
            // Ordinary manual triggers: requested, then served by an ordinary poll.
            manual_due += o.manual_per_day / 24.0;
            let n = manual_due.floor() as u64;
            manual_due -= n as f64;
            for k in 0..n {
                let at = spread(start, k, n);
                let c = (manual_no * 104_729 + 13) % o.cards;
                let tt = TASK_TYPES[manual_no % TASK_TYPES.len()];
                manual_no += 1;
                let out = store
                    .manual_trigger_request(
                        &Scope::All,
                        &ManualTriggerRequest {
                            operator: format!("op{}", manual_no % 10),
                            iccid: iccid(c),
                            task_types: vec![tt.into()],
                            daily_quota: 1_000_000,
                        },
                        at,
                    )
                    .await
                    .expect("manual trigger");
                let ManualTriggerOutcome::Queued { triggers } = out else {
                    panic!("manual trigger refused: {out:?}");
                };
                let done = at.plus(Duration::from_secs(2));
                store
                    .poll_record(&[PollRecord {
                        iccid: iccid(c),
                        task_type: tt.into(),
                        manual_trigger_id: Some(triggers[0].id),
                        result: "ok".into(),
                        logs: vec![log("poll")],
                        at: done,
                        next_poll_at: done.plus(HOUR),
                    }])
                    .await
                    .expect("manual poll");
            }
            // The hour ends: the retention job's hourly run.
            let end = start.plus(HOUR);
            clock.set(end);
            let run = Instant::now();
            let report = job
                .run_once_observed(end, |_, _, took| {
                    batches += 1;
                    max_batch = max_batch.max(took);
                })
                .await
                .expect("retention");
            runs_ms.push(run.elapsed().as_secs_f64() * 1e3);
            for (slot, n) in pruned.iter_mut().zip([
                report.interaction_logs,
                report.audit_facts,
                report.trigger_events,
                report.manual_triggers,
                report.priority_items,
            ]) {
                *slot += n;
            }
        }
        worst_batch = worst_batch.max(max_batch);
        let mut counts = Vec::new();
        for (_, table) in TABLES {
            counts.push(scalar(&pool, &format!("SELECT count(*) FROM {table}")).await);
        }
        let page_count = scalar(&pool, "PRAGMA page_count").await;
        let page_size = scalar(&pool, "PRAGMA page_size").await;
        let free = scalar(&pool, "PRAGMA freelist_count").await;
        let file = std::fs::metadata(&db_path).map(|m| m.len()).unwrap_or(0);
        let wal = std::fs::metadata(dir.path().join("retention.db-wal"))
            .map(|m| m.len())
            .unwrap_or(0);
        let db_bytes = page_count * page_size;
        let mib = |b: i64| b as f64 / (1024.0 * 1024.0);
        println!(
            "{day:>3} | {:>16} {:>11} {:>14} {:>15} {:>14} {:>12} | {:>9.1} {:>10} {:>8.1} | {:>9} {:>12.1} | {:.0?}",
            counts[0],
            counts[1],
            counts[2],
            counts[3],
            counts[4],
            counts[5],
            mib(db_bytes),
            free,
            mib(wal as i64),
            pruned.iter().sum::<u64>(),
            max_batch.as_secs_f64() * 1e3,
            wall.elapsed()
        );
        let mut entry = serde_json::Map::new();
        entry.insert("day".into(), json!(day));
        for ((name, _), n) in TABLES.iter().zip(&counts) {
            entry.insert((*name).into(), json!(n));
        }
        entry.insert("db_bytes".into(), json!(db_bytes));
        entry.insert("file_bytes".into(), json!(file));
        entry.insert("wal_bytes".into(), json!(wal));
        entry.insert("free_pages".into(), json!(free));
        entry.insert(
            "pruned".into(),
            json!({
                "interaction_logs": pruned[0],
                "audit_facts": pruned[1],
                "trigger_events": pruned[2],
                "manual_triggers": pruned[3],
                "priority_items": pruned[4],
            }),
        );
        entry.insert("prune_batches".into(), json!(batches));
        entry.insert(
            "max_batch_ms".into(),
            json!((max_batch.as_secs_f64() * 1e4).round() / 10.0),
        );
        days_out.push(serde_json::Value::Object(entry));
    }
    runs_ms.sort_by(f64::total_cmp);
    let p = |q: f64| runs_ms[((runs_ms.len() - 1) as f64 * q).round() as usize];
    println!(
        "retention runs: {} (one per simulated hour), run wall time p50 {:.1} ms, max {:.1} ms; longest single batch {:.1} ms; total wall {:.1?}",
        runs_ms.len(),
        p(0.5),
        p(1.0),
        worst_batch.as_secs_f64() * 1e3,
        wall.elapsed()
    );
    println!(
        "{}",
        json!({
            "bench": "retention",
            "cards": o.cards,
            "days": o.days,
            "sample": o.sample,
            "polls_per_s": o.polls_per_s,
            "priority_per_day": o.priority_per_day,
            "retrigger_every": o.retrigger_every,
            "manual_per_day": o.manual_per_day,
            "log_days": o.log_days,
            "history_days": o.history_days,
            "batch": o.batch,
            "max_batch_ms": (worst_batch.as_secs_f64() * 1e4).round() / 10.0,
            "per_day": days_out,
        })
    );
}
