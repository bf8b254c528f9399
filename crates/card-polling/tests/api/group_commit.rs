//! The SQLite group-commit writer under card-polling's store (D-sqlite-writer-group-commit): writes
//! waiting together share one commit, each is answered only once that commit is on disk, one
//! failing write rolls back only itself, acknowledged claims and outcomes survive `kill -9`, and a
//! stopped store answers every later call with `Closed` (503), never a hang.
//!
//! To hold a batch open on purpose, a test takes the database's write lock from a second
//! connection: the writer then waits in `BEGIN IMMEDIATE` (busy timeout) while the writes behind
//! it queue, and everything queued lands in the next batch once the lock is released.

use card_polling::store::{
    AssetStore, ClaimStore, ImportStore, ItemStore, ScheduleStore, ServiceStore,
};
use std::collections::BTreeSet;
use std::future::Future;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use card_polling::domain::asset::{AssetRef, AssetType, CardRow};
use card_polling::domain::{Scope, Shop};
use card_polling::priority::{CLAIM_LEASE, TriggerType};
use card_polling::store::sqlite::SqliteStore;
use card_polling::store::{Demand, Finish, ImportBatch, ImportExisting, StoreError};
use rakuten_types::{Clock, ManualClock, Timestamp};
use sqlx::Connection;

fn now() -> Timestamp {
    ManualClock::at_fixed_date().now()
}

fn card(i: usize) -> CardRow {
    CardRow {
        iccid: format!("GC{i:04}"),
        shop_id: "S".into(),
        polling_enabled: true,
        stop_locked: false,
    }
}

/// A store on a fresh file with shop `S` and `cards` cards `GC0000…`.
async fn store_with_cards(path: &Path, cards: usize) -> SqliteStore {
    let store = SqliteStore::open(path).await.expect("open");
    store.meta_feature_enabled_at(now()).await.expect("meta");
    store
        .domain_import(
            &ImportBatch {
                shops: vec![Shop {
                    id: "S".into(),
                    parent_id: None,
                    name: "S".into(),
                }],
                cards: (0..cards).map(card).collect(),
                ..ImportBatch::default()
            },
            now(),
        )
        .await
        .expect("import");
    store
}

/// `fut` polled once: a store write has then been queued for the writer (the channel has room,
/// so sending completes in the first poll) and waits for its batch's commit.
fn queued<F: Future>(fut: F) -> Pin<Box<F>> {
    let mut fut = Box::pin(fut);
    let waker = futures::task::noop_waker();
    let polled = fut
        .as_mut()
        .poll(&mut std::task::Context::from_waker(&waker));
    assert!(
        polled.is_pending(),
        "not answered before its batch commits (the write lock is held)"
    );
    fut
}

/// `polling_enabled` of a card read through a connection of its own (sees committed data only).
async fn committed_polling(path: &Path, iccid: &str) -> bool {
    let opts = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
    let mut c = sqlx::SqliteConnection::connect_with(&opts)
        .await
        .expect("reader");
    sqlx::query_scalar("SELECT polling_enabled FROM cards WHERE iccid = $1")
        .bind(iccid)
        .fetch_one(&mut c)
        .await
        .expect("card")
}

#[tokio::test]
async fn concurrent_writes_share_one_commit_and_each_is_answered_only_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gc.db");
    let store = store_with_cards(&path, 64).await;
    let lock = super::hold_file_write_lock(&path).await;
    let (c0, o0) = store.write_stats();
    let writes: Vec<_> = (0..64)
        .map(|i| {
            let (store, path) = (&store, &path);
            queued(async move {
                let iccid = card(i).iccid;
                store.card_set_polling(&iccid, false).await.expect("write");
                // Answered ⇒ committed: a connection of its own already sees the change.
                assert!(!committed_polling(path, &iccid).await, "{iccid}");
            })
        })
        .collect();
    lock.close().await.expect("release the lock"); // closing rolls its transaction back
    futures::future::join_all(writes).await;
    let (c1, o1) = store.write_stats();
    assert_eq!(o1 - o0, 64, "every write ran in the writer");
    assert!(
        c1 - c0 <= 2,
        "64 waiting writes took {} commits (at most: one caught waiting for the lock, then the \
         rest together)",
        c1 - c0
    );
}

