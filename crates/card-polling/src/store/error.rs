//! [`StoreError`], what every store method can fail with, how a database error maps to it (busy,
//! unable to store, a text it cannot store, or a fault), and how an import row is named in its
//! messages.

use crate::store::ImportCounts;

/// Storage errors. `NotFound` covers "out of scope" too, so callers cannot tell them apart.
/// Cloneable because one failed group commit answers every caller of its batch (D-sqlite-writer-group-commit).
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// No such row, or not in the caller's scope.
    #[error("not found")]
    NotFound,
    /// A guarded transition hit zero rows or a uniqueness rule: the state does not allow it.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The claim token no longer holds the item (taken over, closed or expired).
    #[error("the claim on this item is no longer held")]
    ClaimLost,
    /// Input that only the database can judge and that is wrong whatever is stored.
    #[error("invalid: {0}")]
    Invalid(String),
    /// The request names a shop or an order that is neither stored nor, in an import, in the same
    /// request: a fact of the stored state, not a malformed request (HTTP 404, code 1005;
    /// D-unknown-reference-is-404).
    #[error("{0}")]
    UnknownRef(String),
    /// [`StoreError::UnknownRef`] for a card or a device (HTTP 404, code 7006).
    #[error("{0}")]
    UnknownAsset(String),
    /// The database did not answer within its bound: a lock wait, busy or statement timeout, or
    /// no free connection; or it cannot store anything now (a read-only file,
    /// a full disk, an I/O error, a lost connection: D-writes-failing-is-503-and-unready), which its text says rather
    /// than "busy" (D-exit-2-or-3). Retry later: HTTP 503 with `Retry-After`.
    #[error("{}", busy_text(.0))]
    Busy(#[source] std::sync::Arc<sqlx::Error>),
    /// The store is shutting down: its writer takes no more work, or its pool is closed (HTTP
    /// 503 with `Retry-After`).
    #[error("the store is closed")]
    Closed,
    /// The database failed.
    #[error("database error")]
    Db(#[source] std::sync::Arc<sqlx::Error>),
    /// A concurrent transaction changed what this transition read (PostgreSQL, several writers,
    /// D-poll-postgres-concurrent-writes): the store retries the whole transition, so this surfaces only once the retries
    /// ran out. Retry later: HTTP 503 with `Retry-After`, like [`StoreError::Busy`].
    #[error("a concurrent change: {0}")]
    Raced(&'static str),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        if is_unstorable_text(&e) {
            StoreError::Invalid(
                "a text value holds a character the database cannot store (a NUL byte)".into(),
            )
        } else if is_busy(&e) || is_storage_unavailable(&e) {
            StoreError::Busy(e.into())
        } else if matches!(e, sqlx::Error::PoolClosed) {
            StoreError::Closed
        } else {
            StoreError::Db(e.into())
        }
    }
}

/// What [`StoreError::Busy`] says: busy, or unable to store (so a read-only file is not
/// reported as busy).
fn busy_text(e: &sqlx::Error) -> &'static str {
    if is_storage_unavailable(e) {
        "the database cannot store anything now"
    } else {
        "the database is busy"
    }
}

/// Whether `e` is PostgreSQL refusing a text value it cannot store: `22021`
/// character_not_in_repertoire (a NUL byte in a `TEXT` value; SQLite stores it) or `22P05`
/// untranslatable_character. It is the request's input, not an outage (D-unstorable-text-is-422).
fn is_unstorable_text(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if matches!(db.code().as_deref(), Some("22021" | "22P05")))
}

/// Whether `e` means "the database did not answer in time" rather than a failure: no pool
/// connection in time; SQLite `SQLITE_BUSY`/`SQLITE_LOCKED` (primary codes 5 and 6, any extended
/// code); PostgreSQL `55P03` lock_not_available (`lock_timeout`) and `57014` query_canceled
/// (`statement_timeout`).
fn is_busy(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::PoolTimedOut => true,
        sqlx::Error::Database(db) => {
            matches!(sqlite_primary_code(&**db), Some(5 | 6))
                || matches!(db.code().as_deref(), Some("55P03" | "57014"))
        }
        _ => false,
    }
}

/// SQLite's primary result code (the low byte of its extended code) of an error SQLite raised
/// (through sqlx, or through rusqlite on the writer's thread);
/// `None` for another engine's (PostgreSQL's SQLSTATEs can be all digits too: `21000`).
fn sqlite_primary_code(db: &dyn sqlx::error::DatabaseError) -> Option<i32> {
    if let Some(raw) = db.try_downcast_ref::<sqlite_writer::RawSqliteError>() {
        // Raised on the writer's thread through rusqlite (D-writer-sync-transitions).
        return Some(raw.code & 0xff);
    }
    db.try_downcast_ref::<sqlx::sqlite::SqliteError>()?;
    db.code()?.parse::<i32>().ok().map(|c| c & 0xff)
}

/// Whether `e` is SQLite refusing to write a read-only file or folder (`SQLITE_READONLY` and its
/// extended codes, primary code 8): start-up names the file and its variable instead of failing
/// as if the database were busy (D-exit-2-or-3).
pub fn is_read_only(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if sqlite_primary_code(&**db) == Some(8))
}

/// Whether `e` means the database cannot take the request now for a reason outside the request:
/// SQLite `SQLITE_READONLY`, `SQLITE_IOERR`, `SQLITE_FULL`, `SQLITE_CANTOPEN` (primary codes 8,
/// 10, 13, 14); PostgreSQL classes `08` (connection exception) and `53` (insufficient resources:
/// disk full, out of memory, too many connections) and `57P01`–`57P03` (the server shutting down
/// or starting); a broken connection. Answered like busy: 503 with `Retry-After`, not a 500
/// (D-writes-failing-is-503-and-unready).
fn is_storage_unavailable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) => true,
        sqlx::Error::Database(db) => match sqlite_primary_code(&**db) {
            Some(primary) => matches!(primary, 8 | 10 | 13 | 14),
            None => db.code().is_some_and(|c| {
                c.starts_with("08")
                    || c.starts_with("53")
                    || matches!(&*c, "57P01" | "57P02" | "57P03")
            }),
        },
        _ => false,
    }
}

