//! One scheduling cycle ([`super::Scheduler::run_once`]) and its report.
//!
//! Per cycle, for every task type, in this order (within a step the task types' reads and takes
//! are sent together):
//! 1. drain the priority hint lane (up to `drain_max`) to the tail of the execution queue;
//! 2. drain the ordinary manual trigger lane (up to `drain_max`), plus manual triggers older than
//!    [`MANUAL_RECOVERY_GRACE`] still queued in the database (a lost manual lane);
//! 3. the recovery read: one bounded `SELECT` of due active priority items (pending and due, or
//!    running past their lease) — the persisted rows are authoritative, so a lost hint delays an
//!    item by at most one cycle;
//! 4. ordinary shard batches, up to the task type's budget of queued work
//!    ([`ordinary_budget`]: `RAKUTEN_POLL_BACKPRESSURE_SECS` at the measured execution rate),
//!    spread over the shards, skipping each shard whose queue is deeper than the per-shard bound
//!    (`RAKUTEN_POLL_BACKPRESSURE_DEPTH`); the takes of all task types are sent together.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::future::join_all;
use serde::Serialize;

use rakuten_types::Timestamp;

use super::Scheduler;
use super::backpressure::{floor_entries, ordinary_budget, skip_ordinary_batch};
use crate::executor::pool::QueueDepth;

/// Age after which a still-queued manual trigger is taken from the database (its lane entry
/// was lost); younger ones are left to the lane.
pub const MANUAL_RECOVERY_GRACE: Duration = Duration::from_secs(60);

/// What one cycle decided.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CycleReport {
    /// The cycle's `now`.
    pub at: Option<Timestamp>,
    /// Hints taken from each task type's hint lane.
    pub hints_taken: BTreeMap<String, usize>,
    /// Of those, appended to the execution queue (the rest were already queued or running).
    pub hints_queued: BTreeMap<String, usize>,
    /// Manual triggers taken per task type (lane plus database recovery).
    pub manual_taken: BTreeMap<String, usize>,
    /// Due active priority items found by the recovery read and queued (not already queued).
    pub due_items_recovered: BTreeMap<String, usize>,
    /// Ordinary cards taken per task type.
    pub ordinary_taken: BTreeMap<String, usize>,
    /// Ordinary shard batches skipped for back-pressure per task type.
    pub ordinary_skipped_for_backpressure: BTreeMap<String, usize>,
    /// Shards skipped, as `task_type/shard`.
    pub skipped_shards: Vec<String>,
    /// Ordinary entries each task type's queue had room for by the seconds-of-work rule (absent:
    /// no limit from that rule — it is off, or executions take no measurable time).
    pub ordinary_budget: BTreeMap<String, usize>,
    /// True when a task type took fewer ordinary entries than its shard batches would have
    /// because of that budget: the queue is being refilled as it drains, so the next cycle comes
    /// after a quarter tick.
    pub ordinary_cut_at_budget: bool,
    /// Lane or store failures during the cycle (logged; the next cycle retries).
    pub errors: Vec<String>,
    /// Wall time of the cycle, microseconds.
    pub duration_us: u64,
    /// Wall time per phase, microseconds.
    pub phases_us: CyclePhases,
    /// Queue depths after the cycle.
    pub depths: Vec<QueueDepth>,
}

/// Wall time of each phase of a cycle, microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CyclePhases {
    /// Writing the buffered ordinary outcomes (zero when the running pool writes them itself).
    pub flush: u64,
    /// Draining the hint lanes.
    pub hints: u64,
    /// Draining the manual lanes and the manual recovery read.
    pub manual: u64,
    /// The priority recovery read.
    pub recovery: u64,
    /// Taking the ordinary shard batches.
    pub ordinary: u64,
}

impl CycleReport {
    /// True when a lane was cut at its bound, or ordinary work at its budget: the next cycle
    /// should come sooner.
    pub fn saturated(&self, drain_max: usize, recovery_limit: usize) -> bool {
        self.ordinary_cut_at_budget
            || self.hints_taken.values().any(|&n| n >= drain_max)
            || self.manual_taken.values().any(|&n| n >= drain_max)
            || self.due_items_recovered.values().sum::<usize>() >= recovery_limit
    }
}

