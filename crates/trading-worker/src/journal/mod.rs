//! The local SQLite journal (spec §6.1), the authority for what this worker executed: `orders`,
//! `order_events` (state transitions), `evidence` (index of files on disk), `intents` (write-ahead
//! entries for irreversible actions) and `outbox` (reports not yet acknowledged). Schema in
//! `migrations/sqlite`. WAL with `synchronous=FULL`: a committed row survives a crash or power
//! loss. Every write is one transaction started `BEGIN IMMEDIATE`, and every status change is a
//! guarded `UPDATE … WHERE status = …`; zero rows is a [`JournalError::Conflict`].
//!
//! One file per table the worker reasons about, each an `impl Journal` block:
//! - `mod.rs`: [`Journal`] (open, migrate, close), [`JournalError`];
//! - `orders.rs`: the `orders` row of a task ([`OrderRow`]): accepting a grant, the purchase
//!   block, the lookups of recovery and monitoring;
//! - `intents.rs`: the write-ahead entries of irreversible actions ([`Action`],
//!   [`IntentResolution`]);
//! - `step.rs`: [`StepRecord`], everything one step writes in one transaction (order row, evidence
//!   index, event, intents, outbox report), and the evidence numbers and events it leaves;
//! - `outbox.rs`: reports not yet acknowledged by the gateway ([`OutboxRow`]).

use std::path::Path;
use std::time::Duration;

use rakuten_types::Timestamp;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{SqlSafeStr, SqlitePool};

mod intents;
mod orders;
mod outbox;
mod step;

pub use intents::{Action, IntentResolution, IntentRow};
pub use orders::{LocalStatus, OrderRow};
pub use outbox::OutboxRow;
pub use step::{EventRow, RecordMode, StepRecord};

/// Journal failures.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// SQLite failed.
    #[error("journal database: {0}")]
    Db(#[from] sqlx::Error),
    /// Migrations failed.
    #[error("journal migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A guarded update matched no row: the record is not in the state the caller assumed.
    #[error("journal conflict: {0}")]
    Conflict(String),
    /// A stored value could not be read back.
    #[error("journal corrupt: {0}")]
    Corrupt(String),
}

type Result<T> = std::result::Result<T, JournalError>;

/// The migrations of `migrations/sqlite`, embedded at compile time (built by hand: `sqlx::migrate!`
/// needs sqlx's `macros` feature, see D-embedded-migrations).
pub fn migrator() -> Migrator {
    Migrator::with_migrations(rakuten_cli::migrations::pin_released(embedded(), RELEASED))
}

fn embedded() -> Vec<Migration> {
    vec![Migration::new(
        1,
        "journal".into(),
        MigrationType::Simple,
        sqlx::AssertSqlSafe(include_str!("../../migrations/sqlite/0001_journal.sql"))
            .into_sql_str(),
        false,
    )]
}

/// Migrations whose comments were reworded after release (D-released-migrations-pinned).
const RELEASED: &[rakuten_cli::migrations::Released] = &[rakuten_cli::migrations::Released {
    version: 1,
    checksum: "328186efa9d83ce9a0e3ab3b8f57e577ae91482a904942aff31035f9050c110e7f44d330195028e1f7f764888e189cbf",
    statements: "00276db3efd70308346ae8aee899cf1d1e5d241cfb9486d4bbd3940c9f6559dc362b395fdf35029164eccfea00b05fd3",
}];

#[cfg(test)]
mod released_tests {
    #[test]
    fn released_migrations_keep_their_statements() {
        rakuten_cli::migrations::check_released(&super::embedded(), super::RELEASED).unwrap();
    }
}

/// The journal.
#[derive(Debug, Clone)]
pub struct Journal {
    pool: SqlitePool,
}

pub(super) fn ts(s: Option<String>) -> Result<Option<Timestamp>> {
    s.map(|s| Timestamp::parse(&s).map_err(|e| JournalError::Corrupt(e.to_string())))
        .transpose()
}

