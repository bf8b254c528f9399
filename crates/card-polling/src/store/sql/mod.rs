//! The one SQL implementation of [`Store`], written once for both engines. This folder is compiled
//! once per engine (by [`crate::store::sqlite`] and [`crate::store::postgres`], each naming its
//! sqlx driver `Db` and its [`crate::store::dialect`]); see D-pstore-1 for why not generics.
//!
//! SQL here is portable: `$n` placeholders (sqlx's SQLite driver binds `$n` by number, proven by
//! `tests/api/engine.rs`, `numbered_placeholders_bind_by_number_reused_and_out_of_order`),
//! `CAST(x AS …)`, subqueries with aliases. What the engines force apart comes from `dialect`: the write transaction, the item
//! select list, the active-binding literal, the schedule take, `greatest` and time differences.
//!
//! Files: `domain.rs` (host domain), `enqueue.rs` (snapshot and enqueue-or-merge inside a business
//! transaction), `items.rs` (claim, attempts, finish, close, expire), `observe.rs` (the `/metrics` counts and the
//! `/readyz` ping), `query.rs` (scoped reads), `retention.rs` (batch deletes of old history),
//! `rows.rs` (row reads), `schedule.rs` (ordinary polling schedule and manual triggers).

mod domain;
mod enqueue;
mod items;
mod observe;
mod query;
mod retention;
mod rows;
mod schedule;

use std::time::Duration;

use async_trait::async_trait;
use sqlx::Transaction;

use rakuten_types::Timestamp;

use super::{Db, dialect};
use crate::domain::account::Account;
use crate::domain::asset::{AssetRef, BindingRow};
use crate::domain::package::PackageKind;
use crate::domain::{Scope, TokenHash};
use crate::priority::item_status::ItemStatus;
use crate::store::common::{Embedded, MigrationFile};
use crate::store::*;

/// The engine's connection pool.
type Pool = sqlx::Pool<Db>;
/// A write transaction (see `dialect::begin_write`).
type Tx = Transaction<'static, Db>;
/// One connection.
type Conn = <Db as sqlx::Database>::Connection;
/// One result row.
type DbRow = <Db as sqlx::Database>::Row;
/// What an `execute` returns (rows affected).
type QueryResult = <Db as sqlx::Database>::QueryResult;

/// One write transaction around a call: `in_write_tx!(self, tx => f(&mut tx).await?)` begins
/// (`dialect::begin_write`), evaluates the call, commits, and returns `Ok` of its value. A run
/// that met a concurrent writer (PostgreSQL: deadlock, serialization failure, `StoreError::Raced`)
/// is rolled back and run again from its first read, a bounded number of times (D-pg-9,
/// `store::retry`); on SQLite that never happens.
macro_rules! in_write_tx {
    ($store:expr, $tx:ident => $call:expr) => {{
        let mut runs = 0;
        loop {
            let once: StoreResult<_> = async {
                let mut $tx = $store.begin().await?;
                let out = $call;
                $tx.commit().await?;
                StoreResult::Ok(out)
            }
            .await;
            match once {
                Err(e) if crate::store::retry::again(&e, &mut runs).await => continue,
                done => break done,
            }
        }
    }};
}

/// The store over one engine's pool.
#[derive(Debug, Clone)]
pub struct SqlStore {
    pool: Pool,
    // `meta.feature_enabled_at` never changes once written: read it once.
    feature: std::sync::Arc<std::sync::OnceLock<Timestamp>>,
    // Written as `actor` on the audit facts of system transitions (issue #14 item 6).
    instance: std::sync::Arc<str>,
    // Items this store set aside as undecodable since start (`/metrics`).
    set_aside: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl SqlStore {
    /// Applies `migrations` through `pool` (serialized between instances by sqlx's lock).
    pub(crate) async fn run_migrations(
        pool: &Pool,
        migrations: &'static [MigrationFile],
    ) -> Result<(), sqlx::Error> {
        let migrator = sqlx::migrate::Migrator::new(Embedded(migrations))
            .await
            .map_err(|e| sqlx::Error::Migrate(Box::new(e)))?;
        migrator
            .run(pool)
            .await
            .map_err(|e| sqlx::Error::Migrate(Box::new(e)))
    }

    /// A store over a pool whose database [`Self::run_migrations`] has brought up to date.
    pub(crate) fn from_migrated(pool: Pool) -> Self {
        SqlStore {
            pool,
            feature: Default::default(),
            instance: crate::instance::default_instance_id().into(),
            set_aside: Default::default(),
        }
    }

    /// This store with `id` as the acting instance of the system transitions it writes
    /// (`RAKUTEN_POLL_INSTANCE_ID`; [`crate::instance::default_instance_id`] until set).
    pub fn with_instance(mut self, id: &str) -> Self {
        self.instance = id.into();
        self
    }

    /// The acting instance id written on audit facts of system transitions.
    pub fn instance_id(&self) -> &str {
        &self.instance
    }

    /// The pool (benchmarks and test fixtures insert rows in any state through it).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    async fn feature(&self) -> StoreResult<Timestamp> {
        if let Some(t) = self.feature.get() {
            return Ok(*t);
        }
        let t = rows::feature_enabled_at(&self.pool).await?;
        Ok(*self.feature.get_or_init(|| t))
    }

