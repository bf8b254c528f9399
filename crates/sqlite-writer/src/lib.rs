//! Group commit on SQLite, shared by the order gateway (D-gw-3) and card-polling (D-gc-1).
//!
//! ONE task owns the only write connection. Write operations arrive over a channel; the writer
//! takes whatever is waiting (at most [`Settings::max_batch`]), runs it in ONE `BEGIN IMMEDIATE`
//! transaction with each operation inside its own SAVEPOINT (so one operation's error rolls back
//! only itself), commits, and only then answers every operation.
//!
//! Why: with `synchronous=FULL` every commit is an fsync, and these disks do a few hundred to a
//! few thousand fsyncs per second. Batching makes durable throughput a multiple of the fsync rate,
//! and a single writer connection means no "database is locked" between our own writers.
//!
//! An operation sent with [`Writer::write_abandonable`] (the gateway's lease attempts) is skipped
//! before it runs when its caller has gone away (its reply channel is closed: the HTTP request was
//! dropped), so a disconnected long-poll never takes a lease.
//!
//! [`Writer::open`] runs the writer on its own thread, held to one CPU together with sqlx's
//! thread for the connection: every statement is a hand-off between those two threads, and on a
//! virtual machine a hand-off to another CPU that has gone idle costs tens of microseconds, a
//! hand-off on the same CPU a few (D-scale7-1).
//!
//! With [`Settings::sync_after_commit`] (card-polling) the `COMMIT` does not fsync: a syncer thread
//! `fdatasync`s the WAL and answers the batch, while the writer already runs the next one
//! (D-scale8-1). Every answer still follows the data onto the disk.
//!
//! An operation sent with [`Writer::write_sync`] ([`SyncTransition`]) runs synchronously on the
//! writer's own thread, directly on the connection's handle through rusqlite while sqlx's lock on
//! it is held: no hand-off per statement at all (D-scale9-1). Consecutive synchronous operations
//! share one lock; a batch may mix both kinds.
//!
//! The writer knows nothing of what it runs: an operation is a boxed closure over the write
//! connection ([`Transition`], [`SyncTransition`]), its error type is the store's
//! ([`WriterError`]). Layout: this one file — the handle ([`Writer`]), the loop (`run`,
//! `run_batch`, its segments `sync_segment` and `async_segment`), the rusqlite wrapper (`Raw`),
//! the counters ([`WriteStats`]), the syncer (`Syncer`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use sqlx::sqlite::{LockedSqliteHandle, SqliteConnectOptions, SqliteSynchronous};
use sqlx::{ConnectOptions, Connection, SqliteConnection};
use tokio::sync::{mpsc, oneshot};

/// The error type of a store that uses the writer. `Clone` because one failed `BEGIN` or
/// `COMMIT` answers every operation of its batch; `From<sqlx::Error>` for those failures.
pub trait WriterError: From<sqlx::Error> + Clone + std::fmt::Debug + Send + 'static {
    /// The error of a write sent after [`Writer::shutdown`] began, or whose writer is gone
    /// (the services answer it as 503).
    fn closed() -> Self;

    /// Whether this error of one operation says the database cannot store anything now (a full
    /// disk, a read-only file, an I/O error), not something about the operation: it counts for
    /// [`Writer::failing`] like a failed `COMMIT`. Default: no.
    fn is_storage_failure(&self) -> bool {
        false
    }
}

/// How long after the last storage failure [`Writer::failing`] still says so, even when batches
/// commit meanwhile: on a nearly full disk small commits (the scheduler's) can still succeed
/// while every larger write fails, and readiness must not flap back to ready in between.
pub const FAILING_WINDOW: Duration = Duration::from_secs(10);

/// One write operation: runs on the write connection, inside the savepoint the writer opened for
/// it. Returning `Err` rolls back only this operation.
pub type Transition<T, E> =
    Box<dyn for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Result<T, E>> + Send>;

/// One synchronous write operation ([`Writer::write_sync`]): runs on the writer's thread on the
/// write connection's handle, inside the savepoint the writer opened for it. Returning `Err`
/// rolls back only this operation.
pub type SyncTransition<T, E> = Box<dyn FnOnce(&rusqlite::Connection) -> Result<T, E> + Send>;

/// A rusqlite error as an [`sqlx::Error`], so that a store classifies the errors of its
/// synchronous operations ([`SyncTransition`]) like those sqlx reports: SQLite's own failures
/// become [`sqlx::Error::Database`] holding a [`RawSqliteError`] with SQLite's extended result
/// code (as sqlx's `SqliteError` does); anything else (a value of the wrong type in a column)
/// [`sqlx::Error::Decode`].
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

/// A point of the writer's batch, for a timing probe ([`Settings::marks`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mark {
    /// A batch starts (`BEGIN IMMEDIATE` next).
    BatchBegin,
    /// The batch's operations ran, `COMMIT` (the fsync) next.
    CommitStart,
    /// `COMMIT` returned.
    CommitDone,
    /// The WAL's `fdatasync` returned, on the syncer thread ([`Settings::sync_after_commit`]
    /// only); the batch's answers follow.
    Synced,
}

/// How the writer is sized and observed.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Most operations committed together.
    pub max_batch: usize,
    /// Queue depth in front of the writer; senders wait (back-pressure) when it is full.
    pub queue: usize,
    /// Called at each [`Mark`] of every batch (the gateway's hand-off probe); `None`: nothing.
    pub marks: Option<fn(Mark)>,
    /// Where durability comes from. `false`: `COMMIT` itself fsyncs (the connection's
    /// `synchronous=FULL`) and the batch is answered when it returns. `true` (only with
    /// [`Writer::open`]): the writer commits with `synchronous=NORMAL`, hands the batch to a
    /// syncer thread that `fdatasync`s the WAL file, and the batch is answered after that sync;
    /// meanwhile the writer runs the next batch, so one batch's fsync overlaps the next one's
    /// statements (D-scale8-1). The price: a reader may see a commit before it is on disk (never
    /// a caller: every answer still waits for the sync).
    pub sync_after_commit: bool,
}

