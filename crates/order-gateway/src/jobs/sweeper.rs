//! The lease sweeper (§5): every `RAKUTEN_SWEEP_INTERVAL_SECONDS`, turns each active task whose
//! lease lapsed into `stale` (never `queued`), logs a structured warning per task, wakes waiting
//! long-polls (the gate is free again), ends each queued task whose `not_after` passed as
//! `expired` (D-task-not-after-expired), then logs alerts that appeared. With several instances on
//! one PostgreSQL database every instance sweeps (each lapsed lease turns stale once, and only the
//! instance that turned it logs its warning); alerts are logged by the elected instance only.
//!
//! Clock steps: each sweep compares this instance's clock with the shared
//! database's, clamps leases stamped while a clock ran ahead, and writes what it saw to
//! `clock_signals` (offset, skewed flag, last jump), which the alert job turns into `clock_skew` /
//! `clock_jump` records; the offset is also `gateway_clock_offset_seconds` / `gateway_clock_skewed`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rakuten_types::{Clock, Timestamp};
use tokio_util::sync::CancellationToken;

use super::alert_hooks::{raise_clock_jump, raise_clock_skew};
use super::alerts::{AlertLog, AlertThresholds, health_at};
use crate::lease::notify::LeaseNotifier;
use crate::store::{ClockSignal, OrderStore, StaleTask, StoreError};
use crate::telemetry::GatewayMetrics;

/// The sweeper service.
#[derive(Debug, Clone)]
pub struct Sweeper {
    store: Arc<dyn OrderStore>,
    clock: Arc<dyn Clock>,
    notifier: LeaseNotifier,
    interval: Duration,
    thresholds: AlertThresholds,
    alert_log: Arc<AlertLog>,
    guard: LeaseGuard,
    instance_id: String,
    metrics: Option<Arc<GatewayMetrics>>,
    signal: Arc<Mutex<SignalState>>,
}

/// What the sweeper last wrote to `clock_signals`, and a jump waiting to be written.
#[derive(Debug, Default)]
struct SignalState {
    /// When (monotonic), with which offset and skewed flag.
    written: Option<(Instant, Option<i64>, bool)>,
    /// A step the loop saw between two ticks, written with the next signal.
    pending_jump: Option<String>,
}

/// The signal is rewritten at least this often (so [`crate::store::CLOCK_SIGNAL_FRESH`] tells a
/// running instance from a gone one), and at once when the skewed flag flips, a jump is seen or
/// the offset moved by more than [`SIGNAL_OFFSET_STEP_MS`]; otherwise a sweep writes nothing.
pub const SIGNAL_REFRESH: Duration = Duration::from_secs(30);

/// Offset change that rewrites the signal before [`SIGNAL_REFRESH`].
pub const SIGNAL_OFFSET_STEP_MS: i64 = 250;

/// This process's instance id for `clock_signals` and the clock alerts' subject:
/// `<hostname>/<8 random hex digits>`, so instances on one host (and in one test process) differ.
pub fn new_instance_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "gateway".to_owned());
    let id = uuid::Uuid::now_v7().simple().to_string();
    // The last digits of a v7 uuid are random (the first ones are the time).
    format!("{host}/{}", &id[id.len() - 8..])
}

/// What the sweeper does against clock steps.
#[derive(Debug, Clone, Copy, Default)]
pub struct LeaseGuard {
    /// The longest a lease may still run: the lease TTL plus [`LEASE_CLAMP_MARGIN`]. Leases
    /// expiring later (stamped while the clock ran ahead) are clamped to `now` plus this.
    pub max_lease: Option<Duration>,
    /// With a shared database: the clock skew past which this instance raises `clock_skew` and
    /// does not sweep (another instance's healthy lease must not lapse by our wrong clock).
    pub skew_alert: Option<Duration>,
}

/// How much longer than its TTL a lease may run before the sweeper clamps it.
pub const LEASE_CLAMP_MARGIN: Duration = Duration::from_secs(5);