#[tokio::test]
async fn a_failing_write_rolls_back_only_itself_and_the_rest_of_its_batch_commits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gc.db");
    let store = store_with_cards(&path, 8).await;
    let lock = super::hold_file_write_lock(&path).await;
    let (c0, _) = store.write_stats();
    let good: Vec<_> = (0..8)
        .map(|i| {
            let store = &store;
            queued(async move { store.card_set_polling(&card(i).iccid, false).await })
        })
        .collect();
    // Writes a new card, then fails on a duplicate: its first insert must not survive.
    let dup_batch = ImportBatch {
        cards: vec![card(100), card(0)],
        ..ImportBatch::default()
    };
    let dup = queued(store.domain_import(&dup_batch, now()));
    // A merge on an unknown card.
    let demand = Demand {
        trigger_type: TriggerType::ManualTrigger,
        source: "manual:test".into(),
        event_id: "e-unknown".into(),
        operator: Some("test".into()),
        reason: Some("test".into()),
        task_types: vec!["card_status".into()],
    };
    let asset = AssetRef {
        asset_type: AssetType::Card,
        asset_id: "NO-SUCH-CARD".into(),
    };
    let unknown = queued(store.item_enqueue_manual(&Scope::All, &asset, &demand, now()));
    lock.close().await.expect("release the lock");

    for r in futures::future::join_all(good).await {
        r.expect("the other writes of the batch commit");
    }
    let dup = dup.await;
    assert!(matches!(dup, Err(StoreError::Conflict(_))), "{dup:?}");
    let unknown = unknown.await;
    assert!(matches!(unknown, Err(StoreError::NotFound)), "{unknown:?}");
    let (c1, _) = store.write_stats();
    // At most: one write caught waiting for the lock, the rest together, then the refused
    // import part again row by row to name its row (D-import-refusals-name-the-row).
    assert!(c1 - c0 <= 3, "{} commits for one waiting batch", c1 - c0);
    for i in 0..8 {
        assert!(!committed_polling(&path, &card(i).iccid).await);
    }
    let rolled_back: i64 = sqlx::query_scalar("SELECT count(*) FROM cards WHERE iccid = $1")
        .bind(card(100).iccid)
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(
        rolled_back, 0,
        "the failed import's first insert was rolled back"
    );
}

#[tokio::test]
async fn a_stopped_store_commits_what_was_queued_and_answers_every_later_call_closed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gc.db");
    let store = store_with_cards(&path, 4).await;
    let lock = super::hold_file_write_lock(&path).await;
    let iccid = card(1).iccid;
    let write = queued(store.card_set_polling(&iccid, false));
    // The stop begins while the write waits in the writer's queue.
    let stopping = queued(store.shutdown());
    lock.close().await.expect("release the lock");
    let (written, ()) = futures::join!(write, stopping);
    written.expect("a write queued before the stop is committed");
    assert!(!committed_polling(&path, &iccid).await);

    let write = store.card_set_polling(&card(2).iccid, false).await;
    assert!(matches!(write, Err(StoreError::Closed)), "{write:?}");
    let read = store.card_polling_scope(&card(2).iccid).await;
    assert!(matches!(read, Err(StoreError::Closed)), "{read:?}");
    store.shutdown().await; // twice is fine
}

#[tokio::test]
async fn a_write_after_the_store_stopped_is_503_in_the_envelope() {
    let app = super::helpers::spawn_seeded().await;
    app.db.shutdown().await;
    let (s, v) = app
        .enqueue(
            super::helpers::PLATFORM,
            serde_json::json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["card_status"], "reason": "r"}),
        )
        .await;
    assert_eq!((s, v["code"].as_i64()), (503, Some(1503)), "{v}");
    assert_eq!(v["success"], false, "{v}");
}

#[tokio::test]
async fn an_import_larger_than_one_part_streams_in_parts_with_every_schedule_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gc.db");
    let store = store_with_cards(&path, 0).await;
    store
        .schedule_sync(&card_polling::domain::TaskTypes::default(), 16, now())
        .await
        .expect("schedule configured");
    let (c0, o0) = store.write_stats();
    let batch = ImportBatch {
        cards: (0..25_000).map(|i| card(10_000 + i)).collect(),
        ..ImportBatch::default()
    };
    let counts = store.domain_import(&batch, now()).await.expect("import");
    assert_eq!(counts.cards, 25_000);
    let (c1, o1) = store.write_stats();
    // Shops and accounts (none), then 10,000 + 10,000 + 5,000 cards: one operation each.
    assert_eq!(o1 - o0, 4, "writer operations");
    assert!(c1 - c0 >= 1);
    let (cards, rows, types): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM cards), (SELECT count(*) FROM poll_schedule), \
         (SELECT count(DISTINCT task_type) FROM poll_schedule)",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert_eq!((cards, rows, types), (25_000, 75_000, 3));

    // A duplicate in the second part: the first part stays, the error is the duplicate's.
    let again = ImportBatch {
        cards: (0..20_001)
            .map(|i| card(40_000 + i))
            .chain([card(10_000)])
            .collect(),
        ..ImportBatch::default()
    };
    let err = store.domain_import(&again, now()).await;
    assert!(matches!(err, Err(StoreError::Conflict(_))), "{err:?}");
    // The error says what landed, so the caller resends only the rest (D-import-in-parts).
    let msg = err.unwrap_err().to_string();
    assert!(
        msg.contains("cards row 20002")
            && msg.contains("committed and stay: 0 shops, 0 accounts, 20000 cards"),
        "{msg}"
    );
    let cards: i64 = sqlx::query_scalar("SELECT count(*) FROM cards")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(
        cards,
        25_000 + 20_000,
        "the parts before the failing one are committed"
    );
}