impl Default for Settings {
    /// 256 operations per batch, 8,192 queued: the gateway's sizes since D-gw-3.
    fn default() -> Self {
        Settings {
            max_batch: 256,
            queue: 8192,
            marks: None,
            sync_after_commit: false,
        }
    }
}

/// Called after each committed batch with its operation count and the time from `BEGIN` to the
/// end of `COMMIT` (the `/metrics` histograms).
pub type CommitHook = Box<dyn Fn(u64, Duration) + Send + Sync>;

/// Counters of the writer, for benchmarks and tests (operations per commit = per fsync).
#[derive(Default)]
pub struct WriteStats {
    /// Committed transactions.
    pub commits: AtomicU64,
    /// Operations run inside them (succeeded or rolled back to their savepoint).
    pub ops: AtomicU64,
    /// True from a batch whose `BEGIN` or `COMMIT` failed (or whose savepoints broke) until the
    /// next batch commits: the database takes no writes ([`Writer::failing`]).
    failing: std::sync::atomic::AtomicBool,
    /// When a batch or an operation last failed for storage reasons ([`FAILING_WINDOW`]).
    last_failure: Mutex<Option<Instant>>,
    /// Observer of each commit, set once ([`Writer::on_commit`]).
    on_commit: OnceLock<CommitHook>,
}

impl std::fmt::Debug for WriteStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteStats")
            .field("commits", &self.commits)
            .field("ops", &self.ops)
            .finish_non_exhaustive()
    }
}

impl WriteStats {
    /// A batch failed as a whole with `e`: failing until a batch commits, and for
    /// [`FAILING_WINDOW`] beyond if `e` is a storage failure (a lock held past the timeout is
    /// over once a batch commits; a full disk may let small commits through).
    fn batch_failed<E: WriterError>(&self, e: &E) {
        self.failing.store(true, Ordering::Relaxed);
        if e.is_storage_failure() {
            self.storage_failed();
        }
    }

    /// Marks a storage failure now: [`Writer::failing`] for [`FAILING_WINDOW`] from here.
    fn storage_failed(&self) {
        *self.last_failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    }

    /// `(commits, ops)` so far.
    pub fn snapshot(&self) -> (u64, u64) {
        (
            self.commits.load(Ordering::Relaxed),
            self.ops.load(Ordering::Relaxed),
        )
    }
}

/// The one-writer-process guard of a database file (D-newuser13-2): an exclusive advisory lock
/// (`flock`) on `<file>.lock`, next to it, held for as long as this value lives. The group-commit
/// writer assumes it is the only writer of its file; a second process on the same file would
/// make every write of both wait on SQLite's lock and the long-polls of one never hear of the
/// other's submits. The lock is a file of its own because closing any descriptor of the database
/// file itself would drop SQLite's own POSIX locks on it. The kernel releases it when the process
/// ends, however it ends; the empty `.lock` file stays and is harmless.
#[derive(Debug)]
pub struct FileLock {
    /// `None` where the lock file cannot be made (a folder this user cannot write): then SQLite
    /// cannot write the database either, and start-up reports that, naming the file.
    _held: Option<std::fs::File>,
}

impl FileLock {
    /// [`Self::acquire`]'s refusal in `e` because another process holds the lock, as its own
    /// words (a service reports it as "unavailable": exit 3, a supervisor retries); `None` for
    /// any other error.
    pub fn held_elsewhere(e: &sqlx::Error) -> Option<String> {
        match e {
            sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::WouldBlock => {
                Some(io.to_string())
            }
            _ => None,
        }
    }

    /// Takes the lock of `db_file` (creating `<db_file>.lock` if missing), without waiting.
    ///
    /// # Errors
    /// `io::ErrorKind::WouldBlock` with a message naming the lock file when another process
    /// holds it; the error of creating or opening the lock file otherwise.
    pub fn acquire(db_file: &std::path::Path) -> std::io::Result<Self> {
        // The file itself, whatever path names it: a symlink or another spelling of the path
        // must meet the same lock (a new user's second gateway came in through a symlink).
        let mut name = real_path(db_file).into_os_string();
        name.push(".lock");
        let path = PathBuf::from(name);
        let opened = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path);
        let mut file = match opened {
            Ok(file) => file,
            // A read-only folder or file system: an existing lock file still locks (`flock`
            // needs no write access); with none, no other process can write here either.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
                ) =>
            {
                match std::fs::File::open(&path) {
                    Ok(file) => file,
                    Err(_) => return Ok(FileLock { _held: None }),
                }
            }
            Err(e) => return Err(e),
        };
        match file.try_lock() {
            Ok(()) => {
                // Who holds it, for the next one's message; best effort, the lock is what
                // protects.
                use std::io::{Seek, Write};
                let _ = file
                    .set_len(0)
                    .and_then(|()| file.seek(std::io::SeekFrom::Start(0)))
                    .and_then(|_| writeln!(file, "pid {}", std::process::id()));
                Ok(FileLock { _held: Some(file) })
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                use std::io::Read;
                let mut note = String::new();
                let _ = (&file).take(64).read_to_string(&mut note);
                let holder = match note.trim() {
                    "" => String::new(),
                    note => format!(", {note}"),
                };
                Err(std::io::Error::new(
                    std::io::ErrorKind::WouldBlock,
                    format!(
                        "another process already writes {} (it holds {}{holder}); stop it, or give this one another file",
                        db_file.display(),
                        path.display()
                    ),
                ))
            }
            Err(std::fs::TryLockError::Error(e)) => Err(e),
        }
    }
}

