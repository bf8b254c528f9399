//! The PostgreSQL engine, chosen by `RAKUTEN_POLL_DB_URL=postgres://…`; SQLite stays
//! the default. Migrations in `migrations/postgres`, numbered as SQLite's. The store itself is the
//! one implementation in `store/sql/`, compiled here for [`sqlx::Postgres`].
//!
//! Write transactions: READ COMMITTED, with no global lock (D-poll-postgres-concurrent-writes, which amends D-poll-postgres-concurrent-writes's
//! writer lock): several instances write at once. Each transition is safe on its own rows —
//! conditional `UPDATE … WHERE status = … RETURNING`, enqueue-or-merge by `INSERT … ON CONFLICT`
//! on the partial unique index, row locks taken in one order, `SKIP LOCKED` where rows are picked
//! (claims, schedule takes, expiry and retention batches) — and a transition that meets a
//! deadlock or a concurrent change it detects is run again (`store::retry`). Reads take no lock.
//! Every write, single statements included, goes through `dialect::postgres::Writer` (D-sqlite-writer-group-commit):
//! its own transaction, no group commit (PostgreSQL serves concurrent writers itself).

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
    (
        6,
        "item retention",
        include_str!("../../migrations/postgres/0006_item_retention.sql"),
    ),
    (
        7,
        "facts and credentials",
        include_str!("../../migrations/postgres/0007_facts_and_credentials.sql"),
    ),
    (
        8,
        "token generation",
        include_str!("../../migrations/postgres/0008_token_generation.sql"),
    ),
];

/// Migrations whose comments were reworded after release (D-released-migrations-pinned).
pub const RELEASED: &[rakuten_cli::migrations::Released] = &[
    rakuten_cli::migrations::Released {
        version: 2,
        checksum: "7fd0277effec92bde207295cb232b6a950c90649221053320c433312bbafabbe29ab33647b16016e533faf52c9e89a4d",
        statements: "481f43ff5b72c7bbf436c7a968db88972a34f160002af6bc9dddc3cc4a9c1b2c2450fb78255e29e5df8a0d0559ed9f76",
    },
    rakuten_cli::migrations::Released {
        version: 3,
        checksum: "c1545385ca81c11a98b81e5a9d936651b21434341e33f89a1cdc57f55f2a5708f82707aff331d305b6a6b59cea4a9a77",
        statements: "533dab7ddbe24424c5af8bf8b9d1c536fb2f55a77c724d35888af0f4547db467e243f357e12de01ba31561fbbf226c4e",
    },
    rakuten_cli::migrations::Released {
        version: 4,
        checksum: "2f45c9f78e1a096cab207d486874c85f93b9840e62e4f987b55f17c19187bd98b204ac0c486a8b3c6ac02e3f761d3901",
        statements: "654b87a3ea43970f2ff8b3c479ed72edad596ec8a2a8c3cdf060f6e612fb5e02f950ec52a1f443ca8f5ea7dd4b5ddd13",
    },
    rakuten_cli::migrations::Released {
        version: 5,
        checksum: "101f1f0bb0e1d0d6ea53116610d2a35e4dfb3c692df61315be6d71e7c9b3aa764f90487ad756d4e605bbc039f5700aba",
        statements: "9bc90c9f94899c1e7896f4a5789df69234d745f3153372bebb5cf24a4f898a4daded0559e77ce99921167f43ec35a4a9",
    },
    rakuten_cli::migrations::Released {
        version: 6,
        checksum: "b85b5316c9286f6fc7fa7dda7472b76f2aabed26578ce52d22944d1899e8d5d71948bfe13b51442fd455a5e045e00f6d",
        statements: "484dbacaa3a81a73943fd8bcbd39addb049ba6ebe62143b6dce973fad7cf4224390bce37b36a795e283bc64c5aaf4f42",
    },
];

/// How long start-up waits for another instance's migrations (sqlx's advisory lock) before it
/// gives up.
const MIGRATION_LOCK_TIMEOUT: Duration = Duration::from_secs(120);

/// How long start-up's first connection may take (each attempt and the retries of a refused
/// one): a PostgreSQL that is down or does not answer fails start-up in seconds, not after sqlx's
/// 30 s default (D-startup-names-what-failed).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

impl PgStore {
    /// Connects to `url` (optionally `?options=-c%20search_path%3D…`) and runs the migrations
    /// (serialized between instances by sqlx's advisory lock).
    ///
    /// # Errors
    /// When PostgreSQL is unreachable or a migration fails.
    pub async fn open(url: &str) -> Result<Self, sqlx::Error> {
        Self::open_with(url, crate::store::DEFAULT_LOCK_TIMEOUT).await
    }

    /// [`Self::open`] with `lock_timeout` as PostgreSQL's `lock_timeout` (row, table and named
    /// advisory locks) and the pool acquire timeout, and a `statement_timeout` of 30 s: a
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
            .acquire_timeout(CONNECT_TIMEOUT)
            .connect_with(base.clone().options([
                (
                    "lock_timeout",
                    format!("{}ms", MIGRATION_LOCK_TIMEOUT.as_millis()),
                ),
                ("statement_timeout", "0".to_owned()),
            ]))
            .await?;
        let migrated = Self::run_migrations(&migrating, MIGRATIONS, RELEASED).await;
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
