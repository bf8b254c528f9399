//! Several service instances on one PostgreSQL database, with no global writer lock
//! (D-poll-postgres-concurrent-writes): three `Application`s in this process on one fresh schema, each with its own
//! instance id, store pool, executor pool, scheduler and expiry job, sharing the Redis hint and
//! manual lanes and one injected clock. PostgreSQL only: SQLite is one process's file.
//!
//! `CARD_POLLING_MULTI_CARDS` (default 100,000) and `CARD_POLLING_MULTI_STEPS` (simulated
//! minutes, default 60) make the random run larger or longer.

use card_polling::store::{ItemStore, PackageStore, ScheduleStore};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use card_polling::Application;
use card_polling::domain::asset::{AssetRef, AssetType, BindingRow, CardRow, DeviceRow};
use card_polling::domain::{Account, PackageKind, PaymentStatus, Role, Scope, Shop, TaskTypes};
use card_polling::hints::{ChannelLane, Hints};
use card_polling::jobs::expiry::ExpiryJob;
use card_polling::priority::TriggerType;
use card_polling::priority::manual::{self, ManualRequest};
use card_polling::scheduler::Scheduler;
use card_polling::settings::{HintChannelSetting, Secret, Settings};
use card_polling::store::postgres::PgStore;
use card_polling::store::{Demand, EnqueueAction, ImportBatch, PaymentCallback, Store};
use card_polling::upstream::{
    PollRequest, PollResponse, SimCarrier, SimConfig, Upstream, UpstreamError,
};
use rakuten_types::{Clock, ManualClock, Timestamp};

use super::helpers::{
    ADMIN, assert_expected_refusal, assert_soak_invariants, env_or, iccid, random_asset, redis_url,
    snapshot_terminal, spawn_with,
};

/// One upstream call of a priority item, as an instance's carrier saw it.
#[derive(Debug, Clone)]
struct ItemCall {
    instance: usize,
    item_id: i64,
    attempt: u32,
    /// Global order of the call's start and end (one counter for every instance).
    start: u64,
    end: u64,
    /// The item's status read from the database when the call started.
    status_at_start: String,
}

/// The shared simulated carrier seen through one instance: records every priority call with the
/// instance, the attempt, its start and end, and the item's status at its start.
struct RecordingCarrier {
    instance: usize,
    sim: Arc<SimCarrier>,
    db: sqlx::PgPool,
    seq: Arc<AtomicU64>,
    calls: Arc<Mutex<Vec<ItemCall>>>,
}

#[async_trait]
impl Upstream for RecordingCarrier {
    async fn poll(&self, req: &PollRequest) -> Result<PollResponse, UpstreamError> {
        let Some(item_id) = req.item_id else {
            return self.sim.poll(req).await;
        };
        let start = self.seq.fetch_add(1, Ordering::SeqCst);
        let status_at_start: String =
            sqlx::query_scalar("SELECT status FROM priority_items WHERE id = $1")
                .bind(item_id)
                .fetch_one(&self.db)
                .await
                .expect("the item of a call exists");
        let answer = self.sim.poll(req).await;
        let end = self.seq.fetch_add(1, Ordering::SeqCst);
        self.calls.lock().unwrap().push(ItemCall {
            instance: self.instance,
            item_id,
            attempt: req.attempt,
            start,
            end,
            status_at_start,
        });
        answer
    }

    async fn resume(&self, iccid: &str) -> Result<(), UpstreamError> {
        self.sim.resume(iccid).await
    }
}

/// One instance's parts the test drives.
struct Instance {
    store: Arc<dyn Store>,
    hints: Hints,
    scheduler: Scheduler,
    expiry: ExpiryJob,
}

impl Instance {
    /// One scheduling cycle at `now`, then everything it queued.
    async fn cycle_and_drain(&self, now: Timestamp) {
        let r = self.scheduler.run_once(now).await;
        assert!(r.errors.is_empty(), "{r:?}");
        self.scheduler.pool().drain().await.expect("drain");
    }
}

fn operator() -> Account {
    Account {
        id: "multi-operator".into(),
        role: Role::Platform,
        shop_id: None,
        perm_manual_trigger: true,
        perm_card_data: true,
    }
}

