//! Store checks run unchanged against both drivers (`sqlite_*` on a temp file, `postgres_*` on a
//! fresh schema of `DATABASE_URL_TEST`, default `postgres://postgres@127.0.0.1:5432/test`): the
//! one active item per (card, task type) with merges and replays, exclusive claims and takeover
//! after a lapsed lease, the claim token guarding finish, validity expiry, the ordinary schedule,
//! retention of ended items, and concurrent enqueues and claims. PostgreSQL not answering fails
//! loudly.
//!
//! One concept past the usual length: the conformance suite every engine passes, kept in one file
//! so that a check cannot be added for one engine and missed for the other.

use std::sync::Arc;
use std::time::Duration;

use rakuten_types::{Clock, ManualClock, Timestamp};
use sqlx::Connection;
use test_util::PgSchema;

use crate::domain::asset::{AssetRef, AssetType, CardRow};
use crate::domain::{Scope, Shop, TaskTypes};
use crate::priority::item_status::ItemStatus;
use crate::priority::{TriggerType, VALIDITY};
use crate::store::postgres::PgStore;
use crate::store::sqlite::SqliteStore;
use crate::store::{
    Demand, EnqueueAction, Finish, ImportBatch, ItemFilter, NewLog, PollRecord, Store, StoreError,
};

struct Harness {
    store: Arc<dyn Store>,
    clock: ManualClock,
    raw: Raw,
    _dir: Option<tempfile::TempDir>,
    _schema: Option<PgSchema>,
}

impl Harness {
    async fn sqlite() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("cp.db")).await.unwrap();
        let raw = Raw::Sqlite(store.pool().clone());
        Harness::with(Arc::new(store), raw, Some(dir), None).await
    }

    async fn postgres() -> Harness {
        let schema = PgSchema::new().await;
        let store = PgStore::open(&schema.url).await.unwrap();
        let raw = Raw::Postgres(store.pool().clone());
        Harness::with(Arc::new(store), raw, None, Some(schema)).await
    }

    async fn with(
        store: Arc<dyn Store>,
        raw: Raw,
        dir: Option<tempfile::TempDir>,
        schema: Option<PgSchema>,
    ) -> Harness {
        let clock = ManualClock::at_fixed_date();
        store.meta_feature_enabled_at(clock.now()).await.unwrap();
        let batch = ImportBatch {
            shops: vec![Shop {
                id: "s1".into(),
                parent_id: None,
                name: "shop".into(),
            }],
            cards: (0..4)
                .map(|i| CardRow {
                    iccid: format!("8986{i:04}"),
                    shop_id: "s1".into(),
                    polling_enabled: true,
                    stop_locked: false,
                })
                .collect(),
            ..Default::default()
        };
        store.domain_import(&batch, clock.now()).await.unwrap();
        Harness {
            store,
            clock,
            raw,
            _dir: dir,
            _schema: schema,
        }
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    async fn enqueue(&self, iccid: &str, event: &str) -> EnqueueAction {
        let out = self
            .store
            .item_enqueue_manual(&Scope::All, &card(iccid), &demand(event), self.now())
            .await
            .unwrap();
        assert_eq!(out.len(), 1);
        out[0].action
    }

    async fn items(&self, iccid: &str) -> Vec<crate::store::ItemView> {
        self.store
            .item_list(
                &Scope::All,
                &ItemFilter {
                    iccid: Some(iccid.into()),
                    limit: 200,
                    ..Default::default()
                },
            )
            .await
            .unwrap()
    }
}

/// The engine's read pool, for rows the store's API does not show (what retention left behind).
enum Raw {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl Raw {
    /// `sql` (a `count(*)` with the one parameter `$1`) for `id`.
    async fn count(&self, sql: &'static str, id: i64) -> i64 {
        match self {
            Raw::Sqlite(p) => sqlx::query_scalar(sql).bind(id).fetch_one(p).await,
            Raw::Postgres(p) => sqlx::query_scalar(sql).bind(id).fetch_one(p).await,
        }
        .unwrap()
    }
}

fn card(iccid: &str) -> AssetRef {
    AssetRef {
        asset_type: AssetType::Card,
        asset_id: iccid.into(),
    }
}

fn demand(event: &str) -> Demand {
    Demand {
        trigger_type: TriggerType::ManualTrigger,
        source: format!("manual:{event}"),
        event_id: event.into(),
        operator: Some("alice".into()),
        reason: Some("check".into()),
        task_types: vec!["card_status".into()],
    }
}

const LEASE: Duration = Duration::from_secs(60);

macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(&super::Harness::sqlite().await).await;
                }
            )*
        }
        mod postgres {
            $(
                #[test_util::lane(postgres)]
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(&super::Harness::postgres().await).await;
                }
            )*
        }
    };
}