impl Scheduler {
    pub(super) async fn cycle(&self, now: Timestamp) -> CycleReport {
        let started = Instant::now();
        let cfg = &self.cfg;
        let mut r = CycleReport {
            at: Some(now),
            ..CycleReport::default()
        };
        let mut mark = Instant::now();
        let mut lap = || {
            let us = mark.elapsed().as_micros() as u64;
            mark = Instant::now();
            us
        };
        if !self.cfg.pool_flushes_itself
            && let Err(e) = self.pool.flush().await
        {
            r.errors.push(format!("flush: {e}"));
        }
        r.phases_us.flush = lap();
        let types = self.pool.executor().task_types().clone();
        // 1. priority hints. Within a phase the task types are independent (a queue each), so
        //    their reads go out together, one round trip's wait instead of one per task type
        //    (D-cycle-steps-run-task-types-together); the phases stay in order.
        let taken = join_all(
            types
                .all()
                .iter()
                .map(|tt| self.hints.take_hints(&tt.name, cfg.drain_max)),
        )
        .await;
        for (tt, result) in types.all().iter().zip(taken) {
            match result {
                Ok(ids) => {
                    let queued = self.pool.enqueue_priority(&tt.name, &ids);
                    r.hints_taken.insert(tt.name.clone(), ids.len());
                    r.hints_queued.insert(tt.name.clone(), queued);
                }
                Err(e) => r.errors.push(format!("hint lane {}: {e}", tt.name)),
            }
        }
        r.phases_us.hints = lap();
        // 2. ordinary manual triggers: the lane and the recovery read of every task type at once.
        let grace = now.minus(MANUAL_RECOVERY_GRACE);
        let taken = join_all(types.all().iter().map(|tt| async move {
            futures::join!(
                self.hints.take_manual(&tt.name, cfg.drain_max),
                self.store
                    .manual_trigger_queued(&tt.name, grace, cfg.drain_max as i64),
            )
        }))
        .await;
        for (tt, (lane, recovered)) in types.all().iter().zip(taken) {
            let mut taken = match lane {
                Ok(v) => v,
                Err(e) => {
                    r.errors.push(format!("manual lane {}: {e}", tt.name));
                    vec![]
                }
            };
            match recovered {
                Ok(rows) => taken.extend(rows.into_iter().map(|t| (t.id, t.iccid))),
                Err(e) => r.errors.push(format!("manual recovery {}: {e}", tt.name)),
            }
            let n = self.pool.enqueue_manual(&tt.name, taken);
            r.manual_taken.insert(tt.name.clone(), n);
        }
        r.phases_us.manual = lap();
        // 3. the recovery read
        match self.store.item_due_typed(now, cfg.recovery_limit).await {
            Ok(due) => {
                let mut by_type: BTreeMap<String, Vec<i64>> = BTreeMap::new();
                for d in due {
                    by_type.entry(d.task_type).or_default().push(d.id);
                }
                for tt in types.all() {
                    let ids = by_type.remove(&tt.name).unwrap_or_default();
                    let n = self.pool.enqueue_priority(&tt.name, &ids);
                    r.due_items_recovered.insert(tt.name.clone(), n);
                }
            }
            Err(e) => r.errors.push(format!("recovery read: {e}")),
        }
        r.phases_us.recovery = lap();
        // 4. ordinary shard batches: every task type's share is decided first, then all the
        //    takes are sent at once, so they share one writer batch (one wait behind the poll
        //    records queued before them, not one per task type; D-cycle-steps-run-task-types-together).
        let mut takes = Vec::new();
        for tt in types.all() {
            let mut take = Vec::new();
            let mut skipped = 0;
            for shard in 0..cfg.shards {
                if skip_ordinary_batch(
                    self.pool.shard_depth(&tt.name, shard),
                    cfg.backpressure_depth,
                ) {
                    skipped += 1;
                    r.skipped_shards.push(format!("{}/{shard}", tt.name));
                } else {
                    take.push(shard);
                }
            }
            // The seconds-of-work budget, spread over the shards that may take a batch.
            self.pool.sample_throughput(&tt.name, now.as_millis());
            let budget = if cfg.backpressure_work.is_zero() {
                usize::MAX
            } else {
                ordinary_budget(
                    self.pool.queued(&tt.name),
                    self.pool.exec_rate(&tt.name),
                    cfg.backpressure_work.as_secs_f64(),
                    floor_entries(self.pool.cap()),
                )
            };
            let mut per_shard = cfg.shard_batch;
            if budget != usize::MAX {
                r.ordinary_budget.insert(tt.name.clone(), budget);
                if budget == 0 {
                    for shard in take.drain(..) {
                        skipped += 1;
                        r.skipped_shards.push(format!("{}/{shard}", tt.name));
                    }
                } else {
                    let share = budget.div_ceil(take.len().max(1));
                    let share = i64::try_from(share).unwrap_or(i64::MAX);
                    if share < per_shard {
                        per_shard = share;
                    }
                }
                if budget == 0 {
                    r.ordinary_cut_at_budget = true;
                }
            }
            r.ordinary_skipped_for_backpressure
                .insert(tt.name.clone(), skipped);
            r.ordinary_taken.insert(tt.name.clone(), 0);
            if !take.is_empty() {
                takes.push((tt, take, per_shard));
            }
        }
        let taken = join_all(takes.iter().map(|(tt, take, per_shard)| {
            self.store
                .schedule_take_due(&tt.name, tt.interval, take, *per_shard, now)
        }))
        .await;
        for ((tt, _, per_shard), result) in takes.iter().zip(taken) {
            match result {
                Ok(batches) => {
                    // Cut at the budget only when a shard's share was filled (more may be due):
                    // an idle instance keeps its full tick.
                    if *per_shard < cfg.shard_batch
                        && batches.iter().any(|b| b.cards.len() as i64 >= *per_shard)
                    {
                        r.ordinary_cut_at_budget = true;
                    }
                    let mut n = 0;
                    for b in batches {
                        n += self.pool.enqueue_ordinary(&tt.name, b.shard, b.cards);
                    }
                    r.ordinary_taken.insert(tt.name.clone(), n);
                }
                Err(e) => r.errors.push(format!("ordinary batch {}: {e}", tt.name)),
            }
        }
        r.phases_us.ordinary = lap();
        for e in &r.errors {
            tracing::warn!(error = %e, "scheduling cycle");
        }
        r.depths = self.pool.depths();
        r.duration_us = started.elapsed().as_micros() as u64;
        r
    }
}