#[expect(
    clippy::too_many_arguments,
    reason = "one instance's share of the world: its peers, its random stream, the world's size and the clock"
)]
/// Random traffic of one instance for one simulated minute: manual enqueues of cards and
/// devices (some with an event id another instance sends at the same moment), payments (some
/// callbacks delivered to two instances at once), ordinary manual triggers and closes.
async fn traffic(
    me: usize,
    inst: &[Instance],
    rng: &mut StdRng,
    cards: usize,
    devices: usize,
    step: usize,
    types: &TaskTypes,
    db: &sqlx::PgPool,
    now: Timestamp,
) {
    let this = &inst[me];
    let other = &inst[(me + 1) % inst.len()];
    let who = operator();
    for n in 0..rng.random_range(2..6) {
        let asset = random_asset(rng, cards, devices);
        let tts = [types.names()[rng.random_range(0..3)].clone()];
        let event = format!("multi-{step}-{me}-{n}");
        let twice = rng.random_bool(0.2);
        let req = || ManualRequest {
            asset: &asset,
            task_types: &tts,
            reason: Some("multi"),
            event_id: twice.then_some(event.as_str()),
        };
        let (a, b) = if twice {
            // The same request (same event id) reaching two instances at once: one applies it,
            // the other finds it a replay.
            let (a, b) = tokio::join!(
                manual::enqueue(this.store.as_ref(), types, &who, req(), now),
                manual::enqueue(other.store.as_ref(), types, &who, req(), now)
            );
            (a, Some(b))
        } else {
            (
                manual::enqueue(this.store.as_ref(), types, &who, req(), now).await,
                None,
            )
        };
        for r in std::iter::once(a).chain(b) {
            match r {
                Ok(items) => this.hints.push_items(&items).await,
                Err(e) => assert_expected_refusal(&e),
            }
        }
    }
    for n in 0..rng.random_range(0..3) {
        let id = format!("O{step}-{me}-{n}");
        let asset = AssetRef {
            asset_type: AssetType::Card,
            asset_id: iccid(rng.random_range(0..cards)),
        };
        let kind = if rng.random_bool(0.7) {
            PackageKind::Main
        } else {
            PackageKind::Addon
        };
        this.store
            .order_create(&id, &asset, kind, now)
            .await
            .unwrap();
        let status = match rng.random_range(0..10) {
            0 => PaymentStatus::Failed,
            1 => PaymentStatus::Cancelled,
            _ => PaymentStatus::Paid,
        };
        let cb = PaymentCallback {
            payment_id: format!("P{step}-{me}-{n}"),
            order_id: id,
            status,
        };
        let names = types.names();
        let (a, b) = tokio::join!(
            this.store.payment_apply(&cb, &names, now),
            other.store.payment_apply(&cb, &names, now)
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(
            a.replayed != b.replayed,
            "one callback applies, the other is its replay: {a:?} {b:?}"
        );
        this.hints.push_items(&a.items).await;
        other.hints.push_items(&b.items).await;
    }
    for _ in 0..rng.random_range(0..2) {
        let c = iccid(rng.random_range(0..cards));
        card_polling::manual_trigger::request(
            this.store.as_ref(),
            &this.hints,
            types,
            &who,
            &c,
            &[],
            1_000_000,
            now,
        )
        .await
        .unwrap();
    }
    let active: Vec<i64> = sqlx::query_scalar(
        "SELECT id FROM priority_items WHERE status IN ('pending', 'running') \
         ORDER BY random() LIMIT $1",
    )
    .bind(rng.random_range(0..3_i64))
    .fetch_all(db)
    .await
    .unwrap();
    for id in active {
        // Another instance may close the same item at the same moment: one closes it, the other
        // gets the 409 of an item no longer active.
        match this
            .store
            .item_close(&Scope::All, id, "multi-operator", "multi close", now)
            .await
        {
            Ok(()) => {}
            Err(e) => assert!(e.to_string().contains("conflict"), "{e}"),
        }
    }
}

#[test_util::lane(postgres, redis)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_on_one_database_never_claim_an_item_twice_nor_call_for_an_ended_one() {
    let cards = env_or("CARD_POLLING_MULTI_CARDS", 100_000);
    let steps = env_or("CARD_POLLING_MULTI_STEPS", 60);
    let schema = crate::PgSchema::new().await;
    let clock = ManualClock::at_fixed_date();
    let unknown: std::collections::HashSet<String> = (0..cards).step_by(97).map(iccid).collect();
    let sim = Arc::new(SimCarrier::new(SimConfig {
        latency: Duration::ZERO,
        failure_rate: 0.15,
        timeout_rate: 0.05,
        unknown_iccids: unknown,
    }));
    let db = sqlx::postgres::PgPoolOptions::new()
        .max_connections(4)
        .connect_lazy(&schema.url)
        .expect("pool");
    let seq = Arc::new(AtomicU64::new(0));
    let calls: Arc<Mutex<Vec<ItemCall>>> = Arc::default();
    let dir = tempfile::tempdir().expect("temp dir");
    let prefix = format!("card-polling-multi:{}:", uuid::Uuid::now_v7());
    let mut settings = Settings::for_tests(dir.path().join("unused.db"), ADMIN);
    settings.db_url = Some(Secret::new(schema.url.clone()));
    settings.hint_channel = HintChannelSetting::Redis(Secret::new(redis_url()));
    settings.hint_prefix = prefix;
    // Long intervals and small shard batches keep the ordinary load of a debug build small; the
    // priority traffic is what this test is about.
    settings.task_types =
        TaskTypes::parse("card_status=14400,data_usage=28800,package=28800").unwrap();
    settings.shards = 4;
    settings.shard_batch = 10;
    settings.backpressure_depth = 20_000;
    let mut inst = Vec::new();
    for n in 0..3 {
        let mut s = settings.clone();
        s.instance_id = Some(format!("inst-{n}"));
        let carrier = Arc::new(RecordingCarrier {
            instance: n,
            sim: sim.clone(),
            db: db.clone(),
            seq: seq.clone(),
            calls: calls.clone(),
        });
        let app = Application::build(s, Arc::new(clock.clone()), carrier)
            .await
            .unwrap_or_else(|e| panic!("build instance {n} (Redis at {}?): {e:#}", redis_url()));
        inst.push(Instance {
            store: app.state().store.clone(),
            hints: app.state().hints.clone(),
            scheduler: app.scheduler().clone(),
            expiry: app.expiry().clone(),
        });
    }
    let types = settings.task_types.clone();
    let engine = PgStore::open(&schema.url).await.expect("checks' store");

    // 10 shops; up to 1,000 devices with two bound cards each.
    let devices = (cards / 50).clamp(1, 1_000);
    let now = clock.now();
    inst[0]
        .store
        .domain_import(
            &ImportBatch {
                shops: (0..10)
                    .map(|s| Shop {
                        id: format!("S{s}"),
                        parent_id: None,
                        name: String::new(),
                    })
                    .collect(),
                devices: (0..devices)
                    .map(|d| DeviceRow {
                        device_no: format!("DEV{d}"),
                        shop_id: format!("S{}", (2 * d) % 10),
                        polling_enabled: true,
                        reported_slot_iccid: None,
                    })
                    .collect(),
                ..ImportBatch::default()
            },
            now,
        )
        .await
        .expect("shops and devices");
    // The cards with devices (two bound cards per device) go through the store's import, three
    // instances importing their share at once; the remaining standalone cards are loaded by one
    // bulk statement per table with the same rows (shard, first poll time) an import writes: a
    // debug build imports ~1,500 cards/s, too slow for 100,000 in CI.
    let bound = (2 * devices).min(cards);
    let chunk = bound.div_ceil(3).max(1);
    let imports = inst.iter().enumerate().map(|(n, i)| {
        let range = (n * chunk).min(bound)..((n + 1) * chunk).min(bound);
        let batch = ImportBatch {
            cards: range
                .clone()
                .map(|c| CardRow {
                    iccid: iccid(c),
                    shop_id: format!("S{}", c % 10),
                    polling_enabled: true,
                    stop_locked: c % 50 == 0,
                })
                .collect(),
            bindings: range
                .map(|c| BindingRow {
                    device_no: format!("DEV{}", c / 2),
                    iccid: iccid(c),
                    active: true,
                })
                .collect(),
            ..ImportBatch::default()
        };
        async move { i.store.domain_import(&batch, now).await.expect("cards") }
    });
    futures::future::join_all(imports).await;
    bulk_cards(&db, bound..cards, &settings, now).await;
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM poll_schedule")
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(rows, cards as i64 * 3, "every card has its schedule rows");

    let mut rngs: Vec<StdRng> = (0..3).map(|n| StdRng::seed_from_u64(14 + n)).collect();
    let mut terminal_calls: HashMap<i64, usize> = HashMap::new();
    let calls_for = |id: i64| -> usize {
        calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.item_id == id)
            .count()
    };
    for step in 0..steps {
        let now = clock.now();
        // Writes from every instance at once; then every instance's expiry job at once.
        let [r0, r1, r2] = &mut rngs[..] else {
            unreachable!()
        };
        tokio::join!(
            traffic(0, &inst, r0, cards, devices, step, &types, &db, now),
            traffic(1, &inst, r1, cards, devices, step, &types, &db, now),
            traffic(2, &inst, r2, cards, devices, step, &types, &db, now),
        );
        if step % 11 == 5 {
            // A lost hint lane: the persisted rows stay authoritative (the recovery read of any
            // instance finds the items).
            for tt in types.names() {
                inst[0].hints.clear(ChannelLane::Hint, &tt).await.unwrap();
            }
        }
        // A day-long jump near the end: every instance's expiry job and claims meet items past
        // their validity.
        if step == steps.saturating_sub(8) {
            clock.advance(Duration::from_secs(24 * 3600));
        }
        let now = clock.now();
        let (a, b, c) = tokio::join!(
            inst[0].expiry.run_once(now),
            inst[1].expiry.run_once(now),
            inst[2].expiry.run_once(now),
        );
        a.unwrap();
        b.unwrap();
        c.unwrap();
        snapshot_terminal(&engine, calls_for, &mut terminal_calls).await;
        // Every instance's scheduler and executors at once, on the same due items and lanes.
        tokio::join!(
            inst[0].cycle_and_drain(now),
            inst[1].cycle_and_drain(now),
            inst[2].cycle_and_drain(now),
        );
        snapshot_terminal(&engine, calls_for, &mut terminal_calls).await;
        clock.advance(Duration::from_secs(60));
    }
    // Let every queued trigger run once more.
    let now = clock.now();
    tokio::join!(
        inst[0].cycle_and_drain(now),
        inst[1].cycle_and_drain(now),
        inst[2].cycle_and_drain(now),
    );

    let calls = calls.lock().unwrap().clone();
    // No item claimed by two instances at once: each (item, attempt) executed once, and one
    // item's calls never overlap.
    let mut by_item: HashMap<i64, Vec<&ItemCall>> = HashMap::new();
    for c in &calls {
        by_item.entry(c.item_id).or_default().push(c);
        assert_eq!(
            c.status_at_start, "running",
            "a call for an item that was not running (closed or expired?): {c:?}"
        );
    }
    for (id, cs) in &mut by_item {
        cs.sort_by_key(|c| c.start);
        for w in cs.windows(2) {
            assert!(
                w[0].end < w[1].start,
                "item {id}: two calls at once: {:?} and {:?}",
                w[0],
                w[1]
            );
            assert!(
                w[0].attempt < w[1].attempt,
                "item {id}: attempt {} executed again: {:?} then {:?}",
                w[0].attempt,
                w[0],
                w[1]
            );
        }
    }
    let per_instance: Vec<usize> = (0..3)
        .map(|n| calls.iter().filter(|c| c.instance == n).count())
        .collect();
    assert!(
        per_instance.iter().all(|&n| n > 0),
        "every instance executed priority items: {per_instance:?}"
    );
    let claims_by_actor: Vec<(String, i64)> = sqlx::query_as(
        "SELECT actor, count(*) FROM priority_item_events WHERE kind = 'claim' GROUP BY actor ORDER BY actor",
    )
    .fetch_all(&db)
    .await
    .unwrap();
    assert_eq!(
        claims_by_actor
            .iter()
            .map(|c| c.0.as_str())
            .collect::<Vec<_>>(),
        ["inst-0", "inst-1", "inst-2"],
        "claim facts name the claiming instances: {claims_by_actor:?}"
    );
    let mut counts: HashMap<i64, i64> = HashMap::new();
    for (id, cs) in &by_item {
        counts.insert(*id, cs.len() as i64);
    }
    let by_status = assert_soak_invariants(&engine, &counts, &terminal_calls, 100).await;
    println!(
        "multi-instance: {cards} cards, {steps} steps, {by_status:?}, priority calls per instance {per_instance:?}, {} upstream calls",
        sim.total_poll_calls()
    );
    drop(inst);
    drop(schema);
}

