//! The write connection's handle through rusqlite, for the synchronous operations
//! ([`SyncTransition`](crate::SyncTransition), D-writer-sync-transitions), and their errors as sqlx errors.

use sqlx::SqliteConnection;
use sqlx::sqlite::LockedSqliteHandle;

/// A rusqlite error as an [`sqlx::Error`], so that a store classifies the errors of its synchronous
/// operations ([`SyncTransition`](crate::SyncTransition)) like those sqlx reports: SQLite's own
/// failures become [`sqlx::Error::Database`] holding a [`RawSqliteError`] with SQLite's extended
/// result code (as sqlx's `SqliteError` does); anything else (a value of the wrong type in a
/// column) [`sqlx::Error::Decode`].
pub fn sqlx_error(e: rusqlite::Error) -> sqlx::Error {
    match e {
        rusqlite::Error::SqliteFailure(code, message) => {
            sqlx::Error::Database(Box::new(RawSqliteError {
                code: code.extended_code,
                message: message.unwrap_or_else(|| code.to_string()),
            }))
        }
        other => sqlx::Error::Decode(Box::new(other)),
    }
}

/// An error SQLite raised in a synchronous operation ([`sqlx_error`]). Its
/// [`code`](sqlx::error::DatabaseError::code) is SQLite's extended result code in decimal, as
/// sqlx's `SqliteError` gives it, so that code checks work on both.
#[derive(Debug)]
pub struct RawSqliteError {
    /// SQLite's extended result code (`SQLITE_CONSTRAINT_UNIQUE` = 2067, …).
    pub code: i32,
    /// SQLite's message.
    pub message: String,
}

impl std::fmt::Display for RawSqliteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "(code: {}) {}", self.code, self.message)
    }
}

impl std::error::Error for RawSqliteError {}

impl sqlx::error::DatabaseError for RawSqliteError {
    fn message(&self) -> &str {
        &self.message
    }

    fn code(&self) -> Option<std::borrow::Cow<'_, str>> {
        Some(self.code.to_string().into())
    }

    fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
        self
    }

    fn kind(&self) -> sqlx::error::ErrorKind {
        use rusqlite::ffi;
        match self.code {
            ffi::SQLITE_CONSTRAINT_UNIQUE | ffi::SQLITE_CONSTRAINT_PRIMARYKEY => {
                sqlx::error::ErrorKind::UniqueViolation
            }
            ffi::SQLITE_CONSTRAINT_FOREIGNKEY => sqlx::error::ErrorKind::ForeignKeyViolation,
            ffi::SQLITE_CONSTRAINT_NOTNULL => sqlx::error::ErrorKind::NotNullViolation,
            ffi::SQLITE_CONSTRAINT_CHECK => sqlx::error::ErrorKind::CheckViolation,
            _ => sqlx::error::ErrorKind::Other,
        }
    }
}

/// Statements in rusqlite's cache on the write connection: every distinct statement of the
/// synchronous operations (a few dozen) stays prepared.
const RAW_STATEMENT_CACHE: usize = 128;

/// The write connection's handle as a rusqlite connection
/// ([`SyncTransition`](crate::SyncTransition)s), made on first use and kept for its statement
/// cache. Only ever touched while sqlx's lock on the handle is held (`LockedSqliteHandle`): sqlx's
/// thread then makes no call on it.
#[derive(Default)]
pub(crate) struct Raw(Option<rusqlite::Connection>);

impl Raw {
    /// The rusqlite connection over the locked handle.
    #[allow(
        unsafe_code,
        reason = "the only way to run statements on sqlx's handle (D-writer-sync-transitions)"
    )]
    pub(crate) fn attach(&mut self, handle: &mut LockedSqliteHandle<'_>) -> &rusqlite::Connection {
        self.0.get_or_insert_with(|| {
            // SAFETY: the handle is the open write connection of sqlx, which outlives this
            // value (`run` drops it, under the lock, before closing the connection), and it is
            // used only while `handle` holds sqlx's lock, so no other thread calls into it.
            // `from_handle` never closes it.
            let db = unsafe { rusqlite::Connection::from_handle(handle.as_raw_handle().as_ptr()) }
                .expect("from_handle wraps a non-null handle and cannot fail");
            db.set_prepared_statement_cache_capacity(RAW_STATEMENT_CACHE);
            db
        })
    }

    /// Finalizes the cached statements under sqlx's lock, before the connection closes.
    pub(crate) async fn detach(&mut self, conn: &mut SqliteConnection) {
        if self.0.is_none() {
            return;
        }
        match conn.lock_handle().await {
            Ok(_held) => drop(self.0.take()),
            Err(e) => {
                tracing::warn!(error = %e, "cannot lock the write connection to finalize statements");
                // Leaked rather than finalized on a connection another thread may be using.
                std::mem::forget(self.0.take());
            }
        }
    }
}

/// `batch::exec_many` on the writer's thread.
pub(crate) fn exec_raw(db: &rusqlite::Connection, sql: &'static str) -> Result<(), sqlx::Error> {
    db.execute_batch(sql).map_err(sqlx_error)
}