both!(
    enqueue_merges_into_the_one_active_item_and_replays_add_nothing,
    a_claim_is_exclusive_and_only_its_token_finishes_the_item,
    a_lapsed_claim_is_taken_over_and_the_old_token_is_refused,
    active_items_expire_after_their_validity,
    concurrent_enqueues_keep_one_active_item,
    concurrent_claims_grant_one_claimer,
    the_schedule_hands_each_due_card_out_once_per_interval,
    one_take_limits_each_shard_and_two_at_once_never_share_a_card,
    host_domain_payments_bindings_triggers_and_close,
    retention_prunes_an_item_ended_91_days_ago_with_its_sources_and_facts_and_keeps_younger_and_active_ones,
);

async fn enqueue_merges_into_the_one_active_item_and_replays_add_nothing(h: &Harness) {
    assert_eq!(h.enqueue("89860000", "e1").await, EnqueueAction::Created);
    assert_eq!(h.enqueue("89860000", "e2").await, EnqueueAction::Merged);
    assert_eq!(h.enqueue("89860000", "e1").await, EnqueueAction::Replayed);
    let items = h.items("89860000").await;
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].trigger_count, 2);
    assert_eq!(items[0].status, ItemStatus::Pending);
    assert_eq!(items[0].trigger_sources, ["manual:e1", "manual:e2"]);
    assert_eq!(items[0].agent_chain, ["s1"]);
    assert_eq!(items[0].valid_until, h.now().plus(VALIDITY));
}

async fn a_claim_is_exclusive_and_only_its_token_finishes_the_item(h: &Harness) {
    h.enqueue("89860001", "e1").await;
    let due = h.store.item_due(h.now(), 10).await.unwrap();
    assert_eq!(due.len(), 1);
    let id = due[0];
    let typed = h.store.item_due_typed(h.now(), 10).await.unwrap();
    assert_eq!(typed[0].task_type, "card_status");
    let a = h
        .store
        .item_claim(id, "tok-a", h.now(), LEASE)
        .await
        .unwrap()
        .expect("claimed");
    assert!(!a.took_over);
    assert!(
        h.store
            .item_claim(id, "tok-b", h.now(), LEASE)
            .await
            .unwrap()
            .is_none()
    );
    let a = h.store.item_begin_attempt(&a, h.now()).await.unwrap();
    assert_eq!(a.attempts, 1);
    let forged = crate::store::ClaimedItem {
        token: "tok-x".into(),
        ..a.clone()
    };
    let done = Finish::Completed {
        result: "ok".into(),
    };
    let lost = h.store.item_finish(&forged, &done, &[], h.now()).await;
    assert!(matches!(lost, Err(StoreError::ClaimLost)), "{lost:?}");
    h.clock.advance(Duration::from_millis(1500));
    let log = NewLog {
        operation: "poll".into(),
        request_summary: "iccid=89860001".into(),
        response_summary: "status=active".into(),
        latency_ms: 12,
        outcome: "ok".into(),
    };
    let status = h
        .store
        .item_finish(&a, &done, &[log], h.now())
        .await
        .unwrap();
    assert_eq!(status, ItemStatus::Completed);
    let detail = h.store.item_get(&Scope::All, id).await.unwrap().unwrap();
    assert_eq!(detail.item.duration_ms, Some(1500));
    assert_eq!(detail.logs.len(), 1);
    let kinds: Vec<_> = detail.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["enqueue", "claim", "complete"]);
    // The slot is free: the next demand creates a new item.
    assert_eq!(h.enqueue("89860001", "e2").await, EnqueueAction::Created);
}