/// `path` with every symlink resolved, as SQLite itself resolves it (its WAL and shared-memory
/// files sit next to the real file): the file's own path if it exists, else its folder's real
/// path joined with its name; `path` as it is when neither resolves.
pub fn real_path(path: &std::path::Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(path) {
        return real;
    }
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => {
            let dir = if dir.as_os_str().is_empty() {
                std::path::Path::new(".")
            } else {
                dir
            };
            std::fs::canonicalize(dir)
                .map(|d| d.join(name))
                .unwrap_or_else(|_| path.to_path_buf())
        }
        _ => path.to_path_buf(),
    }
}

/// The handle of a running writer: queues operations, answers each after its batch's commit.
pub struct Writer<E> {
    tx: Mutex<Option<mpsc::Sender<WriteOp<E>>>>,
    /// The file's one-writer lock ([`Self::hold_until_shutdown`]), released once the writer has
    /// closed its connection.
    lock: Mutex<Option<FileLock>>,
    /// Answered when the loop has ended and closed the connection; dropped unanswered if it
    /// panicked.
    done: tokio::sync::Mutex<Option<oneshot::Receiver<()>>>,
    stats: Arc<WriteStats>,
}

impl<E> std::fmt::Debug for Writer<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<E: WriterError> Writer<E> {
    /// Starts the writer as a task of the calling tokio runtime on `conn` (an open, migrated
    /// connection; the writer's from now on). Tests use it to hand in a connection they prepared;
    /// services use [`Self::open`]. Must be called inside a tokio runtime. Durability is the
    /// connection's own: [`Settings::sync_after_commit`] needs the file's path and is ignored here.
    pub fn start(conn: SqliteConnection, settings: Settings) -> Self {
        let (tx, rx) = mpsc::channel(settings.queue.max(1));
        let (done_tx, done) = oneshot::channel();
        let stats = Arc::new(WriteStats::default());
        let loop_stats = stats.clone();
        tokio::spawn(async move {
            run(conn, rx, loop_stats, settings, None).await;
            let _ = done_tx.send(());
        });
        Self::handle(tx, done, stats)
    }