impl StoreError {
    /// Whether this is SQLite refusing to write a read-only file or folder ([`is_read_only`]).
    pub fn is_read_only(&self) -> bool {
        matches!(self, StoreError::Busy(e) | StoreError::Db(e) if is_read_only(e))
    }

    /// The same error about one import row (see [`import_row`]): the request's fault (conflict,
    /// invalid) says which row; any other error is not about a row and stays as it is.
    pub fn at_row(self, row: &str) -> Self {
        match self {
            StoreError::Conflict(m) => StoreError::Conflict(format!("{row}: {m}")),
            StoreError::Invalid(m) => StoreError::Invalid(format!("{row}: {m}")),
            StoreError::UnknownRef(m) => StoreError::UnknownRef(format!("{row}: {m}")),
            StoreError::UnknownAsset(m) => StoreError::UnknownAsset(format!("{row}: {m}")),
            e => e,
        }
    }

    /// An import part's error once earlier parts of the same import are committed (D-import-in-parts): its
    /// message says what landed and stays, so that the caller resends only the rest instead of
    /// learning it from a retry refused as conflicts (D-import-in-parts). Errors without a message of
    /// their own (busy, closed) are logged with the counts instead.
    #[must_use]
    pub fn after_committed(self, committed: &ImportCounts) -> Self {
        if *committed == ImportCounts::default() {
            return self;
        }
        let c = committed;
        let k = &c.skipped;
        let skipped = k.shops + k.accounts + k.cards + k.devices;
        let skipped = if skipped > 0 {
            format!(" ({skipped} rows already stored were skipped)")
        } else {
            String::new()
        };
        // Bindings go in deactivations first (D-import-bindings-end-state): the committed ones are not the
        // file's first rows, and need not be: an upsert sent again changes nothing.
        let bindings = if c.bindings > 0 {
            "; bindings went in deactivations first, not in the file's order: resend all of them \
             (they are upserts)"
        } else {
            ""
        };
        let landed = format!(
            "earlier parts of this import are committed and stay: {} shops, {} accounts, {} cards, \
             {} devices, {} bindings{skipped}; resend only the rows after them, or all of them with \
             ?existing=skip{bindings}",
            c.shops, c.accounts, c.cards, c.devices, c.bindings
        );
        match self {
            StoreError::Conflict(m) => StoreError::Conflict(format!("{m} ({landed})")),
            StoreError::Invalid(m) => StoreError::Invalid(format!("{m} ({landed})")),
            StoreError::UnknownRef(m) => StoreError::UnknownRef(format!("{m} ({landed})")),
            StoreError::UnknownAsset(m) => StoreError::UnknownAsset(format!("{m} ({landed})")),
            e => {
                tracing::warn!(error = %e, "import stopped: {landed}");
                e
            }
        }
    }
}

/// Names one row of an import in an error message: `cards row 17 (iccid 8981…)`, where `n` is
/// the row's 1-based position in its list of the request and `key` the row's key name and value
/// (D-import-refusals-name-the-row). A key that is not a well-formed identifier is left out, never echoed.
pub fn import_row(list: &str, n: usize, key: Option<(&str, &str)>) -> String {
    match key.filter(|(_, v)| crate::domain::parse_key("key", v).is_ok()) {
        Some((name, v)) => format!("{list} row {n} ({name} {v})"),
        None => format!("{list} row {n}"),
    }
}

impl sqlite_writer::WriterError for StoreError {
    fn closed() -> Self {
        StoreError::Closed
    }

    fn is_storage_failure(&self) -> bool {
        matches!(self, StoreError::Busy(e) if is_storage_unavailable(e))
    }
}

/// Result alias.
pub type StoreResult<T> = Result<T, StoreError>;

#[cfg(test)]
mod storage_failure_tests {
    use sqlite_writer::WriterError;
    use sqlx::{ConnectOptions, Connection};

    use super::StoreError;

    /// D-writes-failing-is-503-and-unready: a write SQLite refuses because it cannot store (here a read-only file;
    /// a full disk and an I/O error are the same class) counts as the writer failing; a lock
    /// held elsewhere past the timeout does not.
    #[tokio::test]
    async fn a_read_only_database_is_a_storage_failure_and_a_lock_wait_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let opts = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
            .busy_timeout(std::time::Duration::ZERO);
        let mut rw = opts.connect().await.unwrap();
        sqlx::query("CREATE TABLE t (v INTEGER)")
            .execute(&mut rw)
            .await
            .unwrap();
        let mut ro = opts.clone().read_only(true).connect().await.unwrap();
        let e = StoreError::from(
            sqlx::query("INSERT INTO t VALUES (1)")
                .execute(&mut ro)
                .await
                .unwrap_err(),
        );
        assert!(e.is_storage_failure(), "{e:?}");
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut rw)
            .await
            .unwrap();
        let mut other = opts.connect().await.unwrap();
        let e = StoreError::from(
            sqlx::query("BEGIN IMMEDIATE")
                .execute(&mut other)
                .await
                .unwrap_err(),
        );
        assert!(matches!(e, StoreError::Busy(_)), "{e:?}");
        assert!(!e.is_storage_failure(), "{e:?}");
        rw.close().await.unwrap();
    }
}
