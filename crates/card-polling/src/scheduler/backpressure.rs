//! Back-pressure (spec "分片队列积压"): how much ordinary work a scheduling cycle may add to a
//! task type's execution queue. It applies to ordinary batches only: priority hints, the recovery
//! read and manual triggers are never held back by it.
//!
//! A hint may never jump a queue that holds work of its task type (spec "同一任务类型的既有执行队列
//! MUST NOT 被插队"), so a hint waits for everything queued ahead of it. Back-pressure therefore
//! keeps each task type's queue short **in seconds of work**:
//!
//! - [`ExecMeter`] measures the execution time of each entry over the injected clock (an EWMA);
//!   the task type's execution rate is its concurrency ÷ that time ([`ExecMeter::rate_per_s`]),
//!   or, when lower, the rate its executions were measured to finish at while its queue stayed
//!   non-empty ([`ExecMeter::observe_busy`], D-backpressure-seconds-of-work): on a machine whose CPU the task types
//!   share, executions finish slower than concurrency ÷ time says, and a queue sized by that
//!   estimate would hold more than `secs` of work.
//! - [`ordinary_budget`]: a cycle may add ordinary entries up to `rate × secs` queued entries in
//!   total (`RAKUTEN_POLL_BACKPRESSURE_SECS`, default [`DEFAULT_SECS`]); never below a floor of a
//!   few entries per worker ([`floor_entries`]), so ordinary polling never stops however slow
//!   the carrier. Before the first execution is measured a cycle may queue the floor or
//!   [`UNMEASURED_ENTRIES`], whichever is more (D-backpressure-seconds-of-work): the first executions measure the
//!   rate within milliseconds, and a hint enqueued at start-up does not wait behind every shard's
//!   whole batch.
//! - The scheduler refills the queue every cycle as it drains (a cycle cut at this budget starts
//!   the next one after a quarter tick), so the workers stay busy — ordinary polling keeps its
//!   pace — as long as `secs` exceeds one cycle period.
//! - The per-shard depth (`RAKUTEN_POLL_BACKPRESSURE_DEPTH`, [`skip_ordinary_batch`]) stays as an
//!   upper bound: a shard queue deeper than it skips its batch whatever the rate says.

/// Default seconds of queued work a task type's execution queue may hold before ordinary batches
/// stop (`RAKUTEN_POLL_BACKPRESSURE_SECS`): a priority hint then waits ≈ this plus one cycle
/// (0.35 s: D-backpressure-seconds-of-work).
pub const DEFAULT_SECS: f64 = 0.35;

/// Weight of one new sample in the execution-time EWMA (≈ the last 32 executions).
pub const EWMA_ALPHA: f64 = 1.0 / 32.0;

/// Entries a task type's queue may hold before its first execution is measured, when the floor
/// is lower (D-backpressure-seconds-of-work).
pub const UNMEASURED_ENTRIES: usize = 256;

/// Queued entries per worker always allowed (so ordinary polling never starves, and the rate
/// is measured at start).
pub const FLOOR_PER_WORKER: usize = 4;

/// Whether a shard queue holding `depth` ordinary entries is too deep for another batch (the
/// per-shard upper bound, `RAKUTEN_POLL_BACKPRESSURE_DEPTH`).
pub const fn skip_ordinary_batch(depth: usize, threshold: usize) -> bool {
    depth > threshold
}

/// The entries always allowed in a task type's queue with `concurrency` workers.
pub const fn floor_entries(concurrency: usize) -> usize {
    concurrency.saturating_mul(FLOOR_PER_WORKER)
}

/// Weight of one new window in the busy-throughput EWMA (windows are one scheduling cycle).
pub const BUSY_ALPHA: f64 = 0.25;

/// Execution time per entry of one task type, an EWMA over the injected clock (milliseconds), and
/// the rate executions finished at while the queue stayed busy (executions per second).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ExecMeter {
    ewma_ms: Option<f64>,
    busy_per_s: Option<f64>,
}

impl ExecMeter {
    /// Records one execution that took `ms` milliseconds by the injected clock (negative values,
    /// a clock stepped back, count as 0).
    pub fn record(&mut self, ms: i64) {
        let x = ms.max(0) as f64;
        self.ewma_ms = Some(match self.ewma_ms {
            None => x,
            Some(m) => m + EWMA_ALPHA * (x - m),
        });
    }

    /// The mean execution time, milliseconds (`None` before the first execution).
    pub fn mean_ms(&self) -> Option<f64> {
        self.ewma_ms
    }