    /// Opens the write connection with `opts` and starts the writer on a thread of its own
    /// (named `sqlite-writer`, with a single-threaded tokio runtime), held to the CPU it starts
    /// on together with the connection's sqlx thread, which it creates and which inherits the
    /// hold (D-scale7-1). Where the hold cannot be set (a restricted container) the writer runs
    /// unheld and says so in a WARN.
    ///
    /// With [`Settings::sync_after_commit`] the connection's `synchronous` becomes `NORMAL` and a
    /// second thread, `sqlite-syncer`, not held to any CPU (it mostly waits for the disk),
    /// `fdatasync`s `<file>-wal` after each commit and answers.
    ///
    /// # Errors
    /// When the connection cannot be opened, or a thread cannot be started (`sqlx::Error::Io`).
    pub async fn open(opts: SqliteConnectOptions, settings: Settings) -> Result<Self, sqlx::Error> {
        let (tx, rx) = mpsc::channel(settings.queue.max(1));
        let (done_tx, done) = oneshot::channel();
        let (opened_tx, opened) = oneshot::channel::<Result<(), sqlx::Error>>();
        let stats = Arc::new(WriteStats::default());
        let loop_stats = stats.clone();
        // SQLite writes the WAL next to the real file, whatever path names it (a symlink).
        let db_file = real_path(opts.get_filename());
        let (opts, syncer) = if settings.sync_after_commit {
            let mut wal = db_file.as_os_str().to_owned();
            wal.push("-wal");
            let syncer = Syncer::spawn(PathBuf::from(wal), stats.clone(), settings)
                .map_err(sqlx::Error::Io)?;
            let opts = opts
                .synchronous(SqliteSynchronous::Normal)
                .pragma("wal_autocheckpoint", BACKSTOP_CHECKPOINT_PAGES.to_string());
            (opts, Some(syncer))
        } else {
            (opts, None)
        };
        let (checkpointer_tx, checkpointer_rx) = oneshot::channel::<Checkpointer>();
        std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || {
                hold_to_current_cpu();
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = opened_tx.send(Err(sqlx::Error::Io(e)));
                        return;
                    }
                };
                rt.block_on(async move {
                    let conn = match opts.connect().await {
                        Ok(conn) => conn,
                        Err(e) => {
                            let _ = opened_tx.send(Err(e));
                            return;
                        }
                    };
                    let _ = opened_tx.send(Ok(()));
                    let checkpointer = checkpointer_rx.await.ok();
                    run(conn, rx, loop_stats, settings, syncer).await;
                    if let Some(checkpointer) = checkpointer {
                        checkpointer.finish().await;
                    }
                    let _ = done_tx.send(());
                });
            })
            .map_err(sqlx::Error::Io)?;
        opened.await.map_err(|_| sqlx::Error::WorkerCrashed)??;
        if settings.sync_after_commit {
            // Opened once the writer's connection is: the file exists and is in WAL mode.
            match Checkpointer::spawn(db_file, CHECKPOINT_EVERY) {
                Ok(checkpointer) => {
                    // The writer thread waits for it before its loop; it cannot be gone here.
                    let _ = checkpointer_tx.send(checkpointer);
                }
                Err(e) => {
                    // The backstop on the writer still bounds the WAL.
                    tracing::warn!(error = %e, "cannot start the checkpoint thread; the writer checkpoints every {BACKSTOP_CHECKPOINT_PAGES} pages itself");
                }
            }
        }
        Ok(Self::handle(tx, done, stats))
    }

    fn handle(
        tx: mpsc::Sender<WriteOp<E>>,
        done: oneshot::Receiver<()>,
        stats: Arc<WriteStats>,
    ) -> Self {
        Writer {
            tx: Mutex::new(Some(tx)),
            lock: Mutex::new(None),
            done: tokio::sync::Mutex::new(Some(done)),
            stats,
        }
    }

    /// Runs `op` in the next batch; answers once that batch is on disk (its `COMMIT` returned, or
    /// with [`Settings::sync_after_commit`] the WAL's `fdatasync` after it), with `op`'s own value
    /// or error, or the batch's `BEGIN`/`COMMIT`/sync error.
    ///
    /// # Errors
    /// `op`'s error; the batch's database error; [`WriterError::closed`] after shutdown.
    pub async fn write<T: Send + 'static>(&self, op: Transition<T, E>) -> Result<T, E> {
        self.send(op, false).await
    }

    /// [`Self::write`] for an operation nobody needs once its caller has gone (a lease attempt):
    /// skipped, never run, when the caller dropped the future before the writer reached it.
    ///
    /// # Errors
    /// As [`Self::write`].
    pub async fn write_abandonable<T: Send + 'static>(&self, op: Transition<T, E>) -> Result<T, E> {
        self.send(op, true).await
    }

    /// Runs `op` synchronously on the writer's own thread, directly on the write connection's
    /// handle (rusqlite over sqlx's locked handle: no round trip to sqlx's thread per statement,
    /// D-scale9-1), in the next batch, inside its own savepoint like [`Self::write`]; answers
    /// once that batch is on disk. `op` must not block on anything but SQLite: the whole writer
    /// waits for it. Convert its rusqlite errors with [`sqlx_error`].
    ///
    /// # Errors
    /// As [`Self::write`].
    pub async fn write_sync<T: Send + 'static>(&self, op: SyncTransition<T, E>) -> Result<T, E> {
        let (reply, answer) = oneshot::channel();
        self.enqueue(WriteOp::Sync(Box::new(Pending {
            run: op,
            reply,
            abandonable: false,
        })))
        .await?;
        // A dropped reply means the writer task ended without answering (it panicked).
        answer.await.map_err(|_| E::closed())?
    }

    async fn send<T: Send + 'static>(
        &self,
        op: Transition<T, E>,
        abandonable: bool,
    ) -> Result<T, E> {
        let (reply, answer) = oneshot::channel();
        self.enqueue(WriteOp::Async(Box::new(Pending {
            run: op,
            reply,
            abandonable,
        })))
        .await?;
        answer.await.map_err(|_| E::closed())?
    }

    async fn enqueue(&self, op: WriteOp<E>) -> Result<(), E> {
        let sender = self
            .tx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(E::closed)?;
        sender.send(op).await.map_err(|_| E::closed())
    }

    /// Whether the writer still takes work (false once [`Self::shutdown`] began).
    pub fn is_open(&self) -> bool {
        self.tx.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// `(commits, ops)` so far.
    pub fn stats(&self) -> (u64, u64) {
        self.stats.snapshot()
    }

    /// Whether writes are failing: the last batch failed as a whole (its `BEGIN`, `COMMIT` or
    /// savepoints: a full disk, an I/O error, a read-only file) and none has committed since, or
    /// a batch or an operation failed for storage reasons ([`WriterError::is_storage_failure`])
    /// within [`FAILING_WINDOW`]. Readiness probes report it; an operation's other errors (a
    /// conflict, a refused row) do not count.
    pub fn failing(&self) -> bool {
        self.failing_at(Instant::now())
    }

    /// [`Self::failing`] as of `now`: true while no batch has committed since a failed one, and
    /// for [`FAILING_WINDOW`] after the last storage failure of a batch or an operation.
    pub fn failing_at(&self, now: Instant) -> bool {
        self.stats.failing.load(Ordering::Relaxed)
            || self
                .stats
                .last_failure
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_some_and(|at| now.saturating_duration_since(at) < FAILING_WINDOW)
    }

    /// Observes each commit (operations, duration); only the first hook set is kept.
    pub fn on_commit(&self, hook: CommitHook) {
        let _ = self.stats.on_commit.set(hook);
    }

    /// Keeps `lock` (the database file's [`FileLock`]) until [`Self::shutdown`] has closed the
    /// write connection: a restarted store in the same process (a test, a supervisor in-process)
    /// may take it then, while handles of this one still exist.
    pub fn hold_until_shutdown(&self, lock: FileLock) {
        *self.lock.lock().unwrap_or_else(|e| e.into_inner()) = Some(lock);
    }

    /// Stops taking work, lets the writer run and commit what is already queued, and waits for it
    /// to close the write connection; then releases the file's lock, if it holds one. Later
    /// writes fail with [`WriterError::closed`]. Idempotent.
    pub async fn shutdown(&self) {
        drop(self.tx.lock().unwrap_or_else(|e| e.into_inner()).take());
        if let Some(done) = self.done.lock().await.take()
            && done.await.is_err()
        {
            tracing::error!("the writer ended without closing its connection (it panicked)");
        }
        drop(self.lock.lock().unwrap_or_else(|e| e.into_inner()).take());
    }
}

type Reply<T, E> = oneshot::Sender<Result<T, E>>;
type Finish<E> = Box<dyn FnOnce(Option<E>) + Send>;

/// One write operation and where to send its answer: run through sqlx (a [`Transition`]) or
/// synchronously on the writer's thread (a [`SyncTransition`]).
enum WriteOp<E> {
    Async(Box<dyn Job<E>>),
    Sync(Box<dyn SyncJob<E>>),
}

impl<E> WriteOp<E> {
    fn fail(self, e: E) {
        match self {
            WriteOp::Async(op) => op.fail(e),
            WriteOp::Sync(op) => op.fail(e),
        }
    }

    /// An abandonable operation nobody waits for any more.
    fn abandoned(&self) -> bool {
        match self {
            WriteOp::Async(op) => op.abandoned(),
            WriteOp::Sync(op) => op.abandoned(),
        }
    }
}

trait Job<E>: Send {
    fn abandoned(&self) -> bool;
    fn fail(self: Box<Self>, e: E);
    fn run(self: Box<Self>, conn: &mut SqliteConnection) -> BoxFuture<'_, (Ran, Finish<E>)>;
}