    async fn begin(&self) -> StoreResult<Tx> {
        dialect::begin_write(&self.pool).await
    }
}

/// Maps constraint violations to typed errors.
pub(crate) fn map_constraint(e: sqlx::Error, what: &str) -> StoreError {
    if let Some(db) = e.as_database_error() {
        if db.is_unique_violation() {
            return StoreError::Conflict(format!("{what} already exists"));
        }
        if db.is_foreign_key_violation() {
            return StoreError::Invalid(format!("{what} refers to an unknown row"));
        }
        if db.is_check_violation() {
            return StoreError::Invalid(format!("{what} breaks a rule"));
        }
    }
    StoreError::from(e)
}

pub(crate) use crate::store::common::t;

#[async_trait]
impl Store for SqlStore {
    async fn item_counts(&self) -> StoreResult<Vec<(String, String, i64)>> {
        observe::item_counts(&self.pool).await
    }

    async fn ping(&self) -> StoreResult<()> {
        observe::ping(&self.pool).await
    }

    async fn queue_health(&self) -> StoreResult<crate::store::observe::QueueHealth> {
        observe::queue_health(&self.pool).await
    }

    async fn retention_prune(
        &self,
        table: PruneTable,
        cutoff: Timestamp,
        batch: i64,
    ) -> StoreResult<u64> {
        in_write_tx!(self, tx => retention::prune(&mut tx, table, cutoff, batch).await?)
    }

    async fn clock_offset_ms(&self, now: Timestamp) -> StoreResult<Option<i64>> {
        let Some(sql) = dialect::SHARED_CLOCK_MILLIS else {
            return Ok(None);
        };
        let db_ms: i64 = sqlx::query_scalar(sql).fetch_one(&self.pool).await?;
        Ok(Some(db_ms - now.as_millis()))
    }

    async fn meta_feature_enabled_at(&self, now: Timestamp) -> StoreResult<Timestamp> {
        sqlx::query(
            "INSERT INTO meta (key, value) VALUES ('feature_enabled_at', $1) ON CONFLICT (key) DO NOTHING",
        )
        .bind(t(now))
        .execute(&self.pool)
        .await?;
        rows::feature_enabled_at(&self.pool).await
    }

    async fn account_find_by_token(&self, hash: &TokenHash) -> StoreResult<Option<Account>> {
        domain::account_find_by_token(&self.pool, hash).await
    }

    async fn domain_import(
        &self,
        batch: &ImportBatch,
        now: Timestamp,
    ) -> StoreResult<ImportCounts> {
        in_write_tx!(self, tx => domain::import(&mut tx, batch, now).await?)
    }

    async fn order_create(
        &self,
        id: &str,
        asset: &AssetRef,
        kind: PackageKind,
        now: Timestamp,
    ) -> StoreResult<OrderView> {
        in_write_tx!(self, tx => domain::order_create(&mut tx, id, asset, kind, now).await?)
    }

    async fn payment_apply(
        &self,
        cb: &PaymentCallback,
        task_types: &[String],
        now: Timestamp,
    ) -> StoreResult<PaymentOutcome> {
        in_write_tx!(self, tx => domain::payment_apply(&mut tx, cb, task_types, now).await?)
    }