async fn a_lapsed_claim_is_taken_over_and_the_old_token_is_refused(h: &Harness) {
    h.enqueue("89860002", "e1").await;
    let id = h.store.item_due(h.now(), 10).await.unwrap()[0];
    let a = h
        .store
        .item_claim(id, "tok-a", h.now(), LEASE)
        .await
        .unwrap()
        .unwrap();
    h.clock.advance(LEASE);
    assert_eq!(h.store.item_due(h.now(), 10).await.unwrap(), [id]);
    let b = h
        .store
        .item_claim(id, "tok-b", h.now(), LEASE)
        .await
        .unwrap()
        .unwrap();
    assert!(b.took_over);
    let done = Finish::Completed {
        result: "ok".into(),
    };
    let old = h.store.item_finish(&a, &done, &[], h.now()).await;
    assert!(matches!(old, Err(StoreError::ClaimLost)));
    assert_eq!(
        h.store.item_finish(&b, &done, &[], h.now()).await.unwrap(),
        ItemStatus::Completed
    );
}

async fn active_items_expire_after_their_validity(h: &Harness) {
    h.enqueue("89860003", "e1").await;
    h.clock.advance(VALIDITY - Duration::from_secs(1));
    assert_eq!(
        h.store
            .item_mark_expired(h.now(), VALIDITY, 100)
            .await
            .unwrap(),
        0
    );
    h.clock.advance(Duration::from_secs(1));
    assert_eq!(
        h.store
            .item_mark_expired(h.now(), VALIDITY, 100)
            .await
            .unwrap(),
        1
    );
    let items = h.items("89860003").await;
    assert_eq!(items[0].status, ItemStatus::Expired);
    assert!(items[0].dequeued_at.is_some());
    let again = h
        .store
        .item_retrigger(&Scope::All, items[0].id, "alice", "retry", h.now())
        .await
        .unwrap();
    assert_eq!(again.action, EnqueueAction::Created);
    assert_ne!(again.item_id, items[0].id);
}

async fn concurrent_enqueues_keep_one_active_item(h: &Harness) {
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (store, now) = (h.store.clone(), h.now());
        tasks.push(tokio::spawn(async move {
            store
                .item_enqueue_manual(
                    &Scope::All,
                    &card("89860000"),
                    &demand(&format!("c{i}")),
                    now,
                )
                .await
                .unwrap()
        }));
    }
    let mut created = 0;
    for t in tasks {
        if t.await.unwrap()[0].action == EnqueueAction::Created {
            created += 1;
        }
    }
    assert_eq!(created, 1);
    let items = h.items("89860000").await;
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].trigger_count, 8);
}

async fn concurrent_claims_grant_one_claimer(h: &Harness) {
    h.enqueue("89860000", "e1").await;
    let id = h.store.item_due(h.now(), 10).await.unwrap()[0];
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (store, now) = (h.store.clone(), h.now());
        tasks.push(tokio::spawn(async move {
            store
                .item_claim(id, &format!("tok-{i}"), now, LEASE)
                .await
                .unwrap()
        }));
    }
    let mut won = 0;
    for t in tasks {
        won += usize::from(t.await.unwrap().is_some());
    }
    assert_eq!(won, 1);
}