    /// Records one window of `ms` milliseconds (injected clock) in which `finished` executions
    /// ended while the queue held entries at its start and at its end, i.e. the workers had work
    /// throughout: the rate they really finish at. Windows of no measurable length are ignored.
    pub fn observe_busy(&mut self, finished: u64, ms: i64) {
        if ms <= 0 {
            return;
        }
        let x = finished as f64 * 1000.0 / ms as f64;
        self.busy_per_s = Some(match self.busy_per_s {
            None => x,
            Some(r) => r + BUSY_ALPHA * (x - r),
        });
    }

    /// The rate executions finished at while busy, per second (`None` before a busy window).
    pub fn busy_per_s(&self) -> Option<f64> {
        self.busy_per_s
    }

    /// Executions per second `concurrency` workers sustain: `None` before the first execution,
    /// infinite when executions take no measurable time (a clock that does not move, as in tests);
    /// never above the rate they were measured to finish at while busy.
    pub fn rate_per_s(&self, concurrency: usize) -> Option<f64> {
        self.ewma_ms.map(|m| {
            let by_time = if m <= 0.0 {
                f64::INFINITY
            } else {
                concurrency as f64 * 1000.0 / m
            };
            match self.busy_per_s {
                // A busy window in which nothing finished says nothing about the rate.
                Some(b) if b > 0.0 => by_time.min(b),
                _ => by_time,
            }
        })
    }
}

/// How many ordinary entries a cycle may append to a task type's queue that holds `queued`
/// entries (all lanes), given its execution rate, the target `secs` of queued work and the floor
/// ([`floor_entries`]); before anything was measured (`None`), the floor or
/// [`UNMEASURED_ENTRIES`], whichever is more. `usize::MAX` (only the per-shard depth bound
/// applies) when `secs <= 0` turns the rule off, or for an unbounded rate.
pub fn ordinary_budget(queued: usize, rate_per_s: Option<f64>, secs: f64, floor: usize) -> usize {
    if secs <= 0.0 {
        return usize::MAX;
    }
    let target = match rate_per_s {
        // Nothing measured yet (the first cycle after start): a bounded first helping; the
        // first executions measure the rate within milliseconds.
        None => floor.max(UNMEASURED_ENTRIES),
        Some(r) if !r.is_finite() => return usize::MAX,
        Some(r) => {
            let t = r * secs;
            if t >= usize::MAX as f64 {
                return usize::MAX;
            }
            (t.ceil() as usize).max(floor)
        }
    };
    target.saturating_sub(queued)
}

#[cfg(test)]
mod tests {
    use super::*;

    use rakuten_types::{Clock, ManualClock};

    #[test]
    fn only_a_depth_above_the_threshold_skips() {
        assert!(!skip_ordinary_batch(10, 10));
        assert!(skip_ordinary_batch(11, 10));
    }

    /// Executions timed with the injected clock, as the pool does.
    fn run(meter: &mut ExecMeter, clock: &ManualClock, n: usize, ms: u64) {
        for _ in 0..n {
            let start = clock.now();
            clock.advance(std::time::Duration::from_millis(ms));
            meter.record(clock.now().as_millis() - start.as_millis());
        }
    }

    #[test]
    fn the_execution_rate_is_measured_over_the_injected_clock() {
        let clock = ManualClock::at_fixed_date();
        let mut m = ExecMeter::default();
        assert_eq!(m.rate_per_s(16), None);
        run(&mut m, &clock, 10, 20);
        assert_eq!(m.mean_ms(), Some(20.0));
        // 16 workers at 20 ms each: 800 executions per second.
        assert_eq!(m.rate_per_s(16), Some(800.0));
        // Slower executions pull the average along.
        run(&mut m, &clock, 200, 40);
        let r = m.rate_per_s(16).unwrap();
        assert!((400.0..420.0).contains(&r), "{r}");
        // A clock that does not move: executions take no time, the rate is unbounded.
        let mut still = ExecMeter::default();
        run(&mut still, &clock, 3, 0);
        assert_eq!(still.rate_per_s(16), Some(f64::INFINITY));
    }