/// An import of more than one part whose answer was lost (the service was killed after two of its
/// three parts committed) is sent again whole with [`ImportExisting::Skip`]: the stored parts are
/// skipped, the rest is stored, every card has its schedule rows once, and a resend without it
/// is still refused (D-import-existing-skip).
#[tokio::test]
async fn a_large_import_resent_with_existing_skip_stores_only_what_its_lost_answer_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_cards(&dir.path().join("gc.db"), 0).await;
    store
        .schedule_sync(&card_polling::domain::TaskTypes::default(), 16, now())
        .await
        .expect("schedule configured");
    let all = ImportBatch {
        cards: (0..25_000).map(|i| card(10_000 + i)).collect(),
        ..ImportBatch::default()
    };
    // What landed before the crash: the first two parts.
    let landed = ImportBatch {
        cards: all.cards[..20_000].to_vec(),
        ..ImportBatch::default()
    };
    store
        .domain_import(&landed, now())
        .await
        .expect("first parts");

    let err = store.domain_import(&all, now()).await;
    assert!(matches!(err, Err(StoreError::Conflict(_))), "{err:?}");
    let counts = store
        .domain_import_with(&all, ImportExisting::Skip, now())
        .await
        .expect("resent");
    assert_eq!(
        (counts.cards, counts.skipped.cards),
        (5_000, 20_000),
        "{counts:?}"
    );
    let (cards, rows, per_card): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM cards), (SELECT count(*) FROM poll_schedule), \
         (SELECT max(n) FROM (SELECT count(*) AS n FROM poll_schedule GROUP BY iccid) AS c)",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert_eq!((cards, rows, per_card), (25_000, 75_000, 3));

    // A card of the last part stored with other values since: refused by name, after the first
    // parts (all skipped) are reported as committed.
    let mut changed = all.clone();
    changed.cards[24_999].stop_locked = true;
    let msg = store
        .domain_import_with(&changed, ImportExisting::Skip, now())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains(
            "cards row 25000 (iccid GC34999): card already exists with other values (stop_locked)"
        ) && msg.contains("20000 rows already stored were skipped"),
        "{msg}"
    );
}

