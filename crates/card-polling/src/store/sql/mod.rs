//! The one SQL implementation of [`Store`], written once for both engines. This folder is compiled
//! once per engine (by [`crate::store::sqlite`] and [`crate::store::postgres`], each naming its
//! sqlx driver `Db` and its [`crate::store::dialect`]); see D-one-sql-store-per-engine for why not generics.
//!
//! SQL here is portable: `$n` placeholders (sqlx's SQLite driver binds `$n` by number, proven by
//! `tests/api/engine.rs`, `numbered_placeholders_bind_by_number_reused_and_out_of_order`),
//! `CAST(x AS …)`, subqueries with aliases. What the engines force apart comes from `dialect`: the write path, the item
//! select list, the active-binding literal, the schedule take, `greatest` and time differences.
//!
//! Writes: every method that changes state hands ONE function of the write connection and its
//! owned arguments to `dialect::Writer::write` ([`SqlStore::write`]): on SQLite the group-commit
//! writer runs it inside a SAVEPOINT of a batch transaction, on PostgreSQL it is its own
//! transaction (D-sqlite-writer-group-commit). Reads go to the read pool ([`SqlStore::pool`]), never the writer.
//!
//! Files: `bulk.rs` (multi-row card import), `domain.rs` (host domain), `enqueue.rs` (snapshot and enqueue-or-merge inside a business
//! transaction), `items.rs` (claim, attempts, finish, close, expire), `observe.rs` (the `/metrics` counts and the
//! `/readyz` ping), `query.rs` (scoped reads), `retention.rs` (batch deletes of old history),
//! `rows.rs` (row reads), `schedule.rs` (ordinary polling schedule and manual triggers).

mod bulk;
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
use futures::FutureExt;

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
/// One connection.
type Conn = <Db as sqlx::Database>::Connection;
/// One result row.
type DbRow = <Db as sqlx::Database>::Row;
/// What an `execute` returns (rows affected).
type QueryResult = <Db as sqlx::Database>::QueryResult;

/// Rows of one import that go to the writer as one operation (one transaction on PostgreSQL):
/// an import up to this size stays all-or-nothing; a larger one streams in parts of this many
/// cards, devices or bindings, each committed on its own (D-import-in-parts). About a second of the writer's
/// time per part at full scale, so other writes wait at most that long behind an import.
pub(crate) const IMPORT_PART: usize = 10_000;