trait SyncJob<E>: Send {
    fn abandoned(&self) -> bool;
    fn fail(self: Box<Self>, e: E);
    fn run(self: Box<Self>, db: &rusqlite::Connection) -> (Ran, Finish<E>);
}

/// How an operation's own run ended (before the commit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ran {
    Ok,
    Failed,
    /// Failed because the database could not store ([`WriterError::is_storage_failure`]).
    StorageFailed,
}

struct Pending<R, T, E> {
    run: R,
    reply: Reply<T, E>,
    abandonable: bool,
}

impl<T: Send + 'static, E: WriterError> Job<E> for Pending<Transition<T, E>, T, E> {
    fn abandoned(&self) -> bool {
        self.abandonable && self.reply.is_closed()
    }

    fn fail(self: Box<Self>, e: E) {
        let _ = self.reply.send(Err(e));
    }

    fn run(self: Box<Self>, conn: &mut SqliteConnection) -> BoxFuture<'_, (Ran, Finish<E>)> {
        let Pending { run, reply, .. } = *self;
        Box::pin(async move { deferred(reply, run(conn).await) })
    }
}

impl<T: Send + 'static, E: WriterError> SyncJob<E> for Pending<SyncTransition<T, E>, T, E> {
    fn abandoned(&self) -> bool {
        self.abandonable && self.reply.is_closed()
    }

    fn fail(self: Box<Self>, e: E) {
        let _ = self.reply.send(Err(e));
    }

    fn run(self: Box<Self>, db: &rusqlite::Connection) -> (Ran, Finish<E>) {
        let Pending { run, reply, .. } = *self;
        deferred(reply, run(db))
    }
}

/// Holds a result until the commit is known, then answers.
fn deferred<T: Send + 'static, E: WriterError>(
    reply: Reply<T, E>,
    r: Result<T, E>,
) -> (Ran, Finish<E>) {
    let ran = match &r {
        Ok(_) => Ran::Ok,
        Err(e) if e.is_storage_failure() => Ran::StorageFailed,
        Err(_) => Ran::Failed,
    };
    let finish: Finish<E> = Box::new(move |commit_err| {
        let answer = match (r, commit_err) {
            (Err(e), _) => Err(e),
            (Ok(_), Some(e)) => Err(e),
            (Ok(v), None) => Ok(v),
        };
        let _ = reply.send(answer);
    });
    (ran, finish)
}

fn mark(settings: &Settings, m: Mark) {
    if let Some(hook) = settings.marks {
        hook(m);
    }
}

/// Holds the calling thread, and every thread it creates from now on, to the CPU it runs on.
fn hold_to_current_cpu() {
    let cpu = rustix::thread::sched_getcpu();
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
        tracing::warn!(error = %e, cpu, "cannot hold the SQLite writer to one CPU; it runs unheld");
    }
}

/// Statements in rusqlite's cache on the write connection: every distinct statement of the
/// synchronous operations (a few dozen) stays prepared.
const RAW_STATEMENT_CACHE: usize = 128;

/// The write connection's handle as a rusqlite connection ([`SyncTransition`]s), made on first
/// use and kept for its statement cache. Only ever touched while sqlx's lock on the handle is
/// held (`LockedSqliteHandle`): sqlx's thread then makes no call on it.
#[derive(Default)]
struct Raw(Option<rusqlite::Connection>);