/// Cards `range` (standalone, shop `S{i % 10}`, every 50th stop-locked) with their schedule rows,
/// as `domain_import` writes them, in one statement per table.
async fn bulk_cards(
    db: &sqlx::PgPool,
    range: std::ops::Range<usize>,
    settings: &Settings,
    now: Timestamp,
) {
    use card_polling::scheduler::shard_queue::{first_poll_at, shard_of};
    let iccids: Vec<String> = range.clone().map(iccid).collect();
    let shops: Vec<String> = range.clone().map(|c| format!("S{}", c % 10)).collect();
    let stop: Vec<bool> = range.map(|c| c % 50 == 0).collect();
    sqlx::query(
        "INSERT INTO cards (iccid, shop_id, polling_enabled, stop_locked) \
         SELECT i, s, TRUE, l FROM UNNEST($1::text[], $2::text[], $3::bool[]) AS u(i, s, l)",
    )
    .bind(&iccids)
    .bind(&shops)
    .bind(&stop)
    .execute(db)
    .await
    .expect("bulk cards");
    for tt in settings.task_types.all() {
        let shard: Vec<i64> = iccids
            .iter()
            .map(|i| i64::from(shard_of(i, settings.shards)))
            .collect();
        let next: Vec<String> = iccids
            .iter()
            .map(|i| first_poll_at(i, tt.interval, now).to_rfc3339())
            .collect();
        sqlx::query(
            "INSERT INTO poll_schedule (iccid, task_type, shard, next_poll_at) \
             SELECT i, $2, s, n FROM UNNEST($1::text[], $3::int8[], $4::text[]) AS u(i, s, n)",
        )
        .bind(&iccids)
        .bind(&tt.name)
        .bind(&shard)
        .bind(&next)
        .execute(db)
        .await
        .expect("bulk schedule");
    }
}

