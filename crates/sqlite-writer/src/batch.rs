//! The writer loop (`run`) and one batch (`run_batch`): what is waiting, in one `BEGIN
//! IMMEDIATE` transaction, split into segments of consecutive operations of one kind — through
//! sqlx (`async_segment`, each operation in its own savepoint) or on the writer's thread through
//! rusqlite (`sync_segment`, optimistically without one, D-writer-savepoints) — then `COMMIT`, and only
//! then the answers.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use futures::future::BoxFuture;
use sqlx::{Connection, SqliteConnection};
use tokio::sync::{mpsc, oneshot};

use crate::raw::{Raw, exec_raw};
use crate::syncer::{Committed, Syncer};
use crate::{Finish, Mark, Settings, SyncTransition, Transition, WriteStats, WriterError, mark};

type Reply<T, E> = oneshot::Sender<Result<T, E>>;

/// One write operation and where to send its answer: run through sqlx (a [`Transition`]) or
/// synchronously on the writer's thread (a [`SyncTransition`]).
pub(crate) enum WriteOp<E> {
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

pub(crate) trait Job<E>: Send {
    fn abandoned(&self) -> bool;
    fn fail(self: Box<Self>, e: E);
    fn run(self: Box<Self>, conn: &mut SqliteConnection) -> BoxFuture<'_, (Ran, Finish<E>)>;
}

/// A synchronous operation: run (possibly twice, [`sync_segment`]) and then answered.
pub(crate) trait SyncJob<E>: Send {
    fn abandoned(&self) -> bool;
    fn fail(self: Box<Self>, e: E);
    /// Runs the operation; a later run replaces an earlier run's result (that run's writes were
    /// rolled back).
    fn run(&mut self, db: &rusqlite::Connection) -> Ran;
    /// The answer of its last run, sent once the commit is known.
    fn finish(self: Box<Self>) -> Finish<E>;
}

/// How an operation's own run ended (before the commit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ran {
    Ok,
    Failed,
    /// Failed because the database could not store ([`WriterError::is_storage_failure`]).
    StorageFailed,
}

pub(crate) struct Pending<R, T, E> {
    pub(crate) run: R,
    pub(crate) reply: Reply<T, E>,
    pub(crate) abandonable: bool,
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
        Box::pin(async move {
            let r = run(conn).await;
            (ran(&r), deferred(reply, r))
        })
    }
}

/// A [`SyncTransition`] waiting in a batch, with the result of its last run.
pub(crate) struct SyncPending<T, E> {
    pub(crate) run: SyncTransition<T, E>,
    pub(crate) reply: Reply<T, E>,
    pub(crate) result: Option<Result<T, E>>,
    pub(crate) abandonable: bool,
}

impl<T: Send + 'static, E: WriterError> SyncJob<E> for SyncPending<T, E> {
    fn abandoned(&self) -> bool {
        self.abandonable && self.reply.is_closed()
    }

    fn fail(self: Box<Self>, e: E) {
        let _ = self.reply.send(Err(e));
    }

    fn run(&mut self, db: &rusqlite::Connection) -> Ran {
        let r = (self.run)(db);
        let ran = ran(&r);
        self.result = Some(r);
        ran
    }

    fn finish(self: Box<Self>) -> Finish<E> {
        let SyncPending { reply, result, .. } = *self;
        let r = result.unwrap_or_else(|| {
            Err(E::from(sqlx::Error::Protocol(
                "a synchronous operation was answered without running".into(),
            )))
        });
        deferred(reply, r)
    }
}

/// How a result ends an operation's run.
fn ran<T, E: WriterError>(r: &Result<T, E>) -> Ran {
    match r {
        Ok(_) => Ran::Ok,
        Err(e) if e.is_storage_failure() => Ran::StorageFailed,
        Err(_) => Ran::Failed,
    }
}

/// Holds a result until the commit is known, then answers.
fn deferred<T: Send + 'static, E: WriterError>(reply: Reply<T, E>, r: Result<T, E>) -> Finish<E> {
    Box::new(move |commit_err| {
        let answer = match (r, commit_err) {
            (Err(e), _) => Err(e),
            (Ok(_), Some(e)) => Err(e),
            (Ok(v), None) => Ok(v),
        };
        let _ = reply.send(answer);
    })
}

