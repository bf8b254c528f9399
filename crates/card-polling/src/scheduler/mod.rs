//! The scheduler (spec "优先调度与执行提示通道"): one loop that feeds the executor pool's
//! per-task-type queues from the priority hint lanes, the ordinary manual trigger lanes, the
//! recovery read and the ordinary shard batches — in that order, every cycle.
//!
//! - [`cycle`]: one cycle ([`Scheduler::run_once`]) and its [`cycle::CycleReport`].
//! - [`shard_queue`]: the stable card → shard hash and first-poll spreading.
//! - [`backpressure`]: how much ordinary work a cycle may queue (seconds of work at the measured
//!   execution rate, bounded by the per-shard depth).
//!
//! There is one scheduler and one executor pool: the priority lane only changes where its
//! entries enter the same queues (spec: "no new infrastructure").

pub mod backpressure;
pub mod cycle;
pub mod shard_queue;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use rakuten_types::{Clock, Timestamp};

pub use cycle::CycleReport;

use crate::executor::pool::ExecutorPool;
use crate::hints::Hints;
use crate::store::Store;

/// Scheduler settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// Shards per task type.
    pub shards: u32,
    /// Ordinary cards taken per shard per cycle.
    pub shard_batch: i64,
    /// Upper bound: a shard queue deeper than this skips its ordinary batch.
    pub backpressure_depth: usize,
    /// Queued work (entries ÷ measured execution rate) a task type's queue may hold before its
    /// ordinary batches stop ([`backpressure::ordinary_budget`]); zero turns the rule off.
    pub backpressure_work: Duration,
    /// Hints (and manual triggers) taken per task type per cycle.
    pub drain_max: usize,
    /// Due items the recovery read takes per cycle.
    pub recovery_limit: i64,
    /// Pause between cycles when nothing was cut at a bound.
    pub tick: Duration,
    /// True when the pool runs with [`ExecutorPool::run`], which writes the ordinary outcomes
    /// every tick itself; otherwise (tests driving [`ExecutorPool::drain`]) each cycle writes
    /// them first.
    pub pool_flushes_itself: bool,
}

/// The scheduler.
#[derive(Clone)]
pub struct Scheduler {
    store: Arc<dyn Store>,
    hints: Hints,
    pool: Arc<ExecutorPool>,
    clock: Arc<dyn Clock>,
    cfg: SchedulerConfig,
    last: Arc<Mutex<Option<CycleReport>>>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

impl Scheduler {
    /// A scheduler feeding `pool`.
    pub fn new(
        store: Arc<dyn Store>,
        hints: Hints,
        pool: Arc<ExecutorPool>,
        clock: Arc<dyn Clock>,
        cfg: SchedulerConfig,
    ) -> Self {
        Scheduler {
            store,
            hints,
            pool,
            clock,
            cfg,
            last: Arc::new(Mutex::new(None)),
        }
    }

    /// The same scheduler for a pool that runs with [`ExecutorPool::run`] (which writes the
    /// ordinary outcomes itself, off the cycle's path).
    pub fn flushed_by_pool(mut self) -> Self {
        self.cfg.pool_flushes_itself = true;
        self
    }

    /// The pool it feeds.
    pub fn pool(&self) -> &Arc<ExecutorPool> {
        &self.pool
    }

    /// The hint lanes.
    pub fn hints(&self) -> &Hints {
        &self.hints
    }

    /// Its settings.
    pub fn config(&self) -> &SchedulerConfig {
        &self.cfg
    }

    /// One cycle at `now` (see [`cycle`]); the report is also kept as the last cycle's.
    pub async fn run_once(&self, now: Timestamp) -> CycleReport {
        let r = self.cycle(now).await;
        self.pool()
            .executor()
            .metrics()
            .cycle(std::time::Duration::from_micros(r.duration_us));
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(r.clone());
        r
    }

    /// The last cycle's report.
    pub fn last_cycle(&self) -> Option<CycleReport> {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Cycles until `shutdown`: after a cycle that cut a lane at its bound the next one starts
    /// after a quarter tick, otherwise after a tick.
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            let r = self.run_once(self.clock.now()).await;
            let pause = if r.saturated(self.cfg.drain_max, self.cfg.recovery_limit as usize) {
                self.cfg.tick / 4
            } else {
                self.cfg.tick
            };
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(pause) => {}
            }
        }
    }
}