/// A second store on the test app's database, acting as another instance.
async fn second_store(settings: &Settings, id: &str) -> PgStore {
    let url = settings.db_url.as_ref().expect("PostgreSQL").expose();
    PgStore::open(url)
        .await
        .expect("second store")
        .with_instance(id)
}

async fn import_cards(store: &dyn Store, n: usize, now: Timestamp) {
    store
        .domain_import(
            &ImportBatch {
                shops: vec![Shop {
                    id: "S".into(),
                    parent_id: None,
                    name: String::new(),
                }],
                cards: (0..n)
                    .map(|i| CardRow {
                        iccid: iccid(i),
                        shop_id: "S".into(),
                        polling_enabled: true,
                        stop_locked: false,
                    })
                    .collect(),
                ..ImportBatch::default()
            },
            now,
        )
        .await
        .expect("import");
}

fn demand(event_id: String) -> Demand {
    Demand {
        trigger_type: TriggerType::ManualTrigger,
        source: "manual:race".into(),
        event_id,
        operator: Some("race".into()),
        reason: Some("race".into()),
        task_types: vec!["card_status".into()],
    }
}

#[test_util::lane(postgres)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_racing_to_enqueue_one_card_and_task_type_leave_one_active_item_counting_every_trigger()
 {
    let app = spawn_with(super::helpers::Backend::Memory, |_| {}).await;
    let other = second_store(&app.settings, "other").await;
    let now = app.clock.now();
    import_cards(app.store.as_ref(), 1, now).await;
    let asset = AssetRef {
        asset_type: AssetType::Card,
        asset_id: iccid(0),
    };
    let rounds = 60;
    let mut created = 0;
    let mut replayed = 0;
    for r in 0..rounds {
        let (da, db, ds) = (
            demand(format!("a{r}")),
            demand(format!("b{r}")),
            demand(format!("s{r}")),
        );
        // Distinct events from both instances at once: both count.
        let (a, b) = tokio::join!(
            app.store.item_enqueue_manual(&Scope::All, &asset, &da, now),
            other.item_enqueue_manual(&Scope::All, &asset, &db, now)
        );
        // One event delivered to both at once: it counts once, the other is its replay.
        let (c, d) = tokio::join!(
            app.store.item_enqueue_manual(&Scope::All, &asset, &ds, now),
            other.item_enqueue_manual(&Scope::All, &asset, &ds, now)
        );
        for out in [a, b, c, d] {
            let out = out.expect("enqueue");
            assert_eq!(out.len(), 1);
            match out[0].action {
                EnqueueAction::Created => created += 1,
                EnqueueAction::Replayed => replayed += 1,
                EnqueueAction::Merged => {}
            }
        }
    }
    assert_eq!(created, 1, "one item created, every other trigger merged");
    assert_eq!(replayed, rounds, "each shared event replayed once");
    let items: Vec<(i64, String, i64)> =
        sqlx::query_as("SELECT id, status, trigger_count FROM priority_items")
            .fetch_all(app.db.pool())
            .await
            .unwrap();
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0].1, "pending");
    assert_eq!(
        items[0].2,
        3 * rounds as i64,
        "every distinct trigger counted"
    );
    app.assert_invariants().await;
}

