//! The SQLite driver: WAL, `synchronous=FULL`, foreign keys on, writes in `BEGIN IMMEDIATE`
//! transactions. SQL stays close to portable (partial indexes, `ON CONFLICT … WHERE`,
//! `RETURNING`) so the PostgreSQL driver of a later issue can mirror it.
//!
//! Files: `domain.rs` (host domain), `enqueue.rs` (snapshot and enqueue-or-merge inside a business
//! transaction), `items.rs` (claim, attempts, finish, close, expire), `query.rs` (scoped reads),
//! `rows.rs` (row decoding).

mod domain;
mod enqueue;
mod items;
mod query;
mod rows;
mod schedule;

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool, Transaction};

use rakuten_types::Timestamp;

use super::*;
use crate::domain::account::Account;
use crate::domain::asset::{AssetRef, BindingRow};
use crate::domain::package::PackageKind;
use crate::domain::{Scope, TokenHash};
use crate::priority::item_status::ItemStatus;

/// The SQLite store.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    // `meta.feature_enabled_at` never changes once written: read it once.
    feature: std::sync::Arc<std::sync::OnceLock<Timestamp>>,
}

impl SqliteStore {
    /// Opens (creating if missing) the database file and runs the migrations.
    ///
    /// # Errors
    /// When the file cannot be opened or a migration fails.
    pub async fn open(path: &Path) -> Result<Self, sqlx::Error> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(sqlx::Error::Io)?;
        }
        let opts = SqliteConnectOptions::from_str("sqlite:")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(30));
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(opts)
            .await?;
        let migrator = sqlx::migrate::Migrator::new(Embedded)
            .await
            .map_err(|e| sqlx::Error::Migrate(Box::new(e)))?;
        migrator
            .run(&pool)
            .await
            .map_err(|e| sqlx::Error::Migrate(Box::new(e)))?;
        Ok(SqliteStore {
            pool,
            feature: Default::default(),
        })
    }

    /// The pool (benchmarks and test fixtures insert rows in any state through it).
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    async fn feature(&self) -> StoreResult<Timestamp> {
        if let Some(t) = self.feature.get() {
            return Ok(*t);
        }
        let t = rows::feature_enabled_at(&self.pool).await?;
        Ok(*self.feature.get_or_init(|| t))
    }

    async fn begin(&self) -> StoreResult<Transaction<'static, Sqlite>> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }
}

/// The migrations of `migrations/sqlite`, embedded in the binary (the workspace's sqlx has no
/// `macros` feature, so `sqlx::migrate!` is not available; this source is its equivalent).
#[derive(Debug)]
struct Embedded;

/// (version, description, SQL) of every migration, in order.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "initial",
        include_str!("../../../migrations/sqlite/0001_initial.sql"),
    ),
    (
        2,
        "scheduler",
        include_str!("../../../migrations/sqlite/0002_scheduler.sql"),
    ),
];

impl sqlx::migrate::MigrationSource<'static> for Embedded {
    fn resolve(
        self,
    ) -> futures::future::BoxFuture<
        'static,
        Result<Vec<sqlx::migrate::Migration>, sqlx::error::BoxDynError>,
    > {
        Box::pin(async move {
            Ok(MIGRATIONS
                .iter()
                .map(|(v, d, sql)| {
                    sqlx::migrate::Migration::new(
                        *v,
                        (*d).into(),
                        sqlx::migrate::MigrationType::Simple,
                        sqlx::SqlSafeStr::into_sql_str(*sql),
                        false,
                    )
                })
                .collect())
        })
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
    StoreError::Db(e)
}

pub(crate) use crate::store::common::t;

#[async_trait]
impl Store for SqliteStore {
    async fn item_counts(&self) -> StoreResult<Vec<(String, String, i64)>> {
        crate::store::observe::item_counts(&self.pool).await
    }

    async fn ping(&self) -> StoreResult<()> {
        crate::store::observe::ping(&self.pool).await
    }