async fn the_schedule_hands_each_due_card_out_once_per_interval(h: &Harness) {
    use crate::domain::asset::{BindingRow, DeviceRow};
    use crate::store::CardScope;

    let types = TaskTypes::parse("card_status=300").unwrap();
    h.store.schedule_sync(&types, 2, h.now()).await.unwrap();
    // Every scope the take reports (D-ordinary-scope-read-by-take): 0 in scope, 1 polling off, 2 stop-locked,
    // 3 bound to a device whose polling is off.
    h.store
        .domain_import(
            &ImportBatch {
                devices: vec![DeviceRow {
                    device_no: "dev-off".into(),
                    shop_id: "s1".into(),
                    polling_enabled: true,
                    reported_slot_iccid: None,
                }],
                bindings: vec![BindingRow {
                    device_no: "dev-off".into(),
                    iccid: "89860003".into(),
                    active: true,
                }],
                ..Default::default()
            },
            h.now(),
        )
        .await
        .unwrap();
    h.store.card_set_polling("89860001", false).await.unwrap();
    h.store.card_set_stop_lock("89860002", true).await.unwrap();
    h.store.device_set_polling("dev-off", false).await.unwrap();
    h.clock.advance(Duration::from_secs(300));
    let interval = Duration::from_secs(300);
    let got = h
        .store
        .schedule_take_due("card_status", interval, &[0, 1], 100, h.now())
        .await
        .unwrap();
    let mut all: Vec<(String, CardScope)> = got.iter().flat_map(|b| b.cards.clone()).collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    let expected = [
        ("89860000", CardScope::InScope { stop_locked: false }),
        ("89860001", CardScope::CardPollingOff),
        ("89860002", CardScope::InScope { stop_locked: true }),
        ("89860003", CardScope::DevicePollingOff),
    ];
    assert_eq!(
        all,
        expected.clone().map(|(i, s)| (i.to_owned(), s)),
        "the take's scopes"
    );
    // The same scopes as the per-card read, which also knows a card that does not exist.
    for (iccid, scope) in expected {
        assert_eq!(h.store.card_polling_scope(iccid).await.unwrap(), scope);
    }
    assert_eq!(
        h.store.card_polling_scope("89869999").await.unwrap(),
        CardScope::Missing
    );
    let again = h
        .store
        .schedule_take_due("card_status", interval, &[0, 1], 100, h.now())
        .await
        .unwrap();
    assert!(again.iter().all(|b| b.cards.is_empty()));
    h.store
        .poll_record(&[PollRecord {
            iccid: "89860000".into(),
            task_type: "card_status".into(),
            manual_trigger_id: None,
            result: "ok".into(),
            logs: vec![],
            at: h.now(),
            next_poll_at: h.now().plus(interval),
        }])
        .await
        .unwrap();
    let state = h
        .store
        .card_package_state("89860000", h.now())
        .await
        .unwrap()
        .expect("the card exists");
    assert_eq!(state.asset, card("89860000"));
    assert!(!state.valid_main && !state.pending_usage && !state.lapsed_usage);
    assert!(!state.needs_write());
    assert_eq!(
        h.store
            .card_package_state("89869999", h.now())
            .await
            .unwrap(),
        None
    );
}