    #[test]
    fn the_rate_never_exceeds_what_busy_workers_were_measured_to_finish() {
        let clock = ManualClock::at_fixed_date();
        let mut m = ExecMeter::default();
        run(&mut m, &clock, 10, 20);
        // 128 workers at 20 ms each would finish 6,400 a second…
        assert_eq!(m.rate_per_s(128), Some(6_400.0));
        // …but with the queue busy throughout they finished 1,800 in one second (a CPU shared
        // by the other task types): the budget follows what was measured.
        m.observe_busy(1_800, 1_000);
        assert_eq!(m.rate_per_s(128), Some(1_800.0));
        assert_eq!(ordinary_budget(0, m.rate_per_s(128), 0.5, 64), 900);
        // Windows pull the estimate along; the estimate by time stays the ceiling.
        for _ in 0..40 {
            m.observe_busy(3_000, 500);
        }
        let r = m.rate_per_s(128).unwrap();
        assert!((5_900.0..=6_000.0).contains(&r), "{r}");
        for _ in 0..40 {
            m.observe_busy(10_000, 1_000);
        }
        assert_eq!(m.rate_per_s(128), Some(6_400.0));
        // A window of no measurable length (a still clock) records nothing; one in which
        // nothing finished does not make the rate zero.
        let mut still = ExecMeter::default();
        run(&mut still, &clock, 3, 20);
        still.observe_busy(500, 0);
        assert_eq!(still.busy_per_s(), None);
        still.observe_busy(0, 250);
        assert_eq!(still.rate_per_s(16), Some(800.0));
    }

    #[test]
    fn the_threshold_follows_the_measured_rate() {
        let clock = ManualClock::at_fixed_date();
        let mut m = ExecMeter::default();
        run(&mut m, &clock, 50, 20);
        // 800/s × 0.5 s = 400 entries of queued work allowed.
        assert_eq!(ordinary_budget(0, m.rate_per_s(16), 0.5, 64), 400);
        assert_eq!(ordinary_budget(150, m.rate_per_s(16), 0.5, 64), 250);
        assert_eq!(ordinary_budget(400, m.rate_per_s(16), 0.5, 64), 0);
        // The carrier slows to 100 ms a call: 160/s, so 80 entries.
        run(&mut m, &clock, 400, 100);
        let b = ordinary_budget(0, m.rate_per_s(16), 0.5, 64);
        assert!((80..=82).contains(&b), "{b}");
        // Twice the workers, twice the entries.
        let b2 = ordinary_budget(0, m.rate_per_s(32), 0.5, 64);
        assert!((160..=164).contains(&b2), "{b2}");
        // Off: only the per-shard depth bound applies.
        assert_eq!(
            ordinary_budget(10_000, m.rate_per_s(16), 0.0, 64),
            usize::MAX
        );
        // Unmeasurably fast executions (a still clock): no limit from this rule.
        assert_eq!(
            ordinary_budget(10_000, Some(f64::INFINITY), 0.5, 64),
            usize::MAX
        );
    }

    #[test]
    fn ordinary_polling_never_starves_below_the_floor() {
        // Not measured yet: a bounded first helping, so work flows and a rate is measured
        // without every shard's batch queued ahead of a start-up hint (D-backpressure-seconds-of-work).
        assert_eq!(ordinary_budget(0, None, 0.5, floor_entries(16)), 256);
        assert_eq!(ordinary_budget(200, None, 0.5, floor_entries(16)), 56);
        assert_eq!(ordinary_budget(5_000, None, 0.5, floor_entries(16)), 0);
        assert_eq!(ordinary_budget(0, None, 0.5, floor_entries(128)), 512);
        // An extremely slow carrier (30 s a call): rate × secs ≈ 0.27 entries, the floor wins.
        let clock = ManualClock::at_fixed_date();
        let mut m = ExecMeter::default();
        run(&mut m, &clock, 5, 30_000);
        assert_eq!(ordinary_budget(0, m.rate_per_s(16), 0.5, 64), 64);
        assert_eq!(ordinary_budget(63, m.rate_per_s(16), 0.5, 64), 1);
        // A queue that drains gets room again at the next cycle: the refill keeps pace.
        let mut fast = ExecMeter::default();
        run(&mut fast, &clock, 5, 20);
        let mut queued = 0;
        let mut executed = 0;
        for _cycle in 0..40 {
            queued += ordinary_budget(queued, fast.rate_per_s(16), 0.5, 64);
            // 0.25 s between cycles at 800/s: 200 executions.
            let done = queued.min(200);
            queued -= done;
            executed += done;
        }
        // 40 cycles × 0.25 s = 10 s at 800/s: full pace, never idle.
        assert_eq!(executed, 8_000);
    }
}