#[test_util::lane(postgres)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_stores_claiming_the_same_due_items_at_once_never_claim_one_twice() {
    let app = spawn_with(super::helpers::Backend::Memory, |_| {}).await;
    let stores: Vec<Arc<dyn Store>> = vec![
        app.store.clone(),
        Arc::new(second_store(&app.settings, "claimer-b").await),
        Arc::new(second_store(&app.settings, "claimer-c").await),
    ];
    let now = app.clock.now();
    let items = 150;
    import_cards(app.store.as_ref(), items, now).await;
    for i in 0..items {
        let asset = AssetRef {
            asset_type: AssetType::Card,
            asset_id: iccid(i),
        };
        app.store
            .item_enqueue_manual(&Scope::All, &asset, &demand(format!("e{i}")), now)
            .await
            .expect("enqueue");
    }
    let claim_all = |n: usize| {
        let store = stores[n].clone();
        async move {
            let due = store.item_due(now, 1_000).await.expect("due");
            let mut won = Vec::new();
            for id in due {
                let token = format!("token-{n}-{id}");
                if let Some(c) = store
                    .item_claim(id, &token, now, Duration::from_secs(90))
                    .await
                    .expect("claim")
                {
                    won.push((c.id, n));
                }
            }
            won
        }
    };
    let (a, b, c) = tokio::join!(claim_all(0), claim_all(1), claim_all(2));
    let mut owner: HashMap<i64, usize> = HashMap::new();
    for (id, n) in a.into_iter().chain(b).chain(c) {
        if let Some(first) = owner.insert(id, n) {
            panic!("item {id} claimed by store {first} and store {n}");
        }
    }
    // A claimer that found an item locked by another skipped it; what nobody won is still due
    // and pending, and one more round claims it.
    let left = stores[0].item_due(now, 1_000).await.unwrap();
    for id in left {
        assert!(
            stores[1]
                .item_claim(id, "late", now, Duration::from_secs(90))
                .await
                .unwrap()
                .is_some(),
            "item {id} was neither claimed nor claimable"
        );
        owner.insert(id, 1);
    }
    assert_eq!(owner.len(), items, "every item claimed exactly once");
    let claims: i64 =
        sqlx::query_scalar("SELECT count(*) FROM priority_item_events WHERE kind = 'claim'")
            .fetch_one(app.db.pool())
            .await
            .unwrap();
    assert_eq!(claims, items as i64, "one claim fact per item");
    app.assert_invariants().await;
}