/// The store over one engine's pools and write path.
#[derive(Debug, Clone)]
pub struct SqlStore {
    // Reads (on SQLite `query_only` connections; on PostgreSQL the one pool).
    pool: Pool,
    // Test fixtures and benchmarks write rows in any state through it; the store never does.
    fixtures: Pool,
    // Every write of the store (`dialect::Writer`).
    writer: std::sync::Arc<dialect::Writer>,
    // `meta.feature_enabled_at` never changes once written: read it once.
    feature: std::sync::Arc<std::sync::OnceLock<Timestamp>>,
    // Written as `actor` on the audit facts of system transitions.
    instance: std::sync::Arc<str>,
    // Items this store set aside as undecodable since start (`/metrics`).
    set_aside: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl SqlStore {
    /// Applies `migrations` through `pool` (serialized between instances by sqlx's lock), each
    /// one in `released` with the checksum of its text as released.
    pub(crate) async fn run_migrations(
        pool: &Pool,
        migrations: &'static [MigrationFile],
        released: &'static [rakuten_cli::migrations::Released],
    ) -> Result<(), sqlx::Error> {
        let migrator = sqlx::migrate::Migrator::new(Embedded(migrations, released))
            .await
            .map_err(|e| sqlx::Error::Migrate(Box::new(e)))?;
        migrator
            .run(pool)
            .await
            .map_err(|e| sqlx::Error::Migrate(Box::new(e)))
    }

    /// A store over a database [`Self::run_migrations`] has brought up to date: `read` for its
    /// reads, `fixtures` for [`Self::fixture_pool`], `writer` for every write.
    pub(crate) fn from_parts(read: Pool, fixtures: Pool, writer: dialect::Writer) -> Self {
        SqlStore {
            pool: read,
            fixtures,
            writer: std::sync::Arc::new(writer),
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

    /// The pool the store reads through (on SQLite its connections are `query_only`). Closing it
    /// makes the database unreachable for `/readyz` and `/health`.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// A pool that may write, for test fixtures and benchmarks inserting rows in any state (the
    /// store itself writes only through its writer; on PostgreSQL this is the one pool).
    pub fn fixture_pool(&self) -> &Pool {
        &self.fixtures
    }

    /// Observes each commit of the SQLite group-commit writer (writes in it, `BEGIN` to the end
    /// of `COMMIT`): the `/metrics` histograms `cardpoll_writer_batch_ops` and
    /// `cardpoll_writer_commit_seconds`. Only the first hook set is kept; nothing on PostgreSQL.
    pub fn on_commit(&self, hook: sqlite_writer::CommitHook) {
        self.writer.on_commit(hook);
    }

    /// `(commits, operations)` of the SQLite group-commit writer so far (`(0, 0)` on
    /// PostgreSQL, where each write is its own commit): operations per commit = per fsync.
    pub fn write_stats(&self) -> (u64, u64) {
        self.writer.stats()
    }

    /// Stops the store at service stop: the writer drains what is queued and commits it, then
    /// the pools close. Every later call fails with [`StoreError::Closed`] (HTTP 503), none
    /// hangs. Idempotent.
    pub async fn shutdown(&self) {
        self.writer.shutdown().await;
        self.pool.close().await;
        self.fixtures.close().await;
    }

    /// Runs `op(conn, &args)` on the engine's write path (`dialect::Writer::write`): on SQLite
    /// in the group-commit writer's next batch, answered after its commit; on PostgreSQL in a
    /// transaction of its own.
    async fn write<A, T>(&self, args: A, op: dialect::WriteFn<A, T>) -> StoreResult<T>
    where
        A: Send + Sync + 'static,
        T: Send + 'static,
    {
        self.writer.write(args, op).await
    }

    /// One switch of one row: `sql` binds the flag as `$1` and the row's key as `$2`; no row is
    /// `NotFound`.
    async fn set_flag(&self, sql: &'static str, key: &str, value: bool) -> StoreResult<()> {
        self.write((sql, key.to_owned(), value), |c, (sql, key, value)| {
            async move {
                domain::one_row(
                    sqlx::query(*sql)
                        .bind(*value)
                        .bind(key.as_str())
                        .execute(&mut *c)
                        .await?,
                )
            }
            .boxed()
        })
        .await
    }

    async fn feature(&self) -> StoreResult<Timestamp> {
        if let Some(t) = self.feature.get() {
            return Ok(*t);
        }
        let t = rows::feature_enabled_at(&self.pool).await?;
        Ok(*self.feature.get_or_init(|| t))
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

/// [`map_constraint`] for an insert whose one foreign key is its shop: a violation names the shop
/// `shop_id`, which is neither stored nor earlier in the import ("card refers to an unknown
/// row" would leave the caller to guess which).
pub(crate) fn map_insert_with_shop(e: sqlx::Error, what: &str, shop_id: &str) -> StoreError {
    if e.as_database_error()
        .is_some_and(|db| db.is_foreign_key_violation())
    {
        return StoreError::Invalid(format!("{what}'s shop {shop_id} is unknown"));
    }
    map_constraint(e, what)
}

/// The parameter list `$1, $2, …, $n` of an `IN (…)` over `n` bound values.
pub(crate) fn placeholders(n: usize) -> String {
    (1..=n)
        .map(|k| format!("${k}"))
        .collect::<Vec<_>>()
        .join(", ")
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

    fn writes_failing(&self) -> bool {
        self.writer.failing()
    }

    async fn queue_health(&self) -> StoreResult<crate::store::observe::QueueHealth> {
        observe::queue_health(&self.pool).await
    }

    async fn shutdown(&self) {
        SqlStore::shutdown(self).await;
    }

    async fn retention_prune(
        &self,
        table: PruneTable,
        cutoff: Timestamp,
        batch: i64,
    ) -> StoreResult<u64> {
        self.write((table, cutoff, batch), |c, (table, cutoff, batch)| {
            retention::prune(c, *table, *cutoff, *batch).boxed()
        })
        .await
    }

    async fn clock_offset_ms(&self, now: Timestamp) -> StoreResult<Option<i64>> {
        let Some(sql) = dialect::SHARED_CLOCK_MILLIS else {
            return Ok(None);
        };
        let db_ms: i64 = sqlx::query_scalar(sql).fetch_one(&self.pool).await?;
        Ok(Some(db_ms - now.as_millis()))
    }

    fn clock_shared(&self) -> bool {
        dialect::SHARED_CLOCK_MILLIS.is_some()
    }

    async fn meta_feature_enabled_at(&self, now: Timestamp) -> StoreResult<Timestamp> {
        self.write(t(now), |c, now| {
            async move {
                sqlx::query(
                    "INSERT INTO meta (key, value) VALUES ('feature_enabled_at', $1) ON CONFLICT (key) DO NOTHING",
                )
                .bind(now.as_str())
                .execute(&mut *c)
                .await?;
                Ok(())
            }
            .boxed()
        })
        .await?;
        rows::feature_enabled_at(&self.pool).await
    }

    async fn account_find_by_token(&self, hash: &TokenHash) -> StoreResult<Option<Account>> {
        domain::account_find_by_token(&self.pool, hash).await
    }

    async fn account_get(&self, id: &str) -> StoreResult<Option<AccountRecord>> {
        domain::account_get(&self.pool, id).await
    }

    async fn account_set_token(
        &self,
        id: &str,
        token: &TokenHash,
        now: Timestamp,
    ) -> StoreResult<()> {
        self.write(
            (id.to_owned(), token.0.to_vec(), now),
            |c, (id, token, now)| domain::account_set_token(c, id, token, *now).boxed(),
        )
        .await
    }

    async fn account_revoke(&self, id: &str, now: Timestamp) -> StoreResult<()> {
        self.write((id.to_owned(), now), |c, (id, now)| {
            domain::account_revoke(c, id, *now).boxed()
        })
        .await
    }

    async fn domain_import_with(
        &self,
        batch: &ImportBatch,
        existing: ImportExisting,
        now: Timestamp,
    ) -> StoreResult<ImportCounts> {
        let parts = import_parts(batch);
        if parts.len() > 1 {
            // Before the first part commits: a row whose shop, device or card is unknown would
            // otherwise be found only in its own part, after 10,000 rows are stored (helpers 48
            // and 49).
            domain::references_known(&self.pool, batch).await?;
        }
        let mut total = ImportCounts::default();
        for (part, base) in parts {
            let cards_only = part.shops.is_empty()
                && part.accounts.is_empty()
                && part.devices.is_empty()
                && part.bindings.is_empty();
            let bulk = if cards_only {
                self.write((part.clone(), now), |c, (part, now)| {
                    async move {
                        // As `domain::import`: the sync cannot change the configuration before
                        // this part's schedule rows commit (D-poll-postgres-concurrent-writes; no-op on SQLite).
                        if let Some(lock) = dialect::SCHEDULE_CONFIG_READ_LOCK {
                            sqlx::query(lock).execute(&mut *c).await?;
                        }
                        let schedule = schedule::schedule_config(c).await?;
                        let cards = bulk::cards(c, &part.cards, schedule.as_ref(), *now).await?;
                        Ok(ImportCounts {
                            cards,
                            ..ImportCounts::default()
                        })
                    }
                    .boxed()
                })
                .await
                .map(Some)
            } else {
                Ok(None)
            };
            let n = match bulk {
                Ok(Some(n)) => n,
                // A multi-row statement cannot say which row it refused: the part again, one row
                // at a time, names it (D-import-refusals-name-the-row), or skips the rows already stored
                // (D-import-existing-skip). Only a refused or resent import pays for this.
                Ok(None) | Err(StoreError::Conflict(_) | StoreError::Invalid(_)) => self
                    .write((part, base, existing, now), |c, (part, base, existing, now)| {
                        domain::import(c, part, base, *existing, *now).boxed()
                    })
                    .await
                    .map_err(|e| e.after_committed(&total))?,
                Err(e) => return Err(e.after_committed(&total)),
            };
            total.add(&n);
        }
        Ok(total)
    }

    async fn order_create(
        &self,
        id: &str,
        asset: &AssetRef,
        kind: PackageKind,
        now: Timestamp,
    ) -> StoreResult<OrderView> {
        self.write(
            (id.to_owned(), asset.clone(), kind, now),
            |c, (id, asset, kind, now)| domain::order_create(c, id, asset, *kind, *now).boxed(),
        )
        .await
    }

    async fn payment_apply(
        &self,
        cb: &PaymentCallback,
        task_types: &[String],
        now: Timestamp,
    ) -> StoreResult<PaymentOutcome> {
        self.write(
            (cb.clone(), task_types.to_vec(), now),
            |c, (cb, task_types, now)| domain::payment_apply(c, cb, task_types, *now).boxed(),
        )
        .await
    }

    async fn usage_activate_queued(
        &self,
        usage_id: &str,
        task_types: &[String],
        now: Timestamp,
    ) -> StoreResult<Vec<EnqueuedItem>> {
        self.write(
            (usage_id.to_owned(), task_types.to_vec(), now),
            |c, (usage_id, task_types, now)| {
                domain::usage_activate_queued(c, usage_id, task_types, *now).boxed()
            },
        )
        .await
    }

    async fn package_poll_asset(
        &self,
        asset: &AssetRef,
        task_types: &[String],
        now: Timestamp,
    ) -> StoreResult<PackagePollOutcome> {
        {
            // Most cards have nothing to change: decided on a read connection, no write at all.
            let mut conn = self.pool.acquire().await?;
            if let Some(out) = domain::package_poll_quiet(&mut conn, asset, now).await? {
                return Ok(out);
            }
        }
        self.write(
            (asset.clone(), task_types.to_vec(), now),
            |c, (asset, task_types, now)| {
                domain::package_poll_asset(c, asset, task_types, *now).boxed()
            },
        )
        .await
    }

    async fn card_set_polling(&self, iccid: &str, enabled: bool) -> StoreResult<()> {
        self.set_flag("UPDATE cards SET polling_enabled = $1 WHERE iccid = $2", iccid, enabled).await
    }

    async fn device_set_polling(&self, device_no: &str, enabled: bool) -> StoreResult<()> {
        self.set_flag("UPDATE devices SET polling_enabled = $1 WHERE device_no = $2", device_no, enabled).await
    }

    async fn card_set_stop_lock(&self, iccid: &str, locked: bool) -> StoreResult<()> {
        self.set_flag("UPDATE cards SET stop_locked = $1 WHERE iccid = $2", iccid, locked).await
    }

    async fn card_delete(&self, iccid: &str) -> StoreResult<()> {
        self.write(iccid.to_owned(), |c, iccid| {
            async move {
                sqlx::query("DELETE FROM bindings WHERE iccid = $1")
                    .bind(iccid.as_str())
                    .execute(&mut *c)
                    .await?;
                domain::one_row(
                    sqlx::query("DELETE FROM cards WHERE iccid = $1")
                        .bind(iccid.as_str())
                        .execute(&mut *c)
                        .await?,
                )
            }
            .boxed()
        })
        .await
    }

    async fn binding_upsert(&self, b: &BindingRow) -> StoreResult<()> {
        self.write(b.clone(), |c, b| domain::binding_upsert(c, b).boxed())
            .await
    }

    async fn device_report_slot(&self, device_no: &str, iccid: Option<&str>) -> StoreResult<()> {
        self.write(
            (device_no.to_owned(), iccid.map(str::to_owned)),
            |c, (device_no, iccid)| {
                async move {
                    domain::one_row(
                        sqlx::query(
                            "UPDATE devices SET reported_slot_iccid = $1 WHERE device_no = $2",
                        )
                        .bind(iccid.as_deref())
                        .bind(device_no.as_str())
                        .execute(&mut *c)
                        .await?,
                    )
                }
                .boxed()
            },
        )
        .await
    }

    async fn item_enqueue_manual(
        &self,
        scope: &Scope,
        asset: &AssetRef,
        demand: &Demand,
        now: Timestamp,
    ) -> StoreResult<Vec<EnqueuedItem>> {
        self.writer
            .write_hot(
                (scope.clone(), asset.clone(), demand.clone(), now),
                |c, (scope, asset, demand, now)| {
                    enqueue::manual(c, scope, asset, demand, *now).boxed()
                },
                crate::store::sqlite_sync::manual,
            )
            .await
    }

    async fn item_retrigger(
        &self,
        scope: &Scope,
        item_id: i64,
        operator: &str,
        reason: &str,
        now: Timestamp,
    ) -> StoreResult<EnqueuedItem> {
        self.write(
            (
                scope.clone(),
                item_id,
                operator.to_owned(),
                reason.to_owned(),
                now,
            ),
            |c, (scope, item_id, operator, reason, now)| {
                enqueue::retrigger(c, scope, *item_id, operator, reason, *now).boxed()
            },
        )
        .await
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
        let (claimed, set_aside) = self
            .writer
            .write_hot(
                (
                    self.instance.clone(),
                    id,
                    token.to_owned(),
                    now,
                    lease,
                    expired_before,
                ),
                |c, (instance, id, token, now, lease, expired_before)| {
                    items::claim(
                        c,
                        instance,
                        *id,
                        token,
                        *now,
                        *lease,
                        *expired_before,
                    )
                    .boxed()
                },
                crate::store::sqlite_sync::claim,
            )
            .await?;
        // Counted and logged once committed, here on the caller's side of the writer.
        if let Some(reason) = set_aside {
            self.set_aside
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::error!(
                item = id,
                %reason,
                "priority item set aside as failed: its stored row cannot be decoded (repair the row, then retrigger)"
            );
        }
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
        self.write((claim.clone(), now), |c, (claim, now)| {
            items::begin_attempt(c, claim, *now).boxed()
        })
        .await
    }

    async fn item_finish(
        &self,
        claim: &ClaimedItem,
        finish: &Finish,
        logs: &[NewLog],
        now: Timestamp,
    ) -> StoreResult<ItemStatus> {
        let out: Option<ItemStatus> = self
            .write(
                (
                    self.instance.clone(),
                    claim.clone(),
                    finish.clone(),
                    logs.to_vec(),
                    now,
                ),
                |c, (instance, claim, finish, logs, now)| {
                    items::finish(c, instance, claim, finish, logs, *now).boxed()
                },
            )
            .await?;
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
        self.write(
            (scope.clone(), id, operator.to_owned(), reason.to_owned(), now),
            |c, (scope, id, operator, reason, now)| {
                items::close(c, scope, *id, operator, reason, *now).boxed()
            },
        )
        .await
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
        self.write(
            (self.instance.clone(), now, cutoff, batch),
            |c, (instance, now, cutoff, batch)| {
                items::mark_expired(c, instance, *now, *cutoff, *batch).boxed()
            },
        )
        .await
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
        schedule::sync(&self.pool, &self.writer, task_types, shards, now).await
    }

    async fn schedule_config_read(&self) -> StoreResult<Option<crate::store::ScheduleConfig>> {
        schedule::stored_config(&self.pool).await
    }

    async fn schedule_take_due(
        &self,
        task_type: &str,
        interval: Duration,
        shards: &[u32],
        per_shard: i64,
        now: Timestamp,
    ) -> StoreResult<Vec<ShardBatch>> {
        self.write(
            (task_type.to_owned(), interval, shards.to_vec(), per_shard, now),
            |c, (task_type, interval, shards, per_shard, now)| {
                schedule::take_due(c, task_type, *interval, shards, *per_shard, *now).boxed()
            },
        )
        .await
    }

    async fn poll_record(&self, records: &[PollRecord]) -> StoreResult<()> {
        if records.is_empty() {
            return Ok(());
        }
        self.write(records.to_vec(), |c, records| {
            schedule::record(c, records).boxed()
        })
        .await
    }

    async fn card_package_state(
        &self,
        iccid: &str,
        now: Timestamp,
    ) -> StoreResult<Option<PackageState>> {
        schedule::card_package_state(&self.pool, iccid, now).await
    }

    async fn manual_trigger_request(
        &self,
        scope: &Scope,
        req: &ManualTriggerRequest,
        now: Timestamp,
    ) -> StoreResult<ManualTriggerOutcome> {
        self.write((scope.clone(), req.clone(), now), |c, (scope, req, now)| {
            schedule::manual_trigger_request(c, scope, req, *now).boxed()
        })
        .await
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

/// An import as writer operations (D-import-in-parts): one, all-or-nothing, when it holds at most
/// [`IMPORT_PART`] rows; else shops and accounts first (shops may refer to each other), then the
/// cards, devices and bindings in parts of [`IMPORT_PART`], in that order (a binding refers to
/// its card and device). The bindings' deactivations come before all their activations, whatever
/// part they fall in: a file that moves a card holds both rows, perhaps 10,000 rows apart, and
/// the activation would be refused while the card is still bound elsewhere (D-import-bindings-end-state).
fn import_parts(batch: &ImportBatch) -> Vec<(ImportBatch, domain::RowBase)> {
    let rows = batch.shops.len()
        + batch.accounts.len()
        + batch.cards.len()
        + batch.devices.len()
        + batch.bindings.len();
    if rows <= IMPORT_PART {
        return vec![(batch.clone(), domain::RowBase::default())];
    }
    let mut parts = vec![(
        ImportBatch {
            shops: batch.shops.clone(),
            accounts: batch.accounts.clone(),
            ..ImportBatch::default()
        },
        domain::RowBase::default(),
    )];
    parts.extend(batch.cards.chunks(IMPORT_PART).enumerate().map(|(i, c)| {
        let part = ImportBatch {
            cards: c.to_vec(),
            ..ImportBatch::default()
        };
        let cards = i * IMPORT_PART;
        (part, domain::RowBase { cards, ..Default::default() })
    }));
    parts.extend(batch.devices.chunks(IMPORT_PART).enumerate().map(|(i, d)| {
        let part = ImportBatch {
            devices: d.to_vec(),
            ..ImportBatch::default()
        };
        let devices = i * IMPORT_PART;
        (part, domain::RowBase { devices, ..Default::default() })
    }));
    let mut bindings: Vec<usize> = (0..batch.bindings.len()).collect();
    bindings.sort_by_key(|&i| batch.bindings[i].active);
    parts.extend(bindings.chunks(IMPORT_PART).map(|rows| {
        let part = ImportBatch {
            bindings: rows.iter().map(|&i| batch.bindings[i].clone()).collect(),
            ..ImportBatch::default()
        };
        (part, domain::RowBase { bindings: rows.to_vec(), ..Default::default() })
    }));
    parts
}
