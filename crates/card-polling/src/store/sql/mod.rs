//! The one SQL implementation of [`crate::store::Store`], written once for both engines. This folder is compiled
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
//! Files, one per capability, each with its `impl … for SqlStore`: `observe.rs` (service:
//! counts, ping, clock, go-live), `accounts.rs`, `import.rs` (one function per entity),
//! `package.rs` (orders, payments, usages, package poll), `assets.rs` (card, device and binding
//! switches), `query.rs` (items in scope: list, count, detail, manual enqueue, retrigger, close),
//! `items.rs` (due, claim, attempt, finish, expire), `schedule.rs` (ordinary polling and manual
//! triggers), `retention.rs` (batch deletes of old history); and the steps they share:
//! `enqueue.rs` (snapshot and enqueue-or-merge inside a business transaction), `bulk.rs`
//! (multi-row card import), `rows.rs` (row reads).

mod accounts;
mod assets;
mod bulk;
mod enqueue;
mod import;
mod items;
mod observe;
mod package;
mod query;
mod retention;
mod rows;
mod schedule;


use futures::FutureExt;

use rakuten_types::Timestamp;

use super::{Db, dialect};
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
                one_row(
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
        return StoreError::UnknownRef(format!("{what}'s shop {shop_id} is unknown"));
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

/// Exactly one row changed, else not found.
pub(crate) fn one_row(r: QueryResult) -> StoreResult<()> {
    if r.rows_affected() == 1 {
        Ok(())
    } else {
        Err(StoreError::NotFound)
    }
}