/// A step of the clock between two sweeps, beyond the sweep interval, that raises `clock_jump`.
pub const CLOCK_JUMP: Duration = Duration::from_secs(2);

impl Sweeper {
    /// A sweeper over `store`.
    pub fn new(
        store: Arc<dyn OrderStore>,
        clock: Arc<dyn Clock>,
        notifier: LeaseNotifier,
        interval: Duration,
        thresholds: AlertThresholds,
    ) -> Self {
        Sweeper {
            store,
            clock,
            notifier,
            interval,
            thresholds,
            alert_log: Arc::new(AlertLog::default()),
            guard: LeaseGuard::default(),
            instance_id: new_instance_id(),
            metrics: None,
            signal: Arc::new(Mutex::new(SignalState::default())),
        }
    }

    /// The same sweeper, publishing its clock offset in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<GatewayMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// This instance's id (the subject of its clock alerts).
    pub fn instance_id(&self) -> &str {
        &self.instance_id
    }

    /// Notes a clock jump seen outside a sweep; written with the next sweep's signal.
    pub fn note_clock_jump(&self, detail: String) {
        raise_clock_jump(&detail);
        self.signal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pending_jump = Some(detail);
    }

    /// Writes the clock signal when it changed or is due ([`SIGNAL_REFRESH`]).
    async fn record_signal(
        &self,
        offset_ms: Option<i64>,
        skewed: bool,
        jump: Option<String>,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        if let Some(m) = &self.metrics {
            m.set_clock(offset_ms, skewed);
        }
        let (jump, was_skewed) = {
            let mut st = self.signal.lock().unwrap_or_else(|e| e.into_inner());
            let jump = jump.or_else(|| st.pending_jump.take());
            let due = match st.written {
                None => true,
                Some((at, off, sk)) => {
                    at.elapsed() >= SIGNAL_REFRESH
                        || sk != skewed
                        || off.is_some() != offset_ms.is_some()
                        || (off.unwrap_or_default() - offset_ms.unwrap_or_default()).abs()
                            > SIGNAL_OFFSET_STEP_MS
                }
            };
            if !due && jump.is_none() {
                return Ok(());
            }
            (jump, st.written.is_some_and(|(_, _, sk)| sk))
        };
        // Logged when it starts, not at every sweep while it lasts (the alert record stays open).
        if skewed && !was_skewed {
            raise_clock_skew(offset_ms.unwrap_or_default());
        }
        let signal = ClockSignal {
            instance_id: self.instance_id.clone(),
            offset_ms,
            skewed,
            jump: jump.clone(),
        };
        match self.store.clock_signal_record(signal, now).await {
            Ok(()) => {
                self.signal
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .written = Some((Instant::now(), offset_ms, skewed));
                Ok(())
            }
            Err(e) => {
                // Keep the jump for the next try.
                if let Some(j) = jump {
                    self.signal
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .pending_jump
                        .get_or_insert(j);
                }
                Err(e)
            }
        }
    }

    /// [`Self::record_signal`], a failure logged: the signal is rewritten at the next sweep (a
    /// jump is kept for it), and the sweep itself must go on (a lapsed lease still turns stale).
    async fn record_signal_or_log(
        &self,
        offset_ms: Option<i64>,
        skewed: bool,
        jump: Option<String>,
        now: Timestamp,
    ) {
        if let Err(e) = self.record_signal(offset_ms, skewed, jump, now).await {
            tracing::warn!(error = %e, "writing this instance's clock signal failed; retried next sweep");
        }
    }

    /// The same sweeper, guarding leases against clock steps.
    pub fn with_lease_guard(mut self, guard: LeaseGuard) -> Self {
        self.guard = guard;
        self
    }

