//! Group commit: ONE task owns the only write connection. Write operations arrive over a channel;
//! the writer takes whatever is waiting (at most [`MAX_BATCH`]), runs it in ONE
//! `BEGIN IMMEDIATE` transaction with each operation inside its own SAVEPOINT (so one operation's
//! error rolls back only itself), commits, and only then answers every operation.
//!
//! Why: with `synchronous=FULL` every commit is an fsync, and these disks do a few hundred fsyncs
//! per second. Batching makes durable throughput a multiple of the fsync rate, and a single writer
//! connection means no "database is locked" between our own writers.
//!
//! A lease attempt (order or query) whose caller has gone away (its reply channel is closed: the
//! HTTP request was dropped) is skipped before it runs, so a disconnected long-poll never takes a
//! lease.
//!
//! The writer runs any transition of the one SQL implementation ([`super::sql`]): an operation is
//! a boxed closure over the write connection, so the writer knows nothing of what it runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::BoxFuture;
use sqlx::{Connection, SqliteConnection};
use tokio::sync::{mpsc, oneshot};

use crate::lease::probe::{self, Step};
use crate::store::{StoreError, Transition};

/// Most operations committed together.
pub const MAX_BATCH: usize = 256;

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;
type Finish = Box<dyn FnOnce(Option<StoreError>) + Send>;

/// One write operation and where to send its answer.
pub(crate) struct WriteOp(Box<dyn Job>);

impl std::fmt::Debug for WriteOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WriteOp")
    }
}

impl WriteOp {
    /// `run` answered on `reply`; `lease`: skip it when nobody waits for the answer any more.
    pub(crate) fn new<T: Send + 'static>(
        run: Transition<SqliteConnection, T>,
        reply: Reply<T>,
        lease: bool,
    ) -> Self {
        WriteOp(Box::new(Pending { run, reply, lease }))
    }
}

trait Job: Send {
    fn abandoned(&self) -> bool;
    fn fail(self: Box<Self>, e: StoreError);
    fn run(self: Box<Self>, conn: &mut SqliteConnection) -> BoxFuture<'_, (bool, Finish)>;
}

struct Pending<T> {
    run: Transition<SqliteConnection, T>,
    reply: Reply<T>,
    lease: bool,
}

impl<T: Send + 'static> Job for Pending<T> {
    /// A lease attempt nobody waits for any more.
    fn abandoned(&self) -> bool {
        self.lease && self.reply.is_closed()
    }

    fn fail(self: Box<Self>, e: StoreError) {
        let _ = self.reply.send(Err(e));
    }

    fn run(self: Box<Self>, conn: &mut SqliteConnection) -> BoxFuture<'_, (bool, Finish)> {
        let Pending { run, reply, .. } = *self;
        Box::pin(async move { deferred(reply, run(conn).await) })
    }
}

/// Called after each committed batch with its operation count and the time from `BEGIN` to the
/// end of `COMMIT` (the `/metrics` histograms).
pub type CommitHook = Box<dyn Fn(u64, std::time::Duration) + Send + Sync>;

/// Counters of the writer, for the benchmark (operations per commit = operations per fsync).
#[derive(Default)]
pub struct WriteStats {
    /// Committed transactions.
    pub commits: AtomicU64,
    /// Operations run inside them (succeeded or rolled back to their savepoint).
    pub ops: AtomicU64,
    /// Observer of each commit, set once (`SqliteStore::on_commit`).
    pub on_commit: std::sync::OnceLock<CommitHook>,
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
    /// `(commits, ops)` so far.
    pub fn snapshot(&self) -> (u64, u64) {
        (
            self.commits.load(Ordering::Relaxed),
            self.ops.load(Ordering::Relaxed),
        )
    }
}

/// Holds a result until the commit is known, then answers.
fn deferred<T: Send + 'static>(reply: Reply<T>, r: Result<T, StoreError>) -> (bool, Finish) {
    let ok = r.is_ok();
    let finish: Finish = Box::new(move |commit_err| {
        let answer = match (r, commit_err) {
            (Err(e), _) => Err(e),
            (Ok(_), Some(e)) => Err(e),
            (Ok(v), None) => Ok(v),
        };
        let _ = reply.send(answer);
    });
    (ok, finish)
}

/// The writer loop; ends when every sender is dropped and the channel is drained.
pub(crate) async fn run(
    mut conn: SqliteConnection,
    mut rx: mpsc::Receiver<WriteOp>,
    stats: Arc<WriteStats>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = rx.recv().await {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(op) => batch.push(op),
                Err(_) => break,
            }
        }
        run_batch(&mut conn, &mut batch, &stats).await;
    }
    if let Err(e) = conn.close().await {
        tracing::warn!(error = %e, "closing the write connection failed");
    }
}

async fn exec(conn: &mut SqliteConnection, sql: &'static str) -> Result<(), StoreError> {
    sqlx::query(sql).execute(&mut *conn).await?;
    Ok(())
}

async fn run_batch(conn: &mut SqliteConnection, batch: &mut Vec<WriteOp>, stats: &WriteStats) {
    let mut ops = batch.drain(..).filter(|op| !op.0.abandoned()).peekable();
    if ops.peek().is_none() {
        return;
    }
    let started = std::time::Instant::now();
    probe::mark(Step::WriterBatchBegin);
    let mut tx = match conn.begin_with("BEGIN IMMEDIATE").await {
        Ok(tx) => tx,
        Err(e) => {
            tracing::error!(error = %e, "BEGIN IMMEDIATE failed; failing the batch");
            let e = StoreError::from(e);
            ops.for_each(|op| op.0.fail(e.clone()));
            return;
        }
    };
    let mut finishes: Vec<Finish> = Vec::new();
    let mut fatal: Option<StoreError> = None;
    for op in ops.by_ref() {
        // Checked again right before running: the caller may have gone while we waited.
        if op.0.abandoned() {
            continue;
        }
        if let Err(e) = exec(&mut tx, "SAVEPOINT op").await {
            op.0.fail(e.clone());
            fatal = Some(e);
            break;
        }
        let (ok, finish) = op.0.run(&mut tx).await;
        finishes.push(finish);
        let end = if ok {
            exec(&mut tx, "RELEASE op").await
        } else {
            match exec(&mut tx, "ROLLBACK TO op").await {
                Ok(()) => exec(&mut tx, "RELEASE op").await,
                Err(e) => Err(e),
            }
        };
        if let Err(e) = end {
            fatal = Some(e);
            break;
        }
    }
    let n = finishes.len() as u64;
    let outcome = match fatal {
        Some(e) => {
            tracing::error!(error = ?e, "savepoint handling failed; rolling the batch back");
            let _ = tx.rollback().await;
            ops.for_each(|op| op.0.fail(e.clone()));
            Some(e)
        }
        None => {
            probe::mark(Step::WriterCommitStart);
            let committed = tx.commit().await;
            probe::mark(Step::WriterCommitDone);
            match committed {
                Ok(()) => {
                    stats.commits.fetch_add(1, Ordering::Relaxed);
                    stats.ops.fetch_add(n, Ordering::Relaxed);
                    if let Some(hook) = stats.on_commit.get() {
                        hook(n, started.elapsed());
                    }
                    None
                }
                Err(e) => {
                    tracing::error!(error = %e, "COMMIT failed; failing the batch");
                    Some(StoreError::from(e))
                }
            }
        }
    };
    for finish in finishes {
        finish(outcome.clone());
    }
}