impl Raw {
    /// The rusqlite connection over the locked handle.
    #[allow(
        unsafe_code,
        reason = "the only way to run statements on sqlx's handle (D-scale9-1)"
    )]
    fn attach(&mut self, handle: &mut LockedSqliteHandle<'_>) -> &rusqlite::Connection {
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
    async fn detach(&mut self, conn: &mut SqliteConnection) {
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

/// The writer loop; ends when every sender is dropped and the channel is drained.
async fn run<E: WriterError>(
    mut conn: SqliteConnection,
    mut rx: mpsc::Receiver<WriteOp<E>>,
    stats: Arc<WriteStats>,
    settings: Settings,
    syncer: Option<Syncer<E>>,
) {
    let max = settings.max_batch.max(1);
    let mut batch = Vec::with_capacity(max);
    let mut raw = Raw::default();
    while let Some(first) = rx.recv().await {
        batch.push(first);
        while batch.len() < max {
            match rx.try_recv() {
                Ok(op) => batch.push(op),
                Err(_) => break,
            }
        }
        let begin_failed = run_batch(
            &mut conn,
            &mut raw,
            &mut batch,
            &stats,
            &settings,
            syncer.as_ref(),
        )
        .await;
        if let Some(e) = begin_failed {
            // What is queued behind would meet the same lock (or the same full disk): fail it
            // now, rather than each batch waiting out the busy timeout in turn — behind the
            // scheduler's writes a request waited twice its bound (a new user's finding,
            // D-newuser13-3).
            while let Ok(op) = rx.try_recv() {
                op.fail(e.clone());
            }
        }
    }
    if let Some(syncer) = syncer {
        syncer.finish().await;
    }
    raw.detach(&mut conn).await;
    if let Err(e) = conn.close().await {
        tracing::warn!(error = %e, "closing the write connection failed");
    }
}

async fn exec(conn: &mut SqliteConnection, sql: &'static str) -> Result<(), sqlx::Error> {
    sqlx::query(sql).execute(&mut *conn).await?;
    Ok(())
}

/// Ends whatever is left of the batch's transaction. SQLite may have rolled it back already (after
/// an I/O error or a full disk it does so itself), so "no transaction is active" is expected and
/// ignored: the next batch starts from a connection outside any transaction either way.
async fn roll_back(conn: &mut SqliteConnection) {
    if let Err(e) = exec(conn, "ROLLBACK").await {
        tracing::debug!(error = %e, "ROLLBACK after a failed batch (SQLite had ended it)");
    }
}

/// Runs several statements in one call (one round trip to sqlx's connection thread); stops at
/// the first that fails.
async fn exec_many(conn: &mut SqliteConnection, sql: &'static str) -> Result<(), sqlx::Error> {
    sqlx::raw_sql(sql).execute(&mut *conn).await?;
    Ok(())
}

/// [`exec_many`] on the writer's thread.
fn exec_raw(db: &rusqlite::Connection, sql: &'static str) -> Result<(), sqlx::Error> {
    db.execute_batch(sql).map_err(sqlx_error)
}

/// Where the batch's transaction stands between its segments.
enum Tx<E> {
    /// `BEGIN` not sent yet (every operation so far was abandoned).
    NotBegun,
    /// Inside the transaction.
    Open,
    /// `BEGIN` failed: nothing ran.
    BeginFailed(E),
    /// A savepoint statement failed: the batch is rolled back.
    Broken(E),
}

/// Consecutive operations of the same kind in a batch.
enum Segment<E> {
    Async(Vec<Box<dyn Job<E>>>),
    Sync(Vec<Box<dyn SyncJob<E>>>),
}

impl<E: Clone> Segment<E> {
    /// Splits a batch into its segments, in order.
    fn split(ops: impl Iterator<Item = WriteOp<E>>) -> Vec<Segment<E>> {
        let mut out: Vec<Segment<E>> = Vec::new();
        for op in ops {
            match (op, out.last_mut()) {
                (WriteOp::Async(op), Some(Segment::Async(run))) => run.push(op),
                (WriteOp::Sync(op), Some(Segment::Sync(run))) => run.push(op),
                (WriteOp::Async(op), _) => out.push(Segment::Async(vec![op])),
                (WriteOp::Sync(op), _) => out.push(Segment::Sync(vec![op])),
            }
        }
        out
    }

    fn fail(self, e: &E) {
        match self {
            Segment::Async(ops) => ops.into_iter().for_each(|op| op.fail(e.clone())),
            Segment::Sync(ops) => ops.into_iter().for_each(|op| op.fail(e.clone())),
        }
    }
}

/// Runs a batch in one transaction, each operation inside its own savepoint. Consecutive
/// synchronous operations run on this thread directly on the connection's handle while sqlx's
/// lock on it is held (one round trip to sqlx's thread for the whole segment, D-scale9-1), with
/// their savepoints and the transaction's `BEGIN`/`COMMIT` when they start or end the batch;
/// asynchronous ones through sqlx, one round trip per statement.
async fn run_batch<E: WriterError>(
    conn: &mut SqliteConnection,
    raw: &mut Raw,
    batch: &mut Vec<WriteOp<E>>,
    stats: &WriteStats,
    settings: &Settings,
    syncer: Option<&Syncer<E>>,
) -> Option<E> {
    let segments = Segment::split(batch.drain(..).filter(|op| !op.abandoned()));
    if segments.is_empty() {
        return None;
    }
    let started = Instant::now();
    mark(settings, Mark::BatchBegin);
    // The transaction is driven with plain statements, not sqlx's `Transaction`: sqlx counts
    // its depth itself, and when SQLite has already rolled back on its own (an I/O error or a
    // full disk during COMMIT) sqlx's ROLLBACK fails, the count stays at 1 and every later
    // `begin` is refused — one full disk wedged the writer until a restart (D-newuser10-6).
    let last = segments.len() - 1;
    let mut tx: Tx<E> = Tx::NotBegun;
    let mut committed: Option<Result<(), E>> = None;
    let mut finishes: Vec<Finish<E>> = Vec::new();
    let mut segments = segments.into_iter().enumerate();
    for (k, segment) in segments.by_ref() {
        let commit = k == last;
        (tx, committed) = match segment {
            Segment::Sync(ops) => match conn.lock_handle().await {
                Ok(mut held) => {
                    let db = raw.attach(&mut held);
                    sync_segment(db, ops, tx, commit, &mut finishes, stats, settings)
                }
                Err(e) => {
                    let e = E::from(e);
                    stats.batch_failed(&e);
                    ops.into_iter().for_each(|op| op.fail(e.clone()));
                    (Tx::Broken(e), None)
                }
            },
            Segment::Async(ops) => {
                async_segment(conn, ops, tx, commit, &mut finishes, stats, settings).await
            }
        };
        if matches!(tx, Tx::BeginFailed(_) | Tx::Broken(_)) {
            break;
        }
    }
    let mut begin_failed = None;
    let failed = match (tx, committed) {
        (Tx::BeginFailed(e), _) => {
            tracing::error!(error = ?e, "BEGIN IMMEDIATE failed; failing the batch and what is queued");
            begin_failed = Some(e.clone());
            Some(e)
        }
        (Tx::Broken(e), _) => {
            tracing::error!(error = ?e, "savepoint handling failed; rolling the batch back");
            roll_back(conn).await;
            Some(e)
        }
        (_, Some(Err(e))) => {
            tracing::error!(error = ?e, "COMMIT failed; failing the batch");
            roll_back(conn).await;
            Some(e)
        }
        // Every operation was abandoned before it ran: no transaction, nothing to answer.
        (Tx::NotBegun, _) => return None,
        (Tx::Open, Some(Ok(()))) => None,
        (Tx::Open, None) => {
            // Not reached: the last segment commits. Kept so that no path leaves the
            // transaction open.
            let e = E::from(sqlx::Error::Protocol(
                "the batch ended without COMMIT".into(),
            ));
            roll_back(conn).await;
            Some(e)
        }
    };
    let n = finishes.len() as u64;
    match failed {
        None => {
            stats.failing.store(false, Ordering::Relaxed);
            stats.commits.fetch_add(1, Ordering::Relaxed);
            stats.ops.fetch_add(n, Ordering::Relaxed);
            if let Some(syncer) = syncer {
                // Answered by the syncer once the WAL is on disk; this thread goes on with the
                // next batch meanwhile.
                syncer.hand_over(Committed {
                    finishes,
                    n,
                    started,
                });
                return None;
            }
            if let Some(hook) = stats.on_commit.get() {
                hook(n, started.elapsed());
            }
            for finish in finishes {
                finish(None);
            }
        }
        Some(e) => {
            stats.batch_failed(&e);
            segments.for_each(|(_, segment)| segment.fail(&e));
            for finish in finishes {
                finish(Some(e.clone()));
            }
        }
    }
    begin_failed
}

/// The end of an operation's savepoint: released, or rolled back to and released.
fn savepoint_end(ran: Ran) -> &'static str {
    if ran == Ran::Ok {
        "RELEASE op"
    } else {
        "ROLLBACK TO op; RELEASE op"
    }
}

/// Runs a segment of synchronous operations on the locked handle `db`; sends `BEGIN` first if
/// the transaction has not begun, `COMMIT` at the end if `commit`. Returns the transaction's
/// state and, when it sent `COMMIT`, its result. An operation that did not run is failed here.
fn sync_segment<E: WriterError>(
    db: &rusqlite::Connection,
    ops: Vec<Box<dyn SyncJob<E>>>,
    mut tx: Tx<E>,
    commit: bool,
    finishes: &mut Vec<Finish<E>>,
    stats: &WriteStats,
    settings: &Settings,
) -> (Tx<E>, Option<Result<(), E>>) {
    let mut ops = ops.into_iter();
    while let Some(op) = ops.next() {
        // Checked again right before running: the caller may have gone while we waited.
        if op.abandoned() {
            continue;
        }
        if matches!(tx, Tx::NotBegun) {
            if let Err(e) = exec_raw(db, "BEGIN IMMEDIATE") {
                let e = E::from(e);
                // Failing before any answer: a caller that got this error and asks for
                // readiness right away must find the writer failing.
                stats.batch_failed(&e);
                op.fail(e.clone());
                ops.for_each(|op| op.fail(e.clone()));
                return (Tx::BeginFailed(e), None);
            }
            tx = Tx::Open;
        }
        if let Err(e) = exec_raw(db, "SAVEPOINT op") {
            let e = E::from(e);
            stats.batch_failed(&e);
            op.fail(e.clone());
            ops.for_each(|op| op.fail(e.clone()));
            return (Tx::Broken(e), None);
        }
        let (ran, finish) = op.run(db);
        if ran == Ran::StorageFailed {
            stats.storage_failed();
        }
        finishes.push(finish);
        if let Err(e) = exec_raw(db, savepoint_end(ran)) {
            let e = E::from(e);
            stats.batch_failed(&e);
            ops.for_each(|op| op.fail(e.clone()));
            return (Tx::Broken(e), None);
        }
    }
    if commit && matches!(tx, Tx::Open) {
        mark(settings, Mark::CommitStart);
        let committed = exec_raw(db, "COMMIT").map_err(E::from);
        mark(settings, Mark::CommitDone);
        return (tx, Some(committed));
    }
    (tx, None)
}

/// [`sync_segment`] for asynchronous operations, through sqlx: the end of one operation's
/// savepoint and the start of the next one's go in one round trip.
async fn async_segment<E: WriterError>(
    conn: &mut SqliteConnection,
    ops: Vec<Box<dyn Job<E>>>,
    mut tx: Tx<E>,
    commit: bool,
    finishes: &mut Vec<Finish<E>>,
    stats: &WriteStats,
    settings: &Settings,
) -> (Tx<E>, Option<Result<(), E>>) {
    let mut ops = ops.into_iter().peekable();
    // Whether the savepoint `op` is open: each operation's end releases it and, when another
    // operation follows, opens the next one in the same round trip to the connection's thread.
    let mut open = false;
    while let Some(op) = ops.next() {
        if op.abandoned() {
            continue;
        }
        if matches!(tx, Tx::NotBegun) {
            if let Err(e) = exec(conn, "BEGIN IMMEDIATE").await {
                let e = E::from(e);
                // Failing before any answer: a caller that got this error and asks for
                // readiness right away must find the writer failing.
                stats.batch_failed(&e);
                op.fail(e.clone());
                ops.for_each(|op| op.fail(e.clone()));
                return (Tx::BeginFailed(e), None);
            }
            tx = Tx::Open;
        }
        if !open && let Err(e) = exec(conn, "SAVEPOINT op").await {
            let e = E::from(e);
            stats.batch_failed(&e);
            op.fail(e.clone());
            ops.for_each(|op| op.fail(e.clone()));
            return (Tx::Broken(e), None);
        }
        let (ran, finish) = op.run(conn).await;
        if ran == Ran::StorageFailed {
            stats.storage_failed();
        }
        finishes.push(finish);
        let more = ops.peek().is_some();
        let end = match (ran == Ran::Ok, more) {
            (true, true) => "RELEASE op; SAVEPOINT op",
            (true, false) => "RELEASE op",
            (false, true) => "ROLLBACK TO op; RELEASE op; SAVEPOINT op",
            (false, false) => "ROLLBACK TO op; RELEASE op",
        };
        open = more;
        if let Err(e) = exec_many(conn, end).await {
            let e = E::from(e);
            stats.batch_failed(&e);
            ops.for_each(|op| op.fail(e.clone()));
            return (Tx::Broken(e), None);
        }
    }
    if open && let Err(e) = exec(conn, "RELEASE op").await {
        // The operations after the last one run were abandoned: close the savepoint they left.
        return (Tx::Broken(E::from(e)), None);
    }
    if commit && matches!(tx, Tx::Open) {
        mark(settings, Mark::CommitStart);
        let committed = exec(conn, "COMMIT").await.map_err(E::from);
        mark(settings, Mark::CommitDone);
        return (tx, Some(committed));
    }
    (tx, None)
}

/// How often the checkpoint thread of [`Settings::sync_after_commit`] copies the WAL into the
/// database file (`PRAGMA wal_checkpoint(PASSIVE)`).
pub const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);

