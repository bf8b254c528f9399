//! Group commit: ONE task owns the only write connection. Write operations arrive over a channel;
//! the writer takes whatever is waiting (at most [`MAX_BATCH`]), runs it in ONE
//! `BEGIN IMMEDIATE` transaction with each operation inside its own SAVEPOINT (so one operation's
//! error rolls back only itself), commits, and only then answers every operation.
//!
//! Why: with `synchronous=FULL` every commit is an fsync, and these disks do a few hundred fsyncs
//! per second. Batching makes durable throughput a multiple of the fsync rate, and a single writer
//! connection means no "database is locked" between our own writers.
//!
//! A lease attempt (order or query) whose caller has gone away (its reply channel is closed: the HTTP request was
//! dropped) is skipped before it runs, so a disconnected long-poll never takes a lease.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rakuten_types::Timestamp;
use rakuten_types::order::{LeaseGrant, RenewAck, ReportAck, SubmitOrderAck};
use sqlx::{Connection, SqliteConnection};
use tokio::sync::{mpsc, oneshot};

use super::{ops, queries};
use crate::store::queries::{LapsedQuery, NewQuery, QueryLeaseRequest, QueryResultRecord};
use crate::store::{
    LeaseAttempt, LeaseRequest, NewReport, NewTask, ReclaimRequest, RenewRequest, StaleTask,
    StoreError,
};
use rakuten_types::QueryId;
use rakuten_types::query::{QueryGrant, QueryResultAck, SubmitQueryAck};

/// Most operations committed together.
pub const MAX_BATCH: usize = 256;

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;
type Finish = Box<dyn FnOnce(Option<StoreError>) + Send>;

/// One write operation and where to send its answer.
pub(crate) enum WriteOp {
    Insert(NewTask, Timestamp, Reply<SubmitOrderAck>),
    Lease(LeaseRequest, Timestamp, Reply<LeaseAttempt>),
    Renew(RenewRequest, Timestamp, Reply<RenewAck>),
    Report(NewReport, Timestamp, Reply<ReportAck>),
    Reclaim(ReclaimRequest, Timestamp, Reply<LeaseGrant>),
    Sweep(Timestamp, Reply<Vec<StaleTask>>),
    // The account-query channel (§11) shares the writer, so its commits share the fsyncs.
    QueryInsert(NewQuery, Timestamp, Reply<SubmitQueryAck>),
    QueryLease(QueryLeaseRequest, Timestamp, Reply<Option<QueryGrant>>),
    QueryResult(QueryResultRecord, Timestamp, Reply<QueryResultAck>),
    QueryRequeue(Timestamp, Reply<Vec<LapsedQuery>>),
    QueryExpire(Timestamp, Timestamp, Reply<Vec<QueryId>>),
    QueryPurge(Timestamp, Reply<u64>),
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

impl WriteOp {
    /// A lease attempt nobody waits for any more.
    fn abandoned(&self) -> bool {
        match self {
            WriteOp::Lease(_, _, reply) => reply.is_closed(),
            WriteOp::QueryLease(_, _, reply) => reply.is_closed(),
            _ => false,
        }
    }

    fn fail(self, e: StoreError) {
        match self {
            WriteOp::Insert(_, _, r) => drop(r.send(Err(e))),
            WriteOp::Lease(_, _, r) => drop(r.send(Err(e))),
            WriteOp::Renew(_, _, r) => drop(r.send(Err(e))),
            WriteOp::Report(_, _, r) => drop(r.send(Err(e))),
            WriteOp::Reclaim(_, _, r) => drop(r.send(Err(e))),
            WriteOp::Sweep(_, r) => drop(r.send(Err(e))),
            WriteOp::QueryInsert(_, _, r) => drop(r.send(Err(e))),
            WriteOp::QueryLease(_, _, r) => drop(r.send(Err(e))),
            WriteOp::QueryResult(_, _, r) => drop(r.send(Err(e))),
            WriteOp::QueryRequeue(_, r) => drop(r.send(Err(e))),
            WriteOp::QueryExpire(_, _, r) => drop(r.send(Err(e))),
            WriteOp::QueryPurge(_, r) => drop(r.send(Err(e))),
        }
    }

    async fn run(self, conn: &mut SqliteConnection) -> (bool, Finish) {
        match self {
            WriteOp::Insert(t, now, r) => deferred(r, ops::task_insert(conn, t, now).await),
            WriteOp::Lease(q, now, r) => deferred(r, ops::task_lease(conn, q, now).await),
            WriteOp::Renew(q, now, r) => deferred(r, ops::task_renew(conn, q, now).await),
            WriteOp::Report(q, now, r) => deferred(r, ops::task_report(conn, q, now).await),
            WriteOp::Reclaim(q, now, r) => deferred(r, ops::task_reclaim(conn, q, now).await),
            WriteOp::Sweep(now, r) => deferred(r, ops::task_mark_stale_expired(conn, now).await),
            WriteOp::QueryInsert(q, now, r) => {
                deferred(r, queries::query_insert(conn, q, now).await)
            }
            WriteOp::QueryLease(q, now, r) => {
                deferred(r, queries::query_lease_next(conn, q, now).await)
            }
            WriteOp::QueryResult(q, now, r) => {
                deferred(r, queries::query_record_result(conn, q, now).await)
            }
            WriteOp::QueryRequeue(now, r) => {
                deferred(r, queries::query_requeue_expired_leases(conn, now).await)
            }
            WriteOp::QueryExpire(before, now, r) => {
                deferred(r, queries::query_mark_expired(conn, before, now).await)
            }
            WriteOp::QueryPurge(before, r) => {
                deferred(r, queries::query_delete_terminal_before(conn, before).await)
            }
        }
    }
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
    let mut ops = batch.drain(..).filter(|op| !op.abandoned()).peekable();
    if ops.peek().is_none() {
        return;
    }
    let started = std::time::Instant::now();
    let mut tx = match conn.begin_with("BEGIN IMMEDIATE").await {
        Ok(tx) => tx,
        Err(e) => {
            tracing::error!(error = %e, "BEGIN IMMEDIATE failed; failing the batch");
            let e = StoreError::from(e);
            ops.for_each(|op| op.fail(e.clone()));
            return;
        }
    };
    let mut finishes: Vec<Finish> = Vec::new();
    let mut fatal: Option<StoreError> = None;
    for op in ops.by_ref() {
        // Checked again right before running: the caller may have gone while we waited.
        if op.abandoned() {
            continue;
        }
        if let Err(e) = exec(&mut tx, "SAVEPOINT op").await {
            op.fail(e.clone());
            fatal = Some(e);
            break;
        }
        let (ok, finish) = op.run(&mut tx).await;
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
            ops.for_each(|op| op.fail(e.clone()));
            Some(e)
        }
        None => match tx.commit().await {
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
        },
    };
    for finish in finishes {
        finish(outcome.clone());
    }
}