    async fn meta_feature_enabled_at(&self, now: Timestamp) -> StoreResult<Timestamp> {
        sqlx::query(
            "INSERT INTO meta (key, value) VALUES ('feature_enabled_at', ?) ON CONFLICT (key) DO NOTHING",
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
        let mut tx = self.begin().await?;
        let counts = domain::import(&mut tx, batch, now).await?;
        tx.commit().await?;
        Ok(counts)
    }

    async fn order_create(
        &self,
        id: &str,
        asset: &AssetRef,
        kind: PackageKind,
        now: Timestamp,
    ) -> StoreResult<OrderView> {
        let mut tx = self.begin().await?;
        let v = domain::order_create(&mut tx, id, asset, kind, now).await?;
        tx.commit().await?;
        Ok(v)
    }

    async fn payment_apply(
        &self,
        cb: &PaymentCallback,
        task_types: &[String],
        now: Timestamp,
    ) -> StoreResult<PaymentOutcome> {
        let mut tx = self.begin().await?;
        let out = domain::payment_apply(&mut tx, cb, task_types, now).await?;
        tx.commit().await?;
        Ok(out)
    }

    async fn usage_activate_queued(
        &self,
        usage_id: &str,
        task_types: &[String],
        now: Timestamp,
    ) -> StoreResult<Vec<EnqueuedItem>> {
        let mut tx = self.begin().await?;
        let out = domain::usage_activate_queued(&mut tx, usage_id, task_types, now).await?;
        tx.commit().await?;
        Ok(out)
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
        let mut tx = self.begin().await?;
        let out = domain::package_poll_asset(&mut tx, asset, task_types, now).await?;
        tx.commit().await?;
        Ok(out)
    }

    async fn card_set_polling(&self, iccid: &str, enabled: bool) -> StoreResult<()> {
        domain::one_row(
            sqlx::query("UPDATE cards SET polling_enabled = ? WHERE iccid = ?")
                .bind(enabled)
                .bind(iccid)
                .execute(&self.pool)
                .await?,
        )
    }

    async fn device_set_polling(&self, device_no: &str, enabled: bool) -> StoreResult<()> {
        domain::one_row(
            sqlx::query("UPDATE devices SET polling_enabled = ? WHERE device_no = ?")
                .bind(enabled)
                .bind(device_no)
                .execute(&self.pool)
                .await?,
        )
    }

    async fn card_set_stop_lock(&self, iccid: &str, locked: bool) -> StoreResult<()> {
        domain::one_row(
            sqlx::query("UPDATE cards SET stop_locked = ? WHERE iccid = ?")
                .bind(locked)
                .bind(iccid)
                .execute(&self.pool)
                .await?,
        )
    }

    async fn card_delete(&self, iccid: &str) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        sqlx::query("DELETE FROM bindings WHERE iccid = ?")
            .bind(iccid)
            .execute(&mut *tx)
            .await?;
        domain::one_row(
            sqlx::query("DELETE FROM cards WHERE iccid = ?")
                .bind(iccid)
                .execute(&mut *tx)
                .await?,
        )?;
        tx.commit().await?;
        Ok(())
    }

    async fn binding_upsert(&self, b: &BindingRow) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        domain::binding_upsert(&mut tx, b).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn device_report_slot(&self, device_no: &str, iccid: Option<&str>) -> StoreResult<()> {
        domain::one_row(
            sqlx::query("UPDATE devices SET reported_slot_iccid = ? WHERE device_no = ?")
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
        let mut tx = self.begin().await?;
        let out = enqueue::manual(&mut tx, scope, asset, demand, now).await?;
        tx.commit().await?;
        Ok(out)
    }

    async fn item_retrigger(
        &self,
        scope: &Scope,
        item_id: i64,
        operator: &str,
        reason: &str,
        now: Timestamp,
    ) -> StoreResult<EnqueuedItem> {
        let mut tx = self.begin().await?;
        let out = enqueue::retrigger(&mut tx, scope, item_id, operator, reason, now).await?;
        tx.commit().await?;
        Ok(out)
    }

    async fn item_due(&self, now: Timestamp, limit: i64) -> StoreResult<Vec<i64>> {
        items::due(&self.pool, now, limit).await
    }

    async fn item_claim(
        &self,
        id: i64,
        token: &str,
        now: Timestamp,
        lease: Duration,
    ) -> StoreResult<Option<ClaimedItem>> {
        let mut tx = self.begin().await?;
        let out = items::claim(&mut tx, id, token, now, lease).await?;
        if out.is_some() {
            tx.commit().await?;
        }
        Ok(out)
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
        let mut tx = self.begin().await?;
        let out = items::finish(&mut tx, claim, finish, logs, now).await?;
        tx.commit().await?;
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
        let mut tx = self.begin().await?;
        items::close(&mut tx, scope, id, operator, reason, now).await?;
        tx.commit().await?;
        Ok(())
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
        let mut tx = self.begin().await?;
        let n = items::mark_expired(&mut tx, now, cutoff, batch).await?;
        tx.commit().await?;
        Ok(n)
    }

    async fn item_list(&self, scope: &Scope, filter: &ItemFilter) -> StoreResult<Vec<ItemView>> {
        query::list(&self.pool, self.feature().await?, scope, filter).await
    }

    async fn item_get(&self, scope: &Scope, id: i64) -> StoreResult<Option<ItemDetail>> {
        query::get(&self.pool, self.feature().await?, scope, id).await
    }

    async fn item_due_typed(&self, now: Timestamp, limit: i64) -> StoreResult<Vec<DueItem>> {
        schedule::item_due_typed(&self.pool, now, limit).await
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
        let mut tx = self.begin().await?;
        let out = schedule::take_due(&mut tx, task_type, interval, shards, per_shard, now).await?;
        tx.commit().await?;
        Ok(out)
    }

    async fn poll_record(&self, records: &[PollRecord]) -> StoreResult<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin().await?;
        schedule::record(&mut tx, records).await?;
        tx.commit().await?;
        Ok(())
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
        let mut tx = self.begin().await?;
        let out = schedule::manual_trigger_request(&mut tx, scope, req, now).await?;
        tx.commit().await?;
        Ok(out)
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