#[test_util::lane(postgres)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_main_packages_paid_at_once_on_two_instances_activate_one_and_queue_the_other() {
    let app = spawn_with(super::helpers::Backend::Memory, |_| {}).await;
    let other = second_store(&app.settings, "other").await;
    let now = app.clock.now();
    let rounds = 20;
    import_cards(app.store.as_ref(), rounds, now).await;
    let names = app.settings.task_types.names();
    for r in 0..rounds {
        let asset = AssetRef {
            asset_type: AssetType::Card,
            asset_id: iccid(r),
        };
        for o in ["a", "b"] {
            app.store
                .order_create(&format!("O{r}{o}"), &asset, PackageKind::Main, now)
                .await
                .unwrap();
        }
        let (ca, cb) = (
            PaymentCallback {
                payment_id: format!("P{r}a"),
                order_id: format!("O{r}a"),
                status: PaymentStatus::Paid,
            },
            PaymentCallback {
                payment_id: format!("P{r}b"),
                order_id: format!("O{r}b"),
                status: PaymentStatus::Paid,
            },
        );
        let (a, b) = tokio::join!(
            app.store.payment_apply(&ca, &names, now),
            other.payment_apply(&cb, &names, now)
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(
            a.usage_active != b.usage_active,
            "card {r}: exactly one main package activates, the other waits queued: {a:?} {b:?}"
        );
    }
    let active: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM package_usages WHERE kind = 'main' AND status = 'active'",
    )
    .fetch_one(app.db.pool())
    .await
    .unwrap();
    assert_eq!(active, rounds as i64, "one active main package per card");
    app.assert_invariants().await;
}