async fn host_domain_payments_bindings_triggers_and_close(h: &Harness) {
    use crate::domain::TokenHash;
    use crate::domain::account::Role;
    use crate::domain::asset::{BindingRow, DeviceRow};
    use crate::domain::package::{OrderStatus, PackageKind, PaymentStatus};
    use crate::store::{
        AccountImport, CardScope, ManualTriggerOutcome, ManualTriggerRequest, PaymentCallback,
    };

    // Accounts and devices.
    let batch = ImportBatch {
        accounts: vec![AccountImport {
            id: "ops".into(),
            role: Role::Platform,
            shop_id: None,
            token: "ops-token-0123456789".into(),
            perm_manual_trigger: true,
            perm_card_data: false,
        }],
        devices: vec![DeviceRow {
            device_no: "D1".into(),
            shop_id: "s1".into(),
            polling_enabled: true,
            reported_slot_iccid: None,
        }],
        ..Default::default()
    };
    h.store.domain_import(&batch, h.now()).await.unwrap();
    let acc = h
        .store
        .account_find_by_token(&TokenHash::of("ops-token-0123456789"))
        .await
        .unwrap()
        .expect("account");
    assert_eq!(acc.id, "ops");
    assert!(acc.perm_manual_trigger && !acc.perm_card_data);
    h.store
        .binding_upsert(&BindingRow {
            device_no: "D1".into(),
            iccid: "89860000".into(),
            active: true,
        })
        .await
        .unwrap();
    assert_eq!(
        h.store.card_polling_scope("89860000").await.unwrap(),
        CardScope::InScope { stop_locked: false }
    );
    h.store.device_set_polling("D1", false).await.unwrap();
    assert_eq!(
        h.store.card_polling_scope("89860000").await.unwrap(),
        CardScope::DevicePollingOff
    );
    h.store.card_set_stop_lock("89860001", true).await.unwrap();
    assert_eq!(
        h.store.card_polling_scope("89860001").await.unwrap(),
        CardScope::InScope { stop_locked: true }
    );
    h.store
        .device_report_slot("D1", Some("89860000"))
        .await
        .unwrap();

    // A paid main package on a card: a usage record and items in the same transaction.
    let order = h
        .store
        .order_create("O1", &card("89860002"), PackageKind::Main, h.now())
        .await
        .unwrap();
    assert_eq!(order.status, OrderStatus::Unpaid);
    let types = vec!["card_status".to_owned(), "package".to_owned()];
    let cb = PaymentCallback {
        payment_id: "P1".into(),
        order_id: "O1".into(),
        status: PaymentStatus::Paid,
    };
    let paid = h.store.payment_apply(&cb, &types, h.now()).await.unwrap();
    assert_eq!(paid.status, OrderStatus::Paid);
    assert!(!paid.replayed && paid.usage_active);
    assert_eq!(paid.items.len(), 2);
    let again = h.store.payment_apply(&cb, &types, h.now()).await.unwrap();
    assert!(again.replayed);
    let poll = h
        .store
        .package_poll_asset(&card("89860002"), &types, h.now())
        .await
        .unwrap();
    assert!(!poll.no_valid_package);

    // Ordinary manual triggers: quota, 24 h dedupe, recovery read.
    let req = ManualTriggerRequest {
        operator: "ops".into(),
        iccid: "89860003".into(),
        task_types: vec!["card_status".into()],
        daily_quota: 5,
    };
    match h
        .store
        .manual_trigger_request(&Scope::All, &req, h.now())
        .await
        .unwrap()
    {
        ManualTriggerOutcome::Queued { triggers } => assert_eq!(triggers.len(), 1),
        o => panic!("{o:?}"),
    }
    assert!(matches!(
        h.store
            .manual_trigger_request(&Scope::All, &req, h.now())
            .await
            .unwrap(),
        ManualTriggerOutcome::Duplicate { .. }
    ));
    let queued = h
        .store
        .manual_trigger_queued("card_status", h.now(), 10)
        .await
        .unwrap();
    assert_eq!(queued.len(), 1);

    // Close an active item; out of scope is not found.
    let id = paid.items[0].item_id;
    let other = Scope::ShopTree("nope".into());
    assert!(matches!(
        h.store.item_close(&other, id, "ops", "why", h.now()).await,
        Err(StoreError::NotFound)
    ));
    h.store
        .item_close(&Scope::All, id, "ops", "done by hand", h.now())
        .await
        .unwrap();
    let d = h.store.item_get(&Scope::All, id).await.unwrap().unwrap();
    assert_eq!(d.item.status, ItemStatus::Closed);
    assert_eq!(d.item.closed_by.as_deref(), Some("ops"));

    // Deleting a card keeps its items.
    h.store.card_delete("89860002").await.unwrap();
    assert_eq!(
        h.store.card_polling_scope("89860002").await.unwrap(),
        CardScope::Missing
    );
    assert!(h.store.item_get(&Scope::All, id).await.unwrap().is_some());
    assert!(matches!(
        h.store.card_delete("89860002").await,
        Err(StoreError::NotFound)
    ));
}

/// The server process id of the session `conn`.
async fn backend_pid(conn: &mut sqlx::PgConnection) -> i32 {
    sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(conn)
        .await
        .unwrap()
}

/// Waits until a session waits for a lock the session `holder` holds.
async fn wait_until_blocked_by(holder: i32, what: &str) {
    let mut c = sqlx::PgConnection::connect(&test_util::pg::base_url())
        .await
        .unwrap();
    test_util::wait_until(what, Duration::from_secs(30), async || {
        sqlx::query_scalar::<_, bool>(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid)))",
        )
        .bind(holder)
        .fetch_one(&mut c)
        .await
        .unwrap()
    })
    .await;
    let _ = c.close().await;
}

/// CI failure: an instance started with a 0.3 s request lock timeout while another session held
/// the migration table; `lock_timeout` cancelled its migration and start-up failed. Migrations now
/// wait on their own session; only requests are bounded.
#[test_util::lane(postgres)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_waits_for_another_instances_migration_past_the_request_lock_timeout() {
    let schema = PgSchema::new().await;
    drop(PgStore::open(&schema.url).await.unwrap());
    let mut other = sqlx::PgConnection::connect(&schema.url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut other).await.unwrap();
    sqlx::query("LOCK TABLE _sqlx_migrations IN ACCESS EXCLUSIVE MODE")
        .execute(&mut other)
        .await
        .unwrap();
    let url = schema.url.clone();
    let opening =
        tokio::spawn(async move { PgStore::open_with(&url, Duration::from_millis(300)).await });
    let holder = backend_pid(&mut other).await;
    wait_until_blocked_by(holder, "the migration to wait for the lock").await;
    // A real delay, the behaviour under test: the migration keeps waiting past the 300 ms request
    // lock timeout (the old start-up had failed by now).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!opening.is_finished(), "start-up did not wait for the lock");
    sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();
    let store = tokio::time::timeout(Duration::from_secs(60), opening)
        .await
        .expect("start-up ends once the lock is gone")
        .unwrap();
    assert!(store.is_ok(), "{:?}", store.err());
}

