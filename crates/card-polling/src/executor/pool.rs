//! The executor pool: one execution queue per task type, fed by the scheduler, worked by at most
//! `cap` concurrent executions per task type. The priority lane, the ordinary manual trigger and
//! ordinary polling share these queues and this pool (spec: "no new infrastructure").
//!
//! Order: a task type's queue is FIFO. The scheduler appends each cycle's priority entries first,
//! then manual triggers, then ordinary shard batches, so a priority entry runs before this cycle's
//! ordinary work but never ahead of work already queued for its task type.
//!
//! Each ordinary entry remembers its shard: the per-shard count of queued ordinary entries is the
//! "shard queue depth" that back-pressure reads ([`crate::scheduler::backpressure`]).
//!
//! Ordinary outcomes are written in batches ([`ExecutorPool::flush`]): one transaction per batch
//! instead of one per poll.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{ExecOutcome, Executor};
use crate::scheduler::backpressure::ExecMeter;
use crate::store::{CardScope, PollRecord, StoreResult};

/// Ordinary outcomes buffered before a worker writes them itself.
pub const RECORD_BATCH: usize = 1_000;

/// One entry of an execution queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Job {
    /// A priority item (claimed by conditional update when it runs).
    Priority {
        /// Item id.
        item_id: i64,
    },
    /// An ordinary manual trigger.
    Manual {
        /// Trigger id.
        trigger_id: i64,
        /// Card.
        iccid: String,
    },
    /// An ordinary poll from a shard batch.
    Ordinary {
        /// Card.
        iccid: String,
        /// Shard it came from.
        shard: u32,
        /// The card's polling scope, read when the batch was taken (D-ordinary-scope-read-by-take).
        scope: CardScope,
    },
}

/// The three lanes that feed one execution queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    /// Priority items (hints and the recovery read).
    Priority,
    /// Ordinary manual triggers.
    Manual,
    /// Ordinary shard batches.
    Ordinary,
}

impl Job {
    /// The lane of this entry.
    pub const fn lane(&self) -> Lane {
        match self {
            Job::Priority { .. } => Lane::Priority,
            Job::Manual { .. } => Lane::Manual,
            Job::Ordinary { .. } => Lane::Ordinary,
        }
    }
}

#[derive(Debug, Default)]
struct TypeQueue {
    jobs: VecDeque<Job>,
    priority: usize,
    manual: usize,
    ordinary: usize,
    shard_depth: Vec<usize>,
    in_flight: usize,
    executed: [u64; 3],
    // Priority items queued or running: a hint and the recovery read never queue one twice.
    items: HashSet<i64>,
    /// When each queued priority item entered the queue (hint-to-execution latency).
    queued_since: std::collections::HashMap<i64, std::time::Instant>,
    // Manual triggers queued, running, or run but not yet recorded.
    manual_ids: HashSet<i64>,
    // Execution time per entry (back-pressure's execution rate).
    meter: ExecMeter,
    // Entries finished since start (any lane, any outcome).
    finished: u64,
    // The last throughput sample: (finished, injected-clock ms, queue non-empty then).
    sampled: Option<(u64, i64, bool)>,
}

/// Queue depths of one task type, per lane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueDepth {
    /// Task type.
    pub task_type: String,
    /// Queued priority entries.
    pub priority: usize,
    /// Queued manual trigger entries.
    pub manual: usize,
    /// Queued ordinary entries (sum of the shard queues).
    pub ordinary: usize,
    /// Ordinary entries per shard.
    pub shards: Vec<usize>,
    /// Executions running now.
    pub in_flight: usize,
    /// Priority entries executed since start: claimed by this instance and run (an entry whose
    /// claim was refused — held elsewhere, ended, clock skewed — is not counted).
    pub executed_priority: u64,
    /// Manual entries executed since start.
    pub executed_manual: u64,
    /// Ordinary entries executed since start.
    pub executed_ordinary: u64,
}