    async fn usage_activate_queued(
        &self,
        usage_id: &str,
        task_types: &[String],
        now: Timestamp,
    ) -> StoreResult<Vec<EnqueuedItem>> {
        in_write_tx!(self, tx => {
            domain::usage_activate_queued(&mut tx, usage_id, task_types, now).await?
        })
    }

    async fn package_poll_asset(
        &self,
        asset: &AssetRef,
        task_types: &[String],
        now: Timestamp,
    ) -> StoreResult<PackagePollOutcome> {
        {
            let mut conn = self.pool.acquire().await?;
            if let Some(out) = domain::package_poll_quiet(&mut conn, asset, now).await? {
                return Ok(out);
            }
        }
        in_write_tx!(self, tx => {
            domain::package_poll_asset(&mut tx, asset, task_types, now).await?
        })
    }

    async fn card_set_polling(&self, iccid: &str, enabled: bool) -> StoreResult<()> {
        domain::one_row(
            sqlx::query("UPDATE cards SET polling_enabled = $1 WHERE iccid = $2")
                .bind(enabled)
                .bind(iccid)
                .execute(&self.pool)
                .await?,
        )
    }

    async fn device_set_polling(&self, device_no: &str, enabled: bool) -> StoreResult<()> {
        domain::one_row(
            sqlx::query("UPDATE devices SET polling_enabled = $1 WHERE device_no = $2")
                .bind(enabled)
                .bind(device_no)
                .execute(&self.pool)
                .await?,
        )
    }

    async fn card_set_stop_lock(&self, iccid: &str, locked: bool) -> StoreResult<()> {
        domain::one_row(
            sqlx::query("UPDATE cards SET stop_locked = $1 WHERE iccid = $2")
                .bind(locked)
                .bind(iccid)
                .execute(&self.pool)
                .await?,
        )
    }

