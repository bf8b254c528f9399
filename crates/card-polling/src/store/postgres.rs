//! The PostgreSQL engine (issue #7), chosen by `RAKUTEN_POLL_DB_URL=postgres://…`; SQLite stays
//! the default. Migrations in `migrations/postgres`, numbered as SQLite's. The store itself is the
//! one implementation in `store/sql/`, compiled here for [`sqlx::Postgres`].
//!
//! Writes: each is its own transaction (`dialect::postgres::Writer`, no group commit: PostgreSQL
//! serves concurrent writers itself). SQLite's single writer serializes writes, and the
//! enqueue-or-merge, claim and finish statements were written for that; here every write
//! transaction first takes a transaction-level advisory lock (keyed by schema, D-pg-7), so writers
//! stay serialized exactly as on SQLite, also across several service instances. Since D-gc-1 the
//! single-statement writes go through the same path and take it too. Reads never take it.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use crate::store::common::MigrationFile;

super::one_implementation!(sqlx::Postgres, postgres);

/// The PostgreSQL store.
pub type PgStore = sql::SqlStore;

/// Every file of `migrations/postgres`, in order (checked against the folder by a test).
pub(crate) const MIGRATIONS: &[MigrationFile] = &[
    (
        1,
        "initial",
        include_str!("../../migrations/postgres/0001_initial.sql"),
    ),
    (
        2,
        "scheduler",
        include_str!("../../migrations/postgres/0002_scheduler.sql"),
    ),
    (
        3,
        "audit actor",
        include_str!("../../migrations/postgres/0003_audit_actor.sql"),
    ),
    (
        4,
        "retention",
        include_str!("../../migrations/postgres/0004_retention.sql"),
    ),
    (
        5,
        "console paging",
        include_str!("../../migrations/postgres/0005_console_paging.sql"),
    ),
];

/// How long start-up waits for another instance's migrations (sqlx's advisory lock) before it
/// gives up.
const MIGRATION_LOCK_TIMEOUT: Duration = Duration::from_secs(120);

impl PgStore {
    /// Connects to `url` (optionally `?options=-c%20search_path%3D…`) and runs the migrations
    /// (serialized between instances by sqlx's advisory lock).
    ///
    /// # Errors
    /// When PostgreSQL is unreachable or a migration fails.
    pub async fn open(url: &str) -> Result<Self, sqlx::Error> {
        Self::open_with(url, crate::store::DEFAULT_LOCK_TIMEOUT).await
    }

    /// [`Self::open`] with `lock_timeout` as PostgreSQL's `lock_timeout` (row, table and the
    /// writer's advisory lock) and the pool acquire timeout, and a `statement_timeout` of 30 s: a
    /// request that cannot get the database in time fails with `StoreError::Busy` (HTTP 503).
    ///
    /// # Errors
    /// When PostgreSQL is unreachable or a migration fails.
    pub async fn open_with(url: &str, lock_timeout: Duration) -> Result<Self, sqlx::Error> {
        let base = PgConnectOptions::from_str(url)?.application_name("card-polling");
        // Migrations run on their own connection without the request bounds: an instance starting
        // beside another must wait for that one's migration lock (a CI failure: the 0.3 s request
        // lock_timeout cancelled the wait), and a migration may rewrite a large table.
        let migrating = PgPoolOptions::new()
            .max_connections(1)
            .connect_with(base.clone().options([
                (
                    "lock_timeout",
                    format!("{}ms", MIGRATION_LOCK_TIMEOUT.as_millis()),
                ),
                ("statement_timeout", "0".to_owned()),
            ]))
            .await?;
        let migrated = Self::run_migrations(&migrating, MIGRATIONS).await;
        migrating.close().await;
        migrated?;
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(lock_timeout)
            .connect_with(base.options([
                ("lock_timeout", format!("{}ms", lock_timeout.as_millis())),
                ("statement_timeout", "30s".to_owned()),
            ]))
            .await?;
        Ok(Self::from_parts(
            pool.clone(),
            pool.clone(),
            dialect::Writer(pool),
        ))
    }
}