/// The pool.
pub struct ExecutorPool {
    executor: Executor,
    queues: BTreeMap<String, (Mutex<TypeQueue>, Notify)>,
    cap: usize,
    records: Mutex<Vec<PollRecord>>,
    flushing: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for ExecutorPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutorPool")
            .field("cap", &self.cap)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ExecutorPool {
    /// A pool over `executor` with one queue per configured task type, `shards` shard counters
    /// each, and at most `cap` concurrent executions per task type.
    pub fn new(executor: Executor, shards: u32, cap: usize) -> Self {
        let queues = executor
            .task_types()
            .names()
            .into_iter()
            .map(|n| {
                let q = TypeQueue {
                    shard_depth: vec![0; shards as usize],
                    ..TypeQueue::default()
                };
                (n, (Mutex::new(q), Notify::new()))
            })
            .collect();
        ExecutorPool {
            executor,
            queues,
            cap: cap.max(1),
            records: Mutex::new(Vec::new()),
            flushing: tokio::sync::Mutex::new(()),
        }
    }

    /// The executor.
    pub fn executor(&self) -> &Executor {
        &self.executor
    }

    fn push(&self, task_type: &str, jobs: impl IntoIterator<Item = Job>) -> usize {
        let Some((q, notify)) = self.queues.get(task_type) else {
            return 0;
        };
        let mut n = 0;
        {
            let mut q = lock(q);
            for job in jobs {
                match &job {
                    Job::Priority { item_id } => {
                        if !q.items.insert(*item_id) {
                            continue;
                        }
                        q.queued_since.insert(*item_id, std::time::Instant::now());
                        q.priority += 1;
                    }
                    Job::Manual { trigger_id, .. } => {
                        if !q.manual_ids.insert(*trigger_id) {
                            continue;
                        }
                        q.manual += 1;
                    }
                    Job::Ordinary { shard, .. } => {
                        q.ordinary += 1;
                        if let Some(d) = q.shard_depth.get_mut(*shard as usize) {
                            *d += 1;
                        }
                    }
                }
                q.jobs.push_back(job);
                n += 1;
            }
        }
        for _ in 0..n.min(self.cap) {
            notify.notify_one();
        }
        n
    }

    /// Appends priority items at the tail of their task type's queue; items already queued or
    /// running are skipped. Returns how many were appended.
    pub fn enqueue_priority(&self, task_type: &str, ids: &[i64]) -> usize {
        self.push(
            task_type,
            ids.iter().map(|&item_id| Job::Priority { item_id }),
        )
    }

    /// Appends ordinary manual triggers (skipping those already held). Returns how many.
    pub fn enqueue_manual(&self, task_type: &str, triggers: Vec<(i64, String)>) -> usize {
        self.push(
            task_type,
            triggers
                .into_iter()
                .map(|(trigger_id, iccid)| Job::Manual { trigger_id, iccid }),
        )
    }

    /// Appends one shard batch of ordinary polls (cards with the scope read when they were
    /// taken). Returns how many.
    pub fn enqueue_ordinary(
        &self,
        task_type: &str,
        shard: u32,
        cards: Vec<(String, CardScope)>,
    ) -> usize {
        self.push(
            task_type,
            cards.into_iter().map(|(iccid, scope)| Job::Ordinary {
                iccid,
                shard,
                scope,
            }),
        )
    }

    /// Executions per task type that may run at once.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Queued entries of a task type, all lanes (what a new hint would wait behind).
    pub fn queued(&self, task_type: &str) -> usize {
        self.queues
            .get(task_type)
            .map_or(0, |(q, _)| lock(q).jobs.len())
    }

    /// Measured executions per second of a task type's `cap` workers (`None` before the first
    /// execution; infinite when executions take no time by the injected clock).
    pub fn exec_rate(&self, task_type: &str) -> Option<f64> {
        self.queues
            .get(task_type)
            .and_then(|(q, _)| lock(q).meter.rate_per_s(self.cap))
    }

    /// Closes a throughput window of a task type at `now_ms` (injected clock, milliseconds) and
    /// opens the next: a window whose start and end both found the queue non-empty measured how
    /// fast busy workers finish ([`ExecMeter::observe_busy`], D-backpressure-seconds-of-work). The scheduler calls it
    /// once per cycle.
    pub fn sample_throughput(&self, task_type: &str, now_ms: i64) {
        let Some((q, _)) = self.queues.get(task_type) else {
            return;
        };
        let mut q = lock(q);
        let busy_now = !q.jobs.is_empty();
        if let Some((finished, at, busy_then)) = q.sampled
            && busy_then
            && busy_now
        {
            let done = q.finished - finished;
            q.meter.observe_busy(done, now_ms - at);
        }
        q.sampled = Some((q.finished, now_ms, busy_now));
    }

    /// Queued ordinary entries of one shard of a task type.
    pub fn shard_depth(&self, task_type: &str, shard: u32) -> usize {
        self.queues
            .get(task_type)
            .and_then(|(q, _)| lock(q).shard_depth.get(shard as usize).copied())
            .unwrap_or(0)
    }

    /// Depths per task type and lane.
    pub fn depths(&self) -> Vec<QueueDepth> {
        self.queues
            .iter()
            .map(|(tt, (q, _))| {
                let q = lock(q);
                QueueDepth {
                    task_type: tt.clone(),
                    priority: q.priority,
                    manual: q.manual,
                    ordinary: q.ordinary,
                    shards: q.shard_depth.clone(),
                    in_flight: q.in_flight,
                    executed_priority: q.executed[0],
                    executed_manual: q.executed[1],
                    executed_ordinary: q.executed[2],
                }
            })
            .collect()
    }

    /// The queued entries of a task type in execution order (tests and diagnostics).
    pub fn snapshot(&self, task_type: &str) -> Vec<Job> {
        self.queues
            .get(task_type)
            .map(|(q, _)| lock(q).jobs.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn pop(&self, task_type: &str) -> Option<Job> {
        let (q, _) = self.queues.get(task_type)?;
        let mut q = lock(q);
        let job = q.jobs.pop_front()?;
        match &job {
            Job::Priority { item_id } => {
                q.priority -= 1;
                if let Some(since) = q.queued_since.remove(item_id) {
                    self.executor.metrics().hint_to_execution(since.elapsed());
                }
            }
            Job::Manual { .. } => q.manual -= 1,
            Job::Ordinary { shard, .. } => {
                q.ordinary -= 1;
                if let Some(d) = q.shard_depth.get_mut(*shard as usize) {
                    *d = d.saturating_sub(1);
                }
            }
        }
        q.in_flight += 1;
        Some(job)
    }

    fn done(&self, task_type: &str, job: &Job, ok: bool, took_ms: i64) {
        let Some((q, _)) = self.queues.get(task_type) else {
            return;
        };
        let mut q = lock(q);
        q.in_flight -= 1;
        q.finished += 1;
        q.meter.record(took_ms);
        match job {
            Job::Priority { item_id } => {
                q.items.remove(item_id);
                if ok {
                    q.executed[0] += 1;
                }
            }
            Job::Manual { trigger_id, .. } => {
                if !ok {
                    q.manual_ids.remove(trigger_id);
                }
                q.executed[1] += 1;
            }
            Job::Ordinary { .. } => q.executed[2] += 1,
        }
    }

    async fn run_job(&self, task_type: &str, job: Job) {
        let now = self.executor.clock().now();
        let ok = match &job {
            // `ok` only when this entry's claim succeeded and its attempt ran: an entry whose
            // item another claimer holds, or that ended meanwhile, is not an execution.
            Job::Priority { item_id } => match self.executor.execute_one(*item_id, now).await {
                Ok(outcome) => outcome != ExecOutcome::Skipped,
                Err(e) => {
                    tracing::warn!(error = %e, item_id, "priority execution failed");
                    false
                }
            },
            Job::Manual { trigger_id, iccid } => {
                self.ordinary(task_type, iccid, Some(*trigger_id), None, now)
                    .await
            }
            Job::Ordinary { iccid, scope, .. } => {
                self.ordinary(task_type, iccid, None, Some(scope.clone()), now)
                    .await
            }
        };
        // Timed with the injected clock: a test's still clock measures 0 ms (no rate limit).
        let took_ms = self.executor.clock().now().as_millis() - now.as_millis();
        self.done(task_type, &job, ok, took_ms);
    }

    async fn ordinary(
        &self,
        task_type: &str,
        iccid: &str,
        trigger: Option<i64>,
        scope: Option<CardScope>,
        now: rakuten_types::Timestamp,
    ) -> bool {
        match self
            .executor
            .execute_ordinary(iccid, task_type, trigger, scope, now)
            .await
        {
            Ok(rec) => {
                let full = {
                    let mut r = lock(&self.records);
                    r.push(rec);
                    r.len() >= RECORD_BATCH
                };
                if full && let Err(e) = self.flush().await {
                    tracing::warn!(error = %e, "ordinary poll records not written");
                }
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, iccid, task_type, "ordinary poll failed");
                false
            }
        }
    }

    /// Writes the buffered ordinary outcomes in one transaction and releases their manual
    /// triggers. Returns how many were written.
    ///
    /// # Errors
    /// Storage failures (the records are kept for the next flush).
    pub async fn flush(&self) -> StoreResult<usize> {
        let _one = self.flushing.lock().await;
        let batch = std::mem::take(&mut *lock(&self.records));
        if batch.is_empty() {
            return Ok(0);
        }
        if let Err(e) = self.executor.store().poll_record(&batch).await {
            lock(&self.records).extend(batch);
            return Err(e);
        }
        for r in &batch {
            if let (Some(id), Some((q, _))) = (r.manual_trigger_id, self.queues.get(&r.task_type)) {
                lock(q).manual_ids.remove(&id);
            }
        }
        Ok(batch.len())
    }

    async fn work(&self, task_type: &str) {
        while let Some(job) = self.pop(task_type) {
            self.run_job(task_type, job).await;
        }
    }

    /// Runs every queued entry to the end (up to `cap` at a time per task type), then flushes.
    /// Tests and benchmarks drive the pool with this; `serve` uses [`ExecutorPool::run`].
    ///
    /// # Errors
    /// The final flush failed.
    pub async fn drain(&self) -> StoreResult<()> {
        let mut workers = Vec::new();
        for tt in self.queues.keys() {
            for _ in 0..self.cap {
                workers.push(self.work(tt));
            }
        }
        futures::future::join_all(workers).await;
        self.flush().await.map(|_| ())
    }

    /// Runs `cap` workers per task type and a writer that flushes the ordinary outcomes every
    /// `flush_every` until `shutdown`, then flushes once more.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken, flush_every: Duration) {
        let tasks = tokio_util::task::TaskTracker::new();
        {
            let (pool, stop) = (self.clone(), shutdown.clone());
            tasks.spawn(async move {
                loop {
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(flush_every) => {}
                    }
                    if let Err(e) = pool.flush().await {
                        tracing::warn!(error = %e, "ordinary poll records not written");
                    }
                }
            });
        }
        for tt in self.queues.keys() {
            for _ in 0..self.cap {
                let (pool, stop, tt) = (self.clone(), shutdown.clone(), tt.clone());
                tasks.spawn(async move {
                    let notify = &pool.queues[&tt].1;
                    loop {
                        pool.work(&tt).await;
                        tokio::select! {
                            () = stop.cancelled() => return,
                            () = notify.notified() => {}
                            () = tokio::time::sleep(Duration::from_millis(100)) => {}
                        }
                    }
                });
            }
        }
        tasks.close();
        tasks.wait().await;
        if let Err(e) = self.flush().await {
            tracing::warn!(error = %e, "ordinary poll records not written at shutdown");
        }
    }
}
