//! Group commit on SQLite, shared by the order gateway (D-sqlite-writer-group-commit) and card-polling (D-sqlite-writer-group-commit).
//!
//! ONE task owns the only write connection. Write operations arrive over a channel; the writer
//! takes whatever is waiting (at most [`Settings::max_batch`]), runs it in ONE `BEGIN IMMEDIATE`
//! transaction with each operation inside its own SAVEPOINT (so one operation's error rolls back
//! only itself), commits, and only then answers every operation. Synchronous operations
//! ([`Writer::write_sync`]) first run without savepoints, and only when one of them fails does
//! their segment run again with one each (D-writer-savepoints).
//!
//! Why: with `synchronous=FULL` every commit is an fsync, and these disks do a few hundred to a
//! few thousand fsyncs per second. Batching makes durable throughput a multiple of the fsync rate,
//! and a single writer connection means no "database is locked" between our own writers.
//!
//! An operation sent with [`Writer::write_abandonable`] or [`Writer::write_sync_abandonable`] (the
//! gateway's lease attempts) is skipped
//! before it runs when its caller has gone away (its reply channel is closed: the HTTP request was
//! dropped), so a disconnected long-poll never takes a lease.
//!
//! [`Writer::open`] runs the writer on its own thread, held to one CPU together with sqlx's
//! thread for the connection: every statement is a hand-off between those two threads, and on a
//! virtual machine a hand-off to another CPU that has gone idle costs tens of microseconds, a
//! hand-off on the same CPU a few (D-writer-thread-one-cpu).
//!
//! With [`Settings::sync_after_commit`] (card-polling) the `COMMIT` does not fsync: a syncer thread
//! `fdatasync`s the WAL and answers the batch, while the writer already runs the next one
//! (D-writer-syncer-thread). Every answer still follows the data onto the disk.
//!
//! An operation sent with [`Writer::write_sync`] ([`SyncTransition`]) runs synchronously on the
//! writer's own thread, directly on the connection's handle through rusqlite while sqlx's lock on
//! it is held: no hand-off per statement at all (D-writer-sync-transitions). Consecutive synchronous operations
//! share one lock; a batch may mix both kinds.
//!
//! The writer knows nothing of what it runs: an operation is a boxed closure over the write
//! connection ([`Transition`], [`SyncTransition`]), its error type is the store's
//! ([`WriterError`]).
//!
//! Layout, one file each:
//! - `lib.rs`: the handle ([`Writer`]), its [`Settings`] and counters ([`WriteStats`]);
//! - `batch.rs`: the loop (`run`) and one batch (`run_batch`, its segments `sync_segment` and
//!   `async_segment`);
//! - `raw.rs`: the rusqlite wrapper of the write connection (`Raw`) and its errors
//!   ([`RawSqliteError`]);
//! - `syncer.rs`, `checkpointer.rs`: the threads of [`Settings::sync_after_commit`];
//! - `lock.rs`: the one-writer-process lock ([`FileLock`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use sqlx::sqlite::{SqliteConnectOptions, SqliteSynchronous};
use sqlx::{ConnectOptions, SqliteConnection};
use tokio::sync::{mpsc, oneshot};

mod batch;
mod checkpointer;
mod lock;
mod raw;
mod syncer;

use batch::{Pending, SyncPending, WriteOp, run};
use syncer::Syncer;

pub use checkpointer::{BACKSTOP_CHECKPOINT_PAGES, CHECKPOINT_EVERY, Checkpointer};
pub use lock::{FileLock, real_path};
pub use raw::{RawSqliteError, sqlx_error};

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
/// write connection's handle. Returning `Err` rolls back only this operation. It may run twice
/// in its batch (the first run's writes rolled back, D-writer-savepoints), so it must do nothing but
/// statements on the connection it is given; only its last run's result is answered.
pub type SyncTransition<T, E> = Box<dyn FnMut(&rusqlite::Connection) -> Result<T, E> + Send>;

/// An operation's answer, held until its batch is committed (and, with
/// [`sync_after_commit`](Settings::sync_after_commit), synced): called with the batch's error, or
/// `None` when it is durable. Made by the writer loop, called by it or by the syncer thread.
pub(crate) type Finish<E> = Box<dyn FnOnce(Option<E>) + Send>;

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
    /// statements (D-writer-syncer-thread). The price: a reader may see a commit before it is on disk (never
    /// a caller: every answer still waits for the sync).
    pub sync_after_commit: bool,
}

impl Default for Settings {
    /// 256 operations per batch, 8,192 queued: the gateway's sizes since D-sqlite-writer-group-commit.
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
    /// hold (D-writer-thread-one-cpu). Where the hold cannot be set (a restricted container) the writer runs
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
    /// D-writer-sync-transitions), in the next batch, rolled back alone if it fails like [`Self::write`]; answers
    /// once that batch is on disk. `op` must not block on anything but SQLite: the whole writer
    /// waits for it. Convert its rusqlite errors with [`sqlx_error`].
    ///
    /// # Errors
    /// As [`Self::write`].
    pub async fn write_sync<T: Send + 'static>(&self, op: SyncTransition<T, E>) -> Result<T, E> {
        self.send_sync(op, false).await
    }

    /// [`Self::write_sync`] for an operation nobody needs once its caller has gone (the gateway's
    /// lease attempts on the writer's thread): skipped, never run, when the caller dropped the
    /// future before the writer reached it, as [`Self::write_abandonable`].
    ///
    /// # Errors
    /// As [`Self::write`].
    pub async fn write_sync_abandonable<T: Send + 'static>(
        &self,
        op: SyncTransition<T, E>,
    ) -> Result<T, E> {
        self.send_sync(op, true).await
    }

    async fn send_sync<T: Send + 'static>(
        &self,
        op: SyncTransition<T, E>,
        abandonable: bool,
    ) -> Result<T, E> {
        let (reply, answer) = oneshot::channel();
        self.enqueue(WriteOp::Sync(Box::new(SyncPending {
            run: op,
            reply,
            result: None,
            abandonable,
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

pub(crate) fn mark(settings: &Settings, m: Mark) {
    if let Some(hook) = settings.marks {
        hook(m);
    }
}

/// Holds the calling thread, and every thread it creates from now on, to the CPU it runs on.
pub(crate) fn hold_to_current_cpu() {
    let cpu = rustix::thread::sched_getcpu();
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
        tracing::warn!(error = %e, cpu, "cannot hold the SQLite writer to one CPU; it runs unheld");
    }
}