impl Journal {
    /// Opens (creating the file and its directory if missing) and migrates the journal.
    ///
    /// # Errors
    /// The file cannot be opened or migrated.
    pub async fn open(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| JournalError::Db(sqlx::Error::Io(e)))?;
        }
        let opts = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(opts)
            .await?;
        migrator().run(&pool).await?;
        Ok(Journal { pool })
    }

    /// Clean stop: moves everything in the write-ahead log into the database file
    /// (`PRAGMA wal_checkpoint(TRUNCATE)`) and closes the connections, so that `trading.db` alone
    /// holds the whole journal afterwards (a file copy of it is then a complete backup; while the
    /// worker runs, use `VACUUM INTO`, see the README). A failed checkpoint is logged: SQLite
    /// replays the log at the next open, nothing is lost.
    pub async fn close(&self) {
        if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&self.pool)
            .await
        {
            tracing::warn!(error = %e, "journal checkpoint on shutdown failed; the WAL is replayed at the next start");
        }
        self.pool.close().await;
    }
}

#[cfg(test)]
mod tests {
    use rakuten_types::order::LeaseGrant;
    use rakuten_types::{OrderState, Outcome, TaskId, WorkerId};
    use serde_json::json;

    use super::*;

    async fn journal_with_task() -> (tempfile::TempDir, Journal, TaskId) {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(&dir.path().join("t.db")).await.unwrap();
        let id = TaskId::parse("po-1").unwrap();
        let grant = LeaseGrant {
            task_id: id.clone(),
            site: "rakuten".into(),
            intent: json!({"item_url": "u"}).into(),
            lease_expires_at: Timestamp::EPOCH,
            lease_count: 1,
            known_state: None,
            lease_token: "tok".into(),
        };
        let (_, inserted) = j.order_accept(&grant, Timestamp::EPOCH).await.unwrap();
        assert!(inserted);
        (dir, j, id)
    }

    #[tokio::test]
    async fn an_intent_cannot_be_begun_twice_or_after_it_was_done() {
        let (_d, j, id) = journal_with_task().await;
        j.intent_begin(&id, Action::Submit, Timestamp::EPOCH)
            .await
            .unwrap();
        assert!(matches!(
            j.intent_begin(&id, Action::Submit, Timestamp::EPOCH).await,
            Err(JournalError::Conflict(_))
        ));
        let done = IntentResolution {
            action: Action::Submit,
            done: true,
            reason: None,
        };
        j.intent_resolve(&id, &done, Some("n-1"), Timestamp::EPOCH)
            .await
            .unwrap();
        assert!(matches!(
            j.intent_resolve(&id, &done, None, Timestamp::EPOCH).await,
            Err(JournalError::Conflict(_))
        ));
        assert!(matches!(
            j.intent_begin(&id, Action::Submit, Timestamp::EPOCH).await,
            Err(JournalError::Conflict(_))
        ));
        let rows = j.intents(&id).await.unwrap();
        assert_eq!(
            (
                rows.len(),
                rows[0].status.as_str(),
                rows[0].site_order_id.as_deref()
            ),
            (1, "done", Some("n-1"))
        );
    }

    #[tokio::test]
    async fn a_finished_task_refuses_execution_steps_and_keeps_its_outbox_row() {
        let (_d, j, id) = journal_with_task().await;
        let w = WorkerId::parse("w").unwrap();
        let mut fin = StepRecord::new(&id, "payment", OrderState::Paid, Timestamp::EPOCH);
        fin.finish = Some((Outcome::Succeeded, None));
        let outbox = j.step_record(&fin, &w).await.unwrap();
        assert!(outbox.is_some());
        let row = j.order_get(&id).await.unwrap().unwrap();
        assert_eq!(
            (row.status, row.outcome),
            (LocalStatus::Finished, Some(Outcome::Succeeded))
        );
        let late = StepRecord::new(&id, "cart-add", OrderState::InCart, Timestamp::EPOCH);
        assert!(matches!(
            j.step_record(&late, &w).await,
            Err(JournalError::Conflict(_))
        ));
        let pending = j.outbox_pending(&id).await.unwrap();
        assert_eq!(pending.len(), 1);
        assert!(pending[0].body.terminal);
        assert_eq!(pending[0].body.outcome, Some(Outcome::Succeeded));
        assert_eq!(j.outbox_finished_tasks().await.unwrap(), vec![id.clone()]);
        j.outbox_ack(pending[0].id, Timestamp::EPOCH).await.unwrap();
        assert!(j.outbox_pending(&id).await.unwrap().is_empty());
    }
}
