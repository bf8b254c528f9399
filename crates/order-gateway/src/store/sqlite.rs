//! The SQLite engine of the store: WAL, `synchronous=FULL`, a busy timeout, one group-commit
//! writer (the shared [`sqlite_writer`] crate, D-sqlite-writer-group-commit) and a pool of `query_only` read connections. The SQL is the
//! one implementation of [`super::sql`]; this file only opens the database and hands transitions
//! to the writer. Migrations live in `migrations/sqlite` and are embedded in the binary.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sqlite_writer::{Mark, Writer};
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{ConnectOptions, Connection, SqliteConnection};

use crate::lease::probe::{self, Step};

use super::{StoreError, Transition, bounded};

/// The migrations of `migrations/sqlite`, embedded at compile time. (Built by hand rather than
/// with `sqlx::migrate!`, which needs sqlx's `macros` feature and with it a second build of
/// sqlx and the bundled SQLite for the proc-macro; see DECISIONS D-embedded-migrations.)
pub fn migrator() -> Migrator {
    super::embedded_migrator(
        &[
            (
                1,
                "order tasks",
                include_str!("../../migrations/sqlite/0001_order_tasks.sql"),
            ),
            (
                2,
                "account queries",
                include_str!("../../migrations/sqlite/0002_account_queries.sql"),
            ),
            (
                3,
                "set aside",
                include_str!("../../migrations/sqlite/0003_set_aside.sql"),
            ),
            (
                4,
                "alerts and operator actions",
                include_str!("../../migrations/sqlite/0004_alerts_operator_actions.sql"),
            ),
            (
                5,
                "console indexes",
                include_str!("../../migrations/sqlite/0005_console_indexes.sql"),
            ),
            (
                6,
                "lease grants",
                include_str!("../../migrations/sqlite/0006_lease_grants.sql"),
            ),
            (
                7,
                "console paging",
                include_str!("../../migrations/sqlite/0007_console_paging.sql"),
            ),
            (
                8,
                "clock signals",
                include_str!("../../migrations/sqlite/0008_clock_signals.sql"),
            ),
            (
                9,
                "alert paging, grant endings",
                include_str!("../../migrations/sqlite/0009_alert_paging.sql"),
            ),
            (
                10,
                "deadlines, event sequence",
                include_str!("../../migrations/sqlite/0010_deadlines_event_sequence.sql"),
            ),
            (
                11,
                "intent summary",
                include_str!("../../migrations/sqlite/0011_intent_summary.sql"),
            ),
            (
                12,
                "worker bindings",
                include_str!("../../migrations/sqlite/0012_worker_bindings.sql"),
            ),
            (
                13,
                "contradiction alert",
                include_str!("../../migrations/sqlite/0013_contradiction_alert.sql"),
            ),
            (
                14,
                "latest state",
                include_str!("../../migrations/sqlite/0014_latest_state.sql"),
            ),
        ],
        RELEASED,
    )
}

/// Migrations whose comments were reworded after release (D-released-migrations-pinned).
pub(crate) const RELEASED: &[rakuten_cli::migrations::Released] = &[
    rakuten_cli::migrations::Released {
        version: 3,
        checksum: "775d7b7dba9a7f14b6ad9e1917dc87de8a640eeff45575c824a3ff9289592bd9fc8421dd781f6bbb5ede08489aec6fd3",
        statements: "564565f3e849900518896582980e31077ba126f073eca66bf49a6faa591d3893bd2636a19a76e6031f774efe6e620d11",
    },
    rakuten_cli::migrations::Released {
        version: 4,
        checksum: "1ad33498ff7ca6a5b78f88d8e74bf39493f3d71c874142520b937645487c542b0ffe0fead23f81f260e13109141653b0",
        statements: "6c31d4a7786e6c645daf3bd5c128a08c9bb7b067d7096d71fd8c76e9bc7d890f88f3f3a12a2e7034232dd6f3b8dc66f5",
    },
    rakuten_cli::migrations::Released {
        version: 5,
        checksum: "ebeb444369c9aaaadfe8c28485f539aa41372884e3e016c1a4f2898117d0a028cbb13541544375177f56603c25fea321",
        statements: "86769f9372c878d3a771bec9910104e11175b507b5b5835e3147984921500133aa1c9f701df06550cc3a12153cf38c46",
    },
    rakuten_cli::migrations::Released {
        version: 6,
        checksum: "a35fb9c4ef58da39ade0bbb0986a2e0cc54f4fff65593cf0a7102d9c50a1bd1f8002e195fc79171b4d44e32fe704d8c7",
        statements: "67029b86429ec307000cff42b8629cffe88f7c8a3c17eebb45190f9903921930535ab35d60fd5ecc498321e6b69d16ce",
    },
    rakuten_cli::migrations::Released {
        version: 7,
        checksum: "5930c1179d6b4fefcc6812e0d6dde6b8378091f4800c0c092310bda57c02dde897acb1e098d5773202c8e5ca2eacb89d",
        statements: "a8df9c2790f8a1d0abd5400792e069fcaf68e639e1e0b563d59a0a61a3dbbc7a2068d0df2f177f1059a131e6353e674c",
    },
    rakuten_cli::migrations::Released {
        version: 8,
        checksum: "94e2bcd772020ab77729de775bdcffc73bf0ff015f86e86eb27fc1c23bf2cefd002d2a1552a33c984ed77490757c96a9",
        statements: "7628810b2cb0a0cd399b678b9dce1dcad6e2b0e43bf0c663085f07a8ee7be2d3b6284008f21670353e7032b9dcbd7f6e",
    },
    rakuten_cli::migrations::Released {
        version: 9,
        checksum: "a22d39070cc6a129d3363909f637b161ef5ce38d1eb5ec9fefa87282919fd7c476aaf31112f3b3b407f3048d9dbbb2ac",
        statements: "cba4913bd93841e4e52d6fc77166f12595f599a6a202da902c58a76209582a672152a84292ff05b356bf420fb2154690",
    },
];