    /// One sweep at `now`: returns the tasks turned stale.
    ///
    /// # Errors
    /// [`StoreError`] from the store.
    pub async fn run_once(&self, now: Timestamp) -> Result<Vec<StaleTask>, StoreError> {
        // The offset is read whenever there is a shared clock (PostgreSQL), so `/health` and
        // `/metrics` show it even with the skew check off.
        let offset = self.store.clock_offset_ms(now).await?;
        let skewed = match (self.guard.skew_alert, offset) {
            (Some(tolerance), Some(o)) => u128::from(o.unsigned_abs()) > tolerance.as_millis(),
            _ => false,
        };
        if skewed {
            self.record_signal_or_log(offset, true, None, now).await;
            return Ok(Vec::new());
        }
        let mut jump = None;
        if let Some(max) = self.guard.max_lease {
            let clamped = self.store.task_clamp_leases(now.plus(max), now).await?;
            if !clamped.is_empty() {
                let ids: Vec<&str> = clamped.iter().map(|t| t.as_str()).collect();
                let detail = format!(
                    "{} lease(s) expired later than now + TTL + {} s and were clamped: {}",
                    ids.len(),
                    LEASE_CLAMP_MARGIN.as_secs(),
                    ids.join(", ")
                );
                raise_clock_jump(&detail);
                jump = Some(detail);
            }
        }
        self.record_signal_or_log(offset, false, jump, now).await;
        let staled = self.store.task_mark_stale_expired(now).await?;
        for t in &staled {
            tracing::warn!(
                alert = "task_stale",
                task_id = %t.task_id,
                lease_owner = t.lease_owner.as_deref().unwrap_or("-"),
                lease_expires_at = %t.lease_expires_at.map_or_else(|| "-".to_owned(), |e| e.to_rfc3339()),
                lease_count = t.lease_count,
                "lease expired; task is stale and waits for an explicit reclaim (never re-queued)"
            );
        }
        // Each staled task may have freed a gate.
        self.notifier.notify_leasable_n(staled.len());
        // Queued tasks past their deadline end `expired` (D-task-not-after-expired); the lease
        // already refused them, this says why to the upstream and raises `task_expired`.
        for t in self.store.task_expire_past_not_after(now).await? {
            tracing::warn!(
                alert = "task_expired",
                task_id = %t.task_id,
                not_after = %t.not_after,
                created_at = %t.created_at,
                "not_after passed while queued; the task is expired and will never be leased"
            );
        }
        Ok(staled)
    }

    /// Computes the alerts at `now` and logs those that appeared since the last call.
    ///
    /// # Errors
    /// [`StoreError`] from the store.
    pub async fn check_alerts(&self, now: Timestamp) -> Result<(), StoreError> {
        let health = health_at(self.store.as_ref(), self.thresholds, now).await?;
        self.alert_log.update(&health.alerts);
        Ok(())
    }

    /// Sweeps every interval until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        // The first sweep is one interval after start, as in `jobs::every_tick_as_leader`: a
        // start-up tick that runs late would read the clock, then act on that reading after
        // whatever the caller did meanwhile (tests move a ManualClock and sweep themselves; a
        // late tick holding an hour-ahead reading staled a lease the test had just clamped).
        let mut tick =
            tokio::time::interval_at(tokio::time::Instant::now() + self.interval, self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last: Option<(std::time::Instant, Timestamp)> = None;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => {
                    let now = self.clock.now();
                    // The clock against the monotonic one: a step shows as a difference.
                    let mono = std::time::Instant::now();
                    if let Some((m0, t0)) = last {
                        let stepped = (now.as_millis() - t0.as_millis())
                            - mono.duration_since(m0).as_millis() as i64;
                        if u128::from(stepped.unsigned_abs()) > CLOCK_JUMP.as_millis() {
                            self.note_clock_jump(format!("the clock stepped by {stepped} ms between two sweeps"));
                        }
                    }
                    last = Some((mono, now));
                    if let Err(e) = self.run_once(now).await {
                        tracing::error!(error = %e, "lease sweep failed");
                    }
                    // One instance logs the alerts when several share the database.
                    let leader = match self.store.alerts_leader().await {
                        Ok(l) => l,
                        Err(e) => {
                            tracing::warn!(error = %e, "alert leader election failed");
                            false
                        }
                    };
                    if leader && let Err(e) = self.check_alerts(now).await {
                        tracing::error!(error = %e, "alert check failed");
                    }
                }
            }
        }
    }
}