/// The writer loop; ends when every sender is dropped and the channel is drained.
pub(crate) async fn run<E: WriterError>(
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
            // scheduler's writes a request would wait twice its bound
            // (D-writer-failed-begin-fails-queue).
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
/// lock on it is held (one round trip to sqlx's thread for the whole segment, D-writer-sync-transitions), with
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
    // `begin` is refused — one full disk wedged the writer until a restart (D-writes-failing-is-503-and-unready).
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
                Err(e) => (
                    Tx::Broken(fail_rest(e, stats, ops, |op, e| op.fail(e))),
                    None,
                ),
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

/// A batch statement failed with `e`: marks the writer failing first (a caller that gets this
/// error and asks for readiness right away must find it failing), then answers each of `ops` —
/// the operation it was for and every one after it — with the error, which it returns.
fn fail_rest<E: WriterError, O>(
    e: sqlx::Error,
    stats: &WriteStats,
    ops: impl IntoIterator<Item = O>,
    fail: impl Fn(O, E),
) -> E {
    let e = E::from(e);
    stats.batch_failed(&e);
    for op in ops {
        fail(op, e.clone());
    }
    e
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
///
/// Optimistic (D-writer-savepoints): the operations first run one after another with no savepoint of
/// their own — a savepoint costs two statements and a copy of every page the operation touches
/// into SQLite's statement journal (spilled to a temporary file past 64 KiB), a fifth of the
/// writer's time per merge. Only the segment is marked: by the transaction itself when the
/// segment begins it, otherwise by one savepoint around it. If any operation fails, the segment is
/// rolled back to that mark and run again the careful way ([`careful`]), each operation in its
/// own savepoint, so that a failed operation still rolls back only itself. An operation may thus
/// run twice; only its last run's result is answered.
fn sync_segment<E: WriterError>(
    db: &rusqlite::Connection,
    mut ops: Vec<Box<dyn SyncJob<E>>>,
    mut tx: Tx<E>,
    commit: bool,
    finishes: &mut Vec<Finish<E>>,
    stats: &WriteStats,
    settings: &Settings,
) -> (Tx<E>, Option<Result<(), E>>) {
    if !ops.is_empty() {
        let begins = matches!(tx, Tx::NotBegun);
        let mark = if begins {
            "BEGIN IMMEDIATE"
        } else {
            "SAVEPOINT segment"
        };
        if let Err(e) = exec_raw(db, mark) {
            let e = fail_rest(e, stats, ops, |op, e| op.fail(e));
            return (
                if begins {
                    Tx::BeginFailed(e)
                } else {
                    Tx::Broken(e)
                },
                None,
            );
        }
        tx = Tx::Open;
        let clean = ops.iter_mut().all(|op| op.run(db) == Ran::Ok);
        let outcome = if clean {
            finishes.extend(ops.into_iter().map(|op| op.finish()));
            Ok(())
        } else if begins {
            // SQLite may have ended the transaction itself (a full disk, an I/O error).
            let undone = if db.is_autocommit() {
                Ok(())
            } else {
                exec_raw(db, "ROLLBACK")
            };
            if let Err(e) = undone.and_then(|()| exec_raw(db, "BEGIN IMMEDIATE")) {
                let e = fail_rest(e, stats, ops, |op, e| op.fail(e));
                return (Tx::BeginFailed(e), None);
            }
            careful(db, ops, finishes, stats)
        } else {
            match exec_raw(db, "ROLLBACK TO segment") {
                Ok(()) => careful(db, ops, finishes, stats),
                Err(e) => Err(fail_rest(e, stats, ops, |op, e| op.fail(e))),
            }
        };
        if let Err(e) = outcome {
            return (Tx::Broken(e), None);
        }
        if !begins && let Err(e) = exec_raw(db, "RELEASE segment") {
            return (Tx::Broken(E::from(e)), None);
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

/// Runs `ops` again after their optimistic run was rolled back, each inside its own savepoint:
/// a failed operation rolls back only itself. Their answers go to `finishes`. `Err`: a savepoint
/// statement failed, the batch is broken, and every operation not yet answered has been failed
/// with that error.
fn careful<E: WriterError>(
    db: &rusqlite::Connection,
    ops: Vec<Box<dyn SyncJob<E>>>,
    finishes: &mut Vec<Finish<E>>,
    stats: &WriteStats,
) -> Result<(), E> {
    let mut ops = ops.into_iter();
    while let Some(mut op) = ops.next() {
        if let Err(e) = exec_raw(db, "SAVEPOINT op") {
            return Err(fail_rest(
                e,
                stats,
                std::iter::once(op).chain(ops),
                |op, e| op.fail(e),
            ));
        }
        let ran = op.run(db);
        if ran == Ran::StorageFailed {
            stats.storage_failed();
        }
        finishes.push(op.finish());
        if let Err(e) = exec_raw(db, savepoint_end(ran)) {
            return Err(fail_rest(e, stats, ops, |op, e| op.fail(e)));
        }
    }
    Ok(())
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
                let e = fail_rest(e, stats, std::iter::once(op).chain(ops), |op, e| op.fail(e));
                return (Tx::BeginFailed(e), None);
            }
            tx = Tx::Open;
        }
        if !open && let Err(e) = exec(conn, "SAVEPOINT op").await {
            let e = fail_rest(e, stats, std::iter::once(op).chain(ops), |op, e| op.fail(e));
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
            return (
                Tx::Broken(fail_rest(e, stats, ops, |op, e| op.fail(e))),
                None,
            );
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
