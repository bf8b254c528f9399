//! The SQLite engine (the default): a database file in WAL mode, foreign keys on; every write goes
//! through ONE group-commit writer (the `sqlite_writer` crate, D-sqlite-writer-group-commit) that owns the only write
//! connection and answers each write after the WAL holding it was `fdatasync`ed (on a syncer
//! thread, overlapping the next batch: D-writer-syncer-thread), reads through a pool of `query_only` connections;
//! migrations in `migrations/sqlite`. The store itself is the one implementation in `store/sql/`,
//! compiled here for [`sqlx::Sqlite`].

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::store::common::MigrationFile;

super::one_implementation!(sqlx::Sqlite, sqlite);

/// The SQLite store.
pub type SqliteStore = sql::SqlStore;

/// Read connections.
const READ_CONNECTIONS: u32 = 8;
/// Writes committed together at most: a batch of 512 small writes holds the writer for a few
/// milliseconds, and one fsync serves all of them.
const MAX_BATCH: usize = 512;
/// The write connection's `cache_size` pragma: negative is KiB, so 16 MiB (D-writer-page-cache).
const WRITER_CACHE_SIZE: &str = "-16384";
/// Writes queued in front of the writer; callers wait (back-pressure) when it is full.
const WRITE_QUEUE: usize = 8192;

/// Every file of `migrations/sqlite`, in order (checked against the folder by a test).
pub(crate) const MIGRATIONS: &[MigrationFile] = &[
    (
        1,
        "initial",
        include_str!("../../migrations/sqlite/0001_initial.sql"),
    ),
    (
        2,
        "scheduler",
        include_str!("../../migrations/sqlite/0002_scheduler.sql"),
    ),
    (
        3,
        "audit actor",
        include_str!("../../migrations/sqlite/0003_audit_actor.sql"),
    ),
    (
        4,
        "retention",
        include_str!("../../migrations/sqlite/0004_retention.sql"),
    ),
    (
        5,
        "console paging",
        include_str!("../../migrations/sqlite/0005_console_paging.sql"),
    ),
    (
        6,
        "item retention",
        include_str!("../../migrations/sqlite/0006_item_retention.sql"),
    ),
    (
        7,
        "facts and credentials",
        include_str!("../../migrations/sqlite/0007_facts_and_credentials.sql"),
    ),
    (
        8,
        "token generation",
        include_str!("../../migrations/sqlite/0008_token_generation.sql"),
    ),
];

/// Migrations whose comments were reworded after release (D-released-migrations-pinned).
pub const RELEASED: &[rakuten_cli::migrations::Released] = &[
    rakuten_cli::migrations::Released {
        version: 2,
        checksum: "c597d6bcfee5d8142ae8cf25f47dfe20baa2f429dc6c08f33bb671321129aeb6409569762a5799e456f944c0dc05712b",
        statements: "d07403fc1e20bd2937bcc147dc4505284461951504fdd2c2113589199b09546073fed3bd55bfb8a279c357950cba1e1f",
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

impl SqliteStore {
    /// Opens (creating if missing) the database file and runs the migrations.
    ///
    /// # Errors
    /// When the file cannot be opened or a migration fails.
    pub async fn open(path: &Path) -> Result<Self, sqlx::Error> {
        Self::open_with(path, crate::store::DEFAULT_LOCK_TIMEOUT).await
    }

    /// [`Self::open`] with the busy timeout and pool acquire timeout `lock_timeout`: a request
    /// that cannot get the database within it fails with `StoreError::Busy` (HTTP 503).
    ///
    /// # Errors
    /// When the file cannot be opened or a migration fails.
    pub async fn open_with(path: &Path, lock_timeout: Duration) -> Result<Self, sqlx::Error> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(sqlx::Error::Io)?;
        }
        // Before anything touches the file: one card-polling process per database file
        // (D-one-process-per-sqlite-file).
        let lock = sqlite_writer::FileLock::acquire(path).map_err(sqlx::Error::Io)?;
        let opts = SqliteConnectOptions::from_str("sqlite:")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(lock_timeout);
        // Migrations and fixtures: a small pool that may write, opened first.
        let fixtures = SqlitePoolOptions::new()
            .max_connections(2)
            .acquire_timeout(lock_timeout)
            .connect_with(opts.clone())
            .await?;
        Self::run_migrations(&fixtures, MIGRATIONS, RELEASED).await?;
        let read = SqlitePoolOptions::new()
            .max_connections(READ_CONNECTIONS)
            .acquire_timeout(lock_timeout)
            .connect_with(opts.clone().pragma("query_only", "ON"))
            .await?;
        // The writer's page cache is 16 MiB (SQLite's default is 2 MiB): the scheduler's take
        // reads schedule and card pages all over both tables (D-writer-page-cache).
        // On its own thread, held to one CPU with its connection's thread (D-writer-thread-one-cpu); each
        // batch's fsync runs on the syncer thread while the next batch runs (D-writer-syncer-thread).
        let writer = sqlite_writer::Writer::open(
            opts.pragma("cache_size", WRITER_CACHE_SIZE),
            sqlite_writer::Settings {
                max_batch: MAX_BATCH,
                queue: WRITE_QUEUE,
                marks: None,
                sync_after_commit: true,
            },
        )
        .await?;
        // This process is the file's one writer until the store shuts down (D-one-process-per-sqlite-file).
        writer.hold_until_shutdown(lock);
        Ok(Self::from_parts(read, fixtures, dialect::Writer(writer)))
    }
}