/// The writer's own `wal_autocheckpoint` with [`Settings::sync_after_commit`], in pages (40 MiB
/// at 4 KiB pages): a backstop. The checkpoint thread copies frames while the writer keeps
/// appending, so it rarely finds the WAL fully copied at the moment the writer could start it
/// over; the writer's own checkpoint, run between two of its batches, always does, and finds
/// little left to copy. So the WAL stays under about this size (unless a reader holds an old
/// snapshot for long, as with any checkpoint).
pub const BACKSTOP_CHECKPOINT_PAGES: u32 = 10_000;

/// The checkpoint thread of [`Settings::sync_after_commit`] (D-scale9-2): a connection of its own
/// runs `PRAGMA wal_checkpoint(PASSIVE)` every [`CHECKPOINT_EVERY`], so the writer no longer stops
/// every 1,000 pages to copy the WAL into the database file and `fsync` both (SQLite's default
/// autocheckpoint, on the committing connection). A passive checkpoint waits for no reader or
/// writer; it copies what no reader still needs.
struct Checkpointer {
    stop: std::sync::mpsc::Sender<()>,
    /// Answered when the thread has ended.
    done: oneshot::Receiver<()>,
}

impl Checkpointer {
    fn spawn(
        db_file: PathBuf,
        every: Duration,
    ) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let db = rusqlite::Connection::open_with_flags(
            &db_file,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        // Never checkpoints on its own account (it commits nothing), and never waits for a lock.
        db.busy_timeout(Duration::ZERO)?;
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let (done_tx, done) = oneshot::channel();
        std::thread::Builder::new()
            .name("sqlite-checkpointer".into())
            .spawn(move || {
                let mut failing = false;
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(every)
                {
                    let ran = db.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
                        r.get::<_, i64>(0)
                    });
                    match ran {
                        Ok(_) if failing => {
                            failing = false;
                            tracing::info!(file = %db_file.display(), "WAL checkpoints succeed again");
                        }
                        Ok(_) => {}
                        Err(e) if !failing => {
                            failing = true;
                            tracing::warn!(error = %e, file = %db_file.display(),
                                "WAL checkpoint failed; retrying every {every:?}, the writer's own checkpoint still bounds the WAL");
                        }
                        Err(_) => {}
                    }
                }
                drop(db);
                let _ = done_tx.send(());
            })?;
        Ok(Checkpointer { stop, done })
    }

    /// Stops the thread (after the checkpoint it may be running) and waits for it to end.
    async fn finish(self) {
        drop(self.stop);
        if self.done.await.is_err() {
            tracing::error!(
                "the checkpoint thread ended without closing its connection (it panicked)"
            );
        }
    }
}

