//! Retention of ended items: what goes with an item past the history retention and what stays,
//! and a retrigger that meets a retention batch on PostgreSQL.

use super::*;

both!(
    retention_prunes_an_item_ended_91_days_ago_with_its_sources_and_facts_and_keeps_younger_and_active_ones,
);

const DAY: Duration = Duration::from_secs(24 * 3600);

impl Harness {
    /// The rows that name item `id`: its sources, audit facts and trigger events.
    async fn rows_of(&self, id: i64) -> [i64; 3] {
        [
            self.raw
                .count(
                    "SELECT count(*) FROM priority_item_sources WHERE item_id = $1",
                    id,
                )
                .await,
            self.raw
                .count(
                    "SELECT count(*) FROM priority_item_events WHERE item_id = $1",
                    id,
                )
                .await,
            self.raw
                .count(
                    "SELECT count(*) FROM priority_trigger_events WHERE item_id = $1",
                    id,
                )
                .await,
        ]
    }
}

/// A new item of card `iccid` from trigger event `event` at the harness's now; its id.
async fn enqueue_item(h: &Harness, iccid: &str, event: &str) -> i64 {
    let out = h
        .store
        .item_enqueue_manual(&Scope::All, &card(iccid), &demand(event), h.now())
        .await
        .unwrap();
    out[0].item_id
}

/// Claims `id` now and, unless `keep_running`, completes it now.
async fn run_item(h: &Harness, id: i64, keep_running: bool) {
    let claim = h
        .store
        .item_claim(id, &format!("tok-{id}"), h.now(), LEASE)
        .await
        .unwrap()
        .expect("claimable");
    if keep_running {
        return;
    }
    let claim = h.store.item_begin_attempt(&claim, h.now()).await.unwrap();
    let done = Finish::Completed {
        result: "ok".into(),
    };
    h.store
        .item_finish(&claim, &done, &[], h.now())
        .await
        .unwrap();
}

/// D-retention-batches (amends D-retention-batches): an item that ended more than the history retention ago goes
/// with its source rows, audit facts and trigger events; one that ended a day inside it stays
/// whole, and so do a pending and a running item enqueued before either (the age of an active
/// item never counts). A second run finds nothing.
async fn retention_prunes_an_item_ended_91_days_ago_with_its_sources_and_facts_and_keeps_younger_and_active_ones(
    h: &Harness,
) {
    use crate::jobs::retention::{Retention, RetentionJob};

    let pending = enqueue_item(h, "89860002", "p1").await;
    let running = enqueue_item(h, "89860003", "r1").await;
    run_item(h, running, true).await;
    // Ended 91 days before the run, with two sources (a merge) and two trigger events.
    let old = enqueue_item(h, "89860000", "o1").await;
    assert_eq!(enqueue_item(h, "89860000", "o2").await, old);
    run_item(h, old, false).await;
    h.clock.advance(2 * DAY);
    let young = enqueue_item(h, "89860001", "y1").await;
    run_item(h, young, false).await;
    h.clock.advance(89 * DAY);

    let mut before = Vec::new();
    for id in [old, young, pending, running] {
        let rows = h.rows_of(id).await;
        assert!(rows.iter().all(|n| *n > 0), "item {id}: {rows:?}");
        before.push(rows);
    }
    let job = RetentionJob::new(
        h.store.clone(),
        Arc::new(h.clock.clone()),
        Arc::new(crate::telemetry::PollMetrics::new()),
        Retention {
            logs: 7 * DAY,
            history: Some(90 * DAY),
            manual_triggers: 90 * DAY,
            batch: 1000,
            pause: Duration::ZERO,
            every: DAY,
        },
    );
    let r = job.run_once(h.now()).await.unwrap();
    assert_eq!(r.priority_items, 1, "{r:?}");
    assert_eq!(r.audit_facts as i64, before[0][1], "{r:?}");
    assert_eq!(r.trigger_events, 2, "{r:?}");

    assert!(h.store.item_get(&Scope::All, old).await.unwrap().is_none());
    assert_eq!(h.rows_of(old).await, [0, 0, 0]);
    for (n, (id, status)) in [
        (young, ItemStatus::Completed),
        (pending, ItemStatus::Pending),
        (running, ItemStatus::Running),
    ]
    .into_iter()
    .enumerate()
    {
        let detail = h
            .store
            .item_get(&Scope::All, id)
            .await
            .unwrap()
            .expect("kept");
        assert_eq!(detail.item.status, status, "item {id}");
        assert_eq!(h.rows_of(id).await, before[n + 1], "item {id}");
    }
    assert_eq!(job.run_once(h.now()).await.unwrap().total(), 0);
}

/// D-retrigger-predecessor-kept, PostgreSQL (SQLite's one writer orders the two): a retrigger of an item that a
/// retention batch holds and deletes waits for the batch and then finds the item gone — a 404 —
/// instead of reading it first and meeting the foreign key of `retriggered_from` at its insert.
#[test_util::lane(postgres)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_retrigger_waiting_on_an_item_retention_deletes_finds_it_gone() {
    let h = Harness::postgres().await;
    let id = enqueue_item(&h, "89860000", "f1").await;
    let claim = h
        .store
        .item_claim(id, "tok-f", h.now(), LEASE)
        .await
        .unwrap()
        .unwrap();
    let claim = h.store.item_begin_attempt(&claim, h.now()).await.unwrap();
    let failed = Finish::Failed {
        reason: "business check".into(),
        result: "failed".into(),
        after_call: false,
    };
    h.store
        .item_finish(&claim, &failed, &[], h.now())
        .await
        .unwrap();
    let Raw::Postgres(pool) = &h.raw else {
        unreachable!("a PostgreSQL harness")
    };
    // A retention batch: the item picked and locked as `PICK_ITEMS` does, then deleted.
    let mut batch = pool.begin().await.unwrap();
    sqlx::query("SELECT id FROM priority_items WHERE id = $1 FOR UPDATE SKIP LOCKED")
        .bind(id)
        .fetch_one(&mut *batch)
        .await
        .unwrap();
    let store = h.store.clone();
    let now = h.now();
    let retrigger = tokio::spawn(async move {
        store
            .item_retrigger(&Scope::All, id, "alice", "carrier fixed", now)
            .await
    });
    let holder = backend_pid(&mut batch).await;
    wait_until_blocked_by(holder, "the retrigger to wait for the batch's row lock").await;
    assert!(
        !retrigger.is_finished(),
        "the retrigger waits for the batch"
    );
    for sql in [
        "DELETE FROM priority_item_events WHERE item_id = $1",
        "DELETE FROM priority_trigger_events WHERE item_id = $1",
        "DELETE FROM priority_item_sources WHERE item_id = $1",
        "DELETE FROM priority_items WHERE id = $1",
    ] {
        sqlx::query(sql)
            .bind(id)
            .execute(&mut *batch)
            .await
            .unwrap();
    }
    batch.commit().await.unwrap();
    let out = retrigger.await.unwrap();
    assert!(matches!(out, Err(StoreError::NotFound)), "{out:?}");
}