/// How long a connection waits for another process's lock before `SQLITE_BUSY` (→ 503): less
/// than [`super::STORE_OP_BOUND`], so the writer gives up before its callers do.
const BUSY_TIMEOUT: Duration = Duration::from_secs(2);

/// Read connections.
const READ_CONNECTIONS: u32 = 4;

impl sqlite_writer::WriterError for StoreError {
    fn closed() -> Self {
        StoreError::Closed
    }

    fn is_storage_failure(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}

/// The writer's points as the hand-off probe's steps (benches/gateway.rs).
fn probe_mark(m: Mark) {
    probe::mark(match m {
        Mark::BatchBegin => Step::WriterBatchBegin,
        Mark::CommitStart => Step::WriterCommitStart,
        Mark::CommitDone => Step::WriterCommitDone,
        // The gateway's COMMIT syncs itself (no syncer thread, D-writer-syncer-thread).
        Mark::Synced => return,
    });
}

/// An error of opening the file: SQLite refusing a read-only file or folder stays the raw error
/// ([`StoreError::Database`], never seen by a request), so that start-up can tell it apart with
/// [`super::is_read_only`] and name the file; any other as a request's error would be.
fn open_error(e: sqlx::Error) -> StoreError {
    if super::is_read_only(&e) {
        StoreError::Database(Arc::new(e))
    } else {
        e.into()
    }
}

/// The SQLite order and account-query store.
#[derive(Debug)]
pub struct SqliteStore {
    writer: Writer<StoreError>,
    read: SqlitePool,
    /// The WAL's checkpoint thread (D-gateway-checkpoint-thread), stopped at shutdown.
    checkpointer: tokio::sync::Mutex<Option<sqlite_writer::Checkpointer>>,
}

impl SqliteStore {
    /// Opens (creating if missing, with its parent directory) and migrates the database at
    /// `path`, and starts the writer task.
    ///
    /// # Errors
    /// [`StoreError::Database`] when the file cannot be opened or migrated.
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Database(Arc::new(e.into())))?;
        }
        // Before anything touches the file: one gateway per database file (D-one-process-per-sqlite-file).
        let lock = sqlite_writer::FileLock::acquire(path)
            .map_err(|e| StoreError::Database(Arc::new(e.into())))?;
        let opts = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        let mut migrating = opts.connect().await.map_err(open_error)?;
        migrator()
            .run(&mut migrating)
            .await
            .map_err(|e| StoreError::Database(Arc::new(e.into())))?;
        // A file this user cannot write opens, and migrates when there is nothing to migrate,
        // then fails every write: a write that changes no row finds it here, for start-up to
        // name (D-exit-2-or-3). (`BEGIN IMMEDIATE` does not: in WAL mode it succeeds.)
        sqlx::query("UPDATE _sqlx_migrations SET version = version WHERE 0")
            .execute(&mut migrating)
            .await
            .map_err(open_error)?;
        migrating.close().await?;
        let read = SqlitePoolOptions::new()
            .max_connections(READ_CONNECTIONS)
            .connect_with(opts.clone().pragma("query_only", "ON"))
            .await?;
        // 256 per batch, 8,192 queued (senders wait when it is full); on its own thread, held to
        // one CPU with its connection's thread (D-writer-thread-one-cpu).
        // WAL checkpoints on a thread of their own (D-gateway-checkpoint-thread): the writer's
        // own autocheckpoint, every 1,000 pages by default, copied the WAL into the file and
        // fsynced both inside a commit, holding up every answer of that batch; it stays as a
        // backstop only.
        let writer = Writer::open(
            opts.pragma(
                "wal_autocheckpoint",
                sqlite_writer::BACKSTOP_CHECKPOINT_PAGES.to_string(),
            ),
            sqlite_writer::Settings {
                marks: Some(probe_mark),
                sync_after_commit: false,
                ..sqlite_writer::Settings::default()
            },
        )
        .await?;
        // This process is the file's one writer until the store shuts down (D-one-process-per-sqlite-file).
        writer.hold_until_shutdown(lock);
        let checkpointer = match sqlite_writer::Checkpointer::spawn(
            sqlite_writer::real_path(path),
            sqlite_writer::CHECKPOINT_EVERY,
        ) {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(error = %e, "cannot start the checkpoint thread; the writer checkpoints every {} pages itself", sqlite_writer::BACKSTOP_CHECKPOINT_PAGES);
                None
            }
        };
        Ok(SqliteStore {
            writer,
            read,
            checkpointer: tokio::sync::Mutex::new(checkpointer),
        })
    }

    /// The writer's counters (commits and operations), for benchmarks.
    pub fn write_stats(&self) -> (u64, u64) {
        self.writer.stats()
    }

    /// Queues one transition for the writer; answers after its batch committed.
    async fn enqueue<T: Send + 'static>(
        &self,
        op: Transition<SqliteConnection, T>,
        lease: bool,
    ) -> Result<T, StoreError> {
        self.ensure_open()?;
        // Bounded: a writer stuck behind another process's lock answers Busy, not never. (An
        // operation already queued still runs; only a lease attempt is skipped once its caller
        // is gone.)
        if lease {
            bounded(self.writer.write_abandonable(op)).await
        } else {
            bounded(self.writer.write(op)).await
        }
    }

    /// Runs one transition through the group-commit writer.
    pub(crate) async fn write<T: Send + 'static>(
        &self,
        op: Transition<SqliteConnection, T>,
    ) -> Result<T, StoreError> {
        self.enqueue(op, false).await
    }

    /// [`Self::write`] for a lease attempt: skipped if its caller has gone before it runs.
    pub(crate) async fn write_lease<T: Send + 'static>(
        &self,
        op: Transition<SqliteConnection, T>,
    ) -> Result<T, StoreError> {
        self.enqueue(op, true).await
    }

    /// Runs one transition synchronously on the writer's own thread (`sqlite_sync`,
    /// D-gateway-hot-path-on-writer-thread); answers after its batch committed.
    pub(crate) async fn write_sync<T: Send + 'static>(
        &self,
        op: sqlite_writer::SyncTransition<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.ensure_open()?;
        bounded(self.writer.write_sync(op)).await
    }

    /// [`Self::write_sync`] for a lease attempt: skipped if its caller has gone before it runs.
    pub(crate) async fn write_sync_lease<T: Send + 'static>(
        &self,
        op: sqlite_writer::SyncTransition<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.ensure_open()?;
        bounded(self.writer.write_sync_abandonable(op)).await
    }

    /// Observes each commit of the writer (operations, duration: the `/metrics` histograms).
    pub fn on_commit(&self, hook: sqlite_writer::CommitHook) {
        self.writer.on_commit(hook);
    }

    /// Whether the writer's last batch failed as a whole (full disk, I/O error, read-only file,
    /// a lock held past the busy timeout) and none has committed since (D-writes-failing-is-503-and-unready).
    pub(crate) fn writes_failing(&self) -> bool {
        self.writer.failing()
    }

    /// [`StoreError::Closed`] once [`Self::shutdown`] has begun (the writer takes no more work).
    pub(crate) fn ensure_open(&self) -> Result<(), StoreError> {
        if self.writer.is_open() {
            Ok(())
        } else {
            Err(StoreError::Closed)
        }
    }

    pub(crate) fn read_pool(&self) -> &SqlitePool {
        &self.read
    }

    /// Nothing to send: every long-poll on this database lives in this process.
    pub(crate) fn notify_tasks(&self, _n: usize) {}

    /// Nothing to send, as [`Self::notify_tasks`].
    pub(crate) fn notify_queries(&self, _n: usize) {}

    /// One process per database file: every wake-up is in-process.
    pub(crate) fn listening(&self) -> bool {
        true
    }

    /// One process per database file, one clock: nothing to compare.
    pub(crate) async fn database_clock_offset_ms(
        &self,
        _now: rakuten_types::Timestamp,
    ) -> Result<Option<i64>, StoreError> {
        Ok(None)
    }

    /// One process per database file: it always logs the alerts.
    pub(crate) async fn elect_alerts_leader(&self) -> Result<bool, StoreError> {
        Ok(true)
    }

    /// Stops the checkpoint thread, lets the writer drain what is queued, commit and stop; closes
    /// the read pool.
    pub(crate) async fn shutdown(&self) {
        if let Some(c) = self.checkpointer.lock().await.take() {
            c.finish().await;
        }
        self.writer.shutdown().await;
        self.read.close().await;
    }
}