    async fn card_delete(&self, iccid: &str) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        sqlx::query("DELETE FROM bindings WHERE iccid = $1")
            .bind(iccid)
            .execute(&mut *tx)
            .await?;
        domain::one_row(
            sqlx::query("DELETE FROM cards WHERE iccid = $1")
                .bind(iccid)
                .execute(&mut *tx)
                .await?,
        )?;
        tx.commit().await?;
        Ok(())
    }

    async fn binding_upsert(&self, b: &BindingRow) -> StoreResult<()> {
        in_write_tx!(self, tx => domain::binding_upsert(&mut tx, b).await?)
    }

    async fn device_report_slot(&self, device_no: &str, iccid: Option<&str>) -> StoreResult<()> {
        domain::one_row(
            sqlx::query("UPDATE devices SET reported_slot_iccid = $1 WHERE device_no = $2")
                .bind(iccid)
                .bind(device_no)
                .execute(&self.pool)
                .await?,
        )
    }

    async fn item_enqueue_manual(
        &self,
        scope: &Scope,
        asset: &AssetRef,
        demand: &Demand,
        now: Timestamp,
    ) -> StoreResult<Vec<EnqueuedItem>> {
        in_write_tx!(self, tx => enqueue::manual(&mut tx, scope, asset, demand, now).await?)
    }

    async fn item_retrigger(
        &self,
        scope: &Scope,
        item_id: i64,
        operator: &str,
        reason: &str,
        now: Timestamp,
    ) -> StoreResult<EnqueuedItem> {
        in_write_tx!(self, tx => {
            enqueue::retrigger(&mut tx, scope, item_id, operator, reason, now).await?
        })
    }

    async fn item_due(&self, now: Timestamp, limit: i64) -> StoreResult<Vec<i64>> {
        let due = items::due(&self.pool, now, limit).await?;
        Ok(due.into_iter().map(|d| d.id).collect())
    }

    async fn item_claim(
        &self,
        id: i64,
        token: &str,
        now: Timestamp,
        lease: Duration,
    ) -> StoreResult<Option<ClaimedItem>> {
        // max(enqueued_at, feature_enabled_at) <= cutoff  ⇔  both are; the second is a constant.
        let feature = self.feature().await?;
        let cutoff = now.minus(crate::priority::VALIDITY);
        let expired_before = (feature <= cutoff).then_some(cutoff);
        let mut set_aside = 0;
        let claimed = in_write_tx!(self, tx => {
            items::claim(&mut tx, &self.instance, id, token, now, lease, expired_before, &mut set_aside)
                .await?
        })?;
        // Counted once committed.
        self.set_aside
            .fetch_add(set_aside, std::sync::atomic::Ordering::Relaxed);
        Ok(claimed)
    }

    fn items_set_aside(&self) -> u64 {
        self.set_aside.load(std::sync::atomic::Ordering::Relaxed)
    }

    async fn card_polling_scope(&self, iccid: &str) -> StoreResult<CardScope> {
        items::card_polling_scope(&self.pool, iccid).await
    }

    async fn item_begin_attempt(
        &self,
        claim: &ClaimedItem,
        now: Timestamp,
    ) -> StoreResult<ClaimedItem> {
        items::begin_attempt(&self.pool, claim, now).await
    }

    async fn item_finish(
        &self,
        claim: &ClaimedItem,
        finish: &Finish,
        logs: &[NewLog],
        now: Timestamp,
    ) -> StoreResult<ItemStatus> {
        let out: Option<ItemStatus> =
            in_write_tx!(self, tx => items::finish(&mut tx, &self.instance, claim, finish, logs, now).await?)?;
        out.ok_or(StoreError::ClaimLost)
    }

    async fn item_close(
        &self,
        scope: &Scope,
        id: i64,
        operator: &str,
        reason: &str,
        now: Timestamp,
    ) -> StoreResult<()> {
        in_write_tx!(self, tx => items::close(&mut tx, scope, id, operator, reason, now).await?)
    }

    async fn item_mark_expired(
        &self,
        now: Timestamp,
        validity: Duration,
        batch: i64,
    ) -> StoreResult<u64> {
        let feature = self.feature().await?;
        let cutoff = now.minus(validity);
        // max(enqueued_at, feature_enabled_at) <= cutoff  ⇔  both are; the second is a constant.
        if feature > cutoff {
            return Ok(0);
        }
        in_write_tx!(self, tx => items::mark_expired(&mut tx, &self.instance, now, cutoff, batch).await?)
    }

    async fn item_list(&self, scope: &Scope, filter: &ItemFilter) -> StoreResult<Vec<ItemView>> {
        query::list(&self.pool, self.feature().await?, scope, filter).await
    }

    async fn item_count(&self, scope: &Scope, filter: &ItemFilter) -> StoreResult<i64> {
        query::count(&self.pool, scope, filter).await
    }

    async fn item_get(&self, scope: &Scope, id: i64) -> StoreResult<Option<ItemDetail>> {
        query::get(&self.pool, self.feature().await?, scope, id).await
    }

    async fn item_due_typed(&self, now: Timestamp, limit: i64) -> StoreResult<Vec<DueItem>> {
        items::due(&self.pool, now, limit).await
    }

    async fn schedule_sync(
        &self,
        task_types: &crate::domain::TaskTypes,
        shards: u32,
        now: Timestamp,
    ) -> StoreResult<u64> {
        schedule::sync(&self.pool, task_types, shards, now).await
    }

    async fn schedule_take_due(
        &self,
        task_type: &str,
        interval: Duration,
        shards: &[u32],
        per_shard: i64,
        now: Timestamp,
    ) -> StoreResult<Vec<ShardBatch>> {
        in_write_tx!(self, tx => {
            schedule::take_due(&mut tx, task_type, interval, shards, per_shard, now).await?
        })
    }

    async fn poll_record(&self, records: &[PollRecord]) -> StoreResult<()> {
        if records.is_empty() {
            return Ok(());
        }
        in_write_tx!(self, tx => schedule::record(&mut tx, records).await?)
    }

    async fn card_package_asset(&self, iccid: &str) -> StoreResult<Option<AssetRef>> {
        schedule::card_package_asset(&self.pool, iccid).await
    }

    async fn manual_trigger_request(
        &self,
        scope: &Scope,
        req: &ManualTriggerRequest,
        now: Timestamp,
    ) -> StoreResult<ManualTriggerOutcome> {
        in_write_tx!(self, tx => schedule::manual_trigger_request(&mut tx, scope, req, now).await?)
    }

    async fn manual_trigger_queued(
        &self,
        task_type: &str,
        before: Timestamp,
        limit: i64,
    ) -> StoreResult<Vec<QueuedTrigger>> {
        schedule::manual_trigger_queued(&self.pool, task_type, before, limit).await
    }
}