#[test_util::lane(postgres)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_operator_s_manual_triggers_on_two_instances_at_once_never_exceed_the_daily_quota() {
    use card_polling::store::{ManualTriggerOutcome, ManualTriggerRequest};
    let app = spawn_with(super::helpers::Backend::Memory, |_| {}).await;
    let other = second_store(&app.settings, "other").await;
    let now = app.clock.now();
    let cards = 40;
    let quota = 25;
    import_cards(app.store.as_ref(), cards, now).await;
    let req = |c: usize| ManualTriggerRequest {
        operator: "quota-operator".into(),
        iccid: iccid(c),
        task_types: vec!["card_status".into()],
        daily_quota: quota,
    };
    let mut accepted = 0;
    for c in (0..cards).step_by(2) {
        let (ra, rb) = (req(c), req(c + 1));
        let (a, b) = tokio::join!(
            app.store.manual_trigger_request(&Scope::All, &ra, now),
            other.manual_trigger_request(&Scope::All, &rb, now)
        );
        for out in [a.unwrap(), b.unwrap()] {
            if matches!(out, ManualTriggerOutcome::Queued { .. }) {
                accepted += 1;
            }
        }
    }
    assert_eq!(accepted, quota, "accepted up to the quota, never beyond");
    let queued: i64 =
        sqlx::query_scalar("SELECT count(*) FROM manual_triggers WHERE status = 'queued'")
            .fetch_one(app.db.pool())
            .await
            .unwrap();
    assert_eq!(queued, i64::from(quota));
}

/// D-schedule-config-check with two real instances on one database: the second starts with other task types
/// and shards, its start-up sync rewrites the stored schedule configuration, and the first (still
/// running on its own values) reports the difference at its next check, in `/health`.
#[test_util::lane(postgres)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_instance_sees_the_schedule_configuration_a_later_instance_wrote() {
    use serde_json::json;

    let first = spawn_with(super::helpers::Backend::Memory, |_| {}).await;
    let check = first
        .schedule_config
        .run_once(first.clock.now())
        .await
        .unwrap();
    assert!(!check.differs, "{check:?}");
    let url = first.settings.db_url.clone();
    let second = spawn_with(super::helpers::Backend::Memory, |s| {
        s.db_url = url;
        s.task_types = TaskTypes::parse("card_status=120").unwrap();
        s.shards = 8;
    })
    .await;
    let check = first
        .schedule_config
        .run_once(first.clock.now())
        .await
        .unwrap();
    assert!(check.differs && check.warned, "{check:?}");
    let (s, v) = first.get("/health", ADMIN).await;
    assert_eq!(s, 200, "{v}");
    let cfg = &v["data"]["schedule_config"];
    assert_eq!(cfg["status"], "differs", "{v}");
    assert_eq!(
        cfg["stored"],
        json!({"shards": 8, "task_types": {"card_status": 120}})
    );
    assert_eq!(cfg["instance"]["shards"], first.settings.shards);
    // The later instance agrees with what it wrote.
    let check = second
        .schedule_config
        .run_once(second.clock.now())
        .await
        .unwrap();
    assert!(!check.differs, "{check:?}");
}