/// A committed batch waiting for the WAL's `fdatasync` ([`Settings::sync_after_commit`]).
struct Committed<E> {
    finishes: Vec<Finish<E>>,
    /// Operations in it.
    n: u64,
    /// When its `BEGIN` was sent: the commit hook's duration runs to the end of the sync.
    started: Instant,
}

/// The syncer thread of [`Settings::sync_after_commit`]: each round takes every batch committed
/// since the last one, `fdatasync`s the WAL once (the WAL is appended in commit order, so one
/// sync makes every earlier commit durable too) and answers them, in commit order.
struct Syncer<E> {
    tx: std::sync::mpsc::Sender<Committed<E>>,
    /// Answered when the thread has answered everything and ended.
    done: oneshot::Receiver<()>,
}

impl<E: WriterError> Syncer<E> {
    fn spawn(wal: PathBuf, stats: Arc<WriteStats>, settings: Settings) -> std::io::Result<Self> {
        let (tx, rx) = std::sync::mpsc::channel::<Committed<E>>();
        let (done_tx, done) = oneshot::channel();
        std::thread::Builder::new()
            .name("sqlite-syncer".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut round = vec![first];
                    round.extend(rx.try_iter());
                    // Opened each round (a few µs against the fsync's hundreds): the WAL is
                    // never replaced while the writer's connection is open, but a handle kept
                    // across rounds would have to trust that.
                    let synced = std::fs::File::open(&wal).and_then(|f| f.sync_data());
                    mark(&settings, Mark::Synced);
                    let failed = match synced {
                        Ok(()) => None,
                        Err(e) => {
                            tracing::error!(error = %e, wal = %wal.display(),
                                "fdatasync of the WAL failed; the batches it would have made durable fail");
                            let e = E::from(sqlx::Error::Io(e));
                            stats.batch_failed(&e);
                            Some(e)
                        }
                    };
                    for batch in round {
                        if failed.is_none()
                            && let Some(hook) = stats.on_commit.get()
                        {
                            hook(batch.n, batch.started.elapsed());
                        }
                        for finish in batch.finishes {
                            finish(failed.clone());
                        }
                    }
                }
                let _ = done_tx.send(());
            })?;
        Ok(Syncer { tx, done })
    }

    /// Queues a committed batch for the next sync; if the syncer thread is gone (it panicked),
    /// the batch's operations fail as a closed writer's would: their commit is not known durable.
    fn hand_over(&self, batch: Committed<E>) {
        if let Err(std::sync::mpsc::SendError(batch)) = self.tx.send(batch) {
            tracing::error!("the syncer thread is gone; failing a committed batch unsynced");
            for finish in batch.finishes {
                finish(Some(E::closed()));
            }
        }
    }

    /// Lets the thread sync and answer what it holds, and waits for it to end.
    async fn finish(self) {
        drop(self.tx);
        if self.done.await.is_err() {
            tracing::error!("the syncer thread ended without answering (it panicked)");
        }
    }
}
