//! Store checks run unchanged against both drivers (`sqlite_*` on a temp file, `postgres_*` on a
//! fresh schema of `DATABASE_URL_TEST`, default `postgres://postgres@127.0.0.1:5432/test`): the
//! one active item per (card, task type) with merges and replays, exclusive claims and takeover
//! after a lapsed lease, the claim token guarding finish, validity expiry, the ordinary schedule,
//! retention of ended items, and concurrent enqueues and claims. PostgreSQL not answering fails
//! loudly.
//!
//! This file: the harness (a store on either engine with a manual clock and a raw pool), the
//! shared fixtures, the PostgreSQL lock-wait helpers and `both!`, which every check file calls
//! with its checks so that a check cannot be added for one engine and missed for the other. One
//! file per capability: `items.rs` (enqueue, claim, finish, expiry), `schedule.rs` (the ordinary
//! schedule's take), `domain.rs` (host domain, package polls), `retention.rs`, `startup.rs`
//! (opening beside another instance's migration).

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

/// Runs each named check, an `async fn(&Harness)` of the calling file, once per engine: as
/// `sqlite::<name>` and as `postgres::<name>` in the `postgres` lane.
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

mod domain;
mod items;
mod retention;
mod schedule;
mod startup;