/// D-package-poll-verdict: a package poll writes only when it has something to change.
#[test]
fn a_package_poll_writes_only_for_a_lapsed_usage_or_a_waiting_one_without_a_valid_main() {
    use crate::store::PackageState;
    let state = |lapsed_usage, valid_main, pending_usage| PackageState {
        asset: card("89860000"),
        lapsed_usage,
        valid_main,
        pending_usage,
    };
    // (lapsed, valid main, pending) → needs the write transition
    for (l, v, p, write) in [
        (false, true, false, false),
        (false, true, true, false),
        (false, false, false, false),
        (false, false, true, true),
        (true, true, false, true),
        (true, false, false, true),
    ] {
        assert_eq!(state(l, v, p).needs_write(), write, "{l} {v} {p}");
    }
}

/// The take is one statement for all the shards asked for (D-schedule-take-one-statement): each shard gets at most
/// its share, every card comes back in its own shard's batch, the batches in the order asked, a
/// shard not asked for is left alone; and two takes at once (two connections on PostgreSQL, where
/// `SKIP LOCKED` decides) never hand out one card twice, and together hand out every due card.
async fn one_take_limits_each_shard_and_two_at_once_never_share_a_card(h: &Harness) {
    use crate::scheduler::shard_queue::shard_of;

    const SHARDS: u32 = 4;
    let cards: Vec<String> = (100..160).map(|i| format!("8986{i:04}")).collect();
    h.store
        .domain_import(
            &ImportBatch {
                cards: cards
                    .iter()
                    .map(|iccid| CardRow {
                        iccid: iccid.clone(),
                        shop_id: "s1".into(),
                        polling_enabled: true,
                        stop_locked: false,
                    })
                    .collect(),
                ..Default::default()
            },
            h.now(),
        )
        .await
        .unwrap();
    let types = TaskTypes::parse("card_status=300").unwrap();
    h.store
        .schedule_sync(&types, SHARDS, h.now())
        .await
        .unwrap();
    h.clock.advance(Duration::from_secs(300));
    let interval = Duration::from_secs(300);
    let per_shard = |shard: u32| {
        (0..4)
            .map(|i| format!("8986{i:04}"))
            .chain(cards.iter().cloned())
            .filter(|c| shard_of(c, SHARDS) == shard)
            .count()
    };
    assert!(
        (0..SHARDS).all(|s| per_shard(s) > 3),
        "every shard holds more than one share"
    );

    let got = h
        .store
        .schedule_take_due("card_status", interval, &[2, 0], 3, h.now())
        .await
        .unwrap();
    assert_eq!(got.iter().map(|b| b.shard).collect::<Vec<_>>(), [2, 0]);
    for b in &got {
        assert_eq!(b.cards.len(), 3, "shard {}: {b:?}", b.shard);
        assert!(
            b.cards.iter().all(|(c, _)| shard_of(c, SHARDS) == b.shard),
            "{b:?}"
        );
    }

    // The rest of every shard, by two takers at once.
    let all = [0, 1, 2, 3];
    let (a, b) = futures::join!(
        h.store
            .schedule_take_due("card_status", interval, &all, 1000, h.now()),
        h.store
            .schedule_take_due("card_status", interval, &all, 1000, h.now()),
    );
    let mut seen: Vec<String> = got
        .iter()
        .chain(a.unwrap().iter())
        .chain(b.unwrap().iter())
        .flat_map(|b| b.cards.iter().map(|(c, _)| c.clone()))
        .collect();
    let handed_out = seen.len();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), handed_out, "a card was handed out twice");
    assert_eq!(seen.len(), 4 + cards.len(), "every due card was handed out");
}

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