/// The child half of [`acknowledged_claims_and_outcomes_survive_kill_9`]: runs only when that
/// test starts this binary with `CARDPOLL_CRASH_DB` set, and never returns then (it is killed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_child_claims_and_finishes_until_killed() {
    let Ok(db) = std::env::var("CARDPOLL_CRASH_DB") else {
        return;
    };
    let path = Path::new(&db);
    let store = Arc::new(store_with_cards(path, 400).await);
    let demand = Demand {
        trigger_type: TriggerType::ManualTrigger,
        source: "manual:crash".into(),
        event_id: "crash".into(),
        operator: Some("crash".into()),
        reason: Some("crash".into()),
        task_types: vec!["card_status".into()],
    };
    let mut ids = Vec::new();
    for i in 0..400 {
        let asset = AssetRef {
            asset_type: AssetType::Card,
            asset_id: card(i).iccid,
        };
        let out = store
            .item_enqueue_manual(&Scope::All, &asset, &demand, now())
            .await
            .expect("enqueue");
        ids.push(out[0].item_id);
    }
    println!("CRASH ready");
    let mut tasks = Vec::new();
    for w in 0..8 {
        let store = store.clone();
        let mine: Vec<i64> = ids.iter().skip(w).step_by(8).copied().collect();
        tasks.push(tokio::spawn(async move {
            for id in mine {
                let claim = store
                    .item_claim(id, &format!("tok-{id}"), now(), CLAIM_LEASE)
                    .await
                    .expect("claim")
                    .expect("claimed");
                println!("CRASH claimed {id}");
                let claim = store
                    .item_begin_attempt(&claim, now())
                    .await
                    .expect("begin");
                let finish = Finish::Completed {
                    result: "ok".into(),
                };
                store
                    .item_finish(&claim, &finish, &[], now())
                    .await
                    .expect("finish");
                println!("CRASH finished {id}");
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    println!("CRASH all done");
    // Wait to be killed: the parent decides when.
    std::future::pending::<()>().await;
}

#[test]
fn acknowledged_claims_and_outcomes_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crash.db");
    let exe = std::env::current_exe().expect("test binary");
    let mut child = std::process::Command::new(exe)
        .args([
            "--exact",
            "sqlite::group_commit::crash_child_claims_and_finishes_until_killed",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("CARDPOLL_CRASH_DB", &db)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("child");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let (mut claimed, mut finished) = (BTreeSet::new(), BTreeSet::new());
    // Kill it mid-stream: after 100 acknowledged outcomes, with claims and finishes in flight.
    for line in lines.by_ref() {
        let line = line.expect("line");
        if let Some(id) = line.strip_prefix("CRASH claimed ") {
            claimed.insert(id.parse::<i64>().unwrap());
        } else if let Some(id) = line.strip_prefix("CRASH finished ") {
            finished.insert(id.parse::<i64>().unwrap());
            if finished.len() == 100 {
                break;
            }
        }
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    // What the child printed before it died was acknowledged too.
    for line in lines.map_while(Result::ok) {
        if let Some(id) = line.strip_prefix("CRASH claimed ") {
            claimed.insert(id.parse::<i64>().unwrap());
        } else if let Some(id) = line.strip_prefix("CRASH finished ") {
            finished.insert(id.parse::<i64>().unwrap());
        }
    }
    assert!(
        finished.len() >= 100,
        "the child finished {}",
        finished.len()
    );

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let opts = sqlx::sqlite::SqliteConnectOptions::new().filename(&db);
        let mut c = sqlx::SqliteConnection::connect_with(&opts)
            .await
            .expect("reopen after the kill");
        let rows: Vec<(i64, String, i64)> =
            sqlx::query_as("SELECT id, status, attempts FROM priority_items")
                .fetch_all(&mut c)
                .await
                .unwrap();
        let status: std::collections::HashMap<i64, (String, i64)> =
            rows.into_iter().map(|(id, s, a)| (id, (s, a))).collect();
        for id in &finished {
            assert_eq!(
                status[id],
                ("completed".to_owned(), 1),
                "item {id}: outcome acknowledged before the kill"
            );
        }
        for id in claimed.difference(&finished) {
            let (s, _) = &status[id];
            assert!(
                s == "running" || s == "completed",
                "item {id}: claim acknowledged before the kill, found {s}"
            );
        }
    });
}

/// D-writes-failing-is-503-and-unready: with the disk full, writes answered 500 "internal error"
/// while `/readyz`, `/health` and `/metrics` said all was well, and after one failed COMMIT the
/// writer refused every later batch until a restart. Here the write lock held by another
/// connection past the lock timeout makes the writer's batches fail as a whole: writes answer 503
/// with `Retry-After`, `/readyz` and `/health` say writes are failing, `cardpoll_database_up` is
/// 0; once the lock is gone the next write commits and everything says ready again.
#[tokio::test]
async fn failing_write_batches_are_a_503_and_unready_and_the_writer_recovers() {
    use super::helpers::{ADMIN, Backend, PLATFORM, spawn_with};
    use serde_json::json;

    let app = spawn_with(Backend::Memory, |s| s.db_lock_timeout_ms = 300).await;
    app.seed().await;
    let body = json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["card_status"], "reason": "disk"});
    let lock = super::hold_write_lock(&app.settings).await;
    let (s, v) = app.enqueue(PLATFORM, body.clone()).await;
    assert_eq!((s, v["code"].as_i64()), (503, Some(1503)), "{v}");
    assert_eq!(
        v["msg"],
        "the database is busy or unavailable; retry shortly"
    );
    let (s, v) = app.send(reqwest::Method::GET, "/readyz", None, None).await;
    assert_eq!(s, 503, "{v}");
    assert_eq!(v["msg"], "database unavailable: writes are failing", "{v}");
    let (s, v) = app.get("/health", ADMIN).await;
    assert_eq!(s, 503, "{v}");
    assert_eq!(v["data"]["database"]["reachable"], true, "{v}");
    assert_eq!(v["data"]["database"]["writes_failing"], true, "{v}");
    // Without a token: the database answers, its writes fail (D-poll-health-reads-items; it said
    // "unreachable" while the token's answer said reachable).
    let (s, v) = app.send(reqwest::Method::GET, "/health", None, None).await;
    assert_eq!(s, 503, "{v}");
    assert_eq!(
        v["data"],
        serde_json::json!({"status": "unavailable", "database": "writes_failing"})
    );
    let (s, m) = app.raw(reqwest::Method::GET, "/metrics", Some(ADMIN)).await;
    assert_eq!(s, 200);
    assert!(m.contains("cardpoll_database_up 0"), "{m}");

    lock.close().await.expect("release the lock");
    let (s, v) = app.enqueue(PLATFORM, body).await;
    assert_eq!(s, 200, "the next write commits: {v}");
    let (s, _) = app.send(reqwest::Method::GET, "/readyz", None, None).await;
    assert_eq!(s, 200);
    let (s, v) = app.get("/health", ADMIN).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["data"]["database"]["writes_failing"], false, "{v}");
}
