//! The lease sweeper (§5): every `RAKUTEN_SWEEP_INTERVAL_SECONDS`, turns each active task whose
//! lease lapsed into `stale` (never `queued`), logs a structured warning per task, wakes waiting
//! long-polls (the gate is free again), then logs alerts that appeared. With several instances on
//! one PostgreSQL database every instance sweeps (each lapsed lease turns stale once, and only the
//! instance that turned it logs its warning); alerts are logged by the elected instance only.

use std::sync::Arc;
use std::time::Duration;

use rakuten_types::{Clock, Timestamp};
use tokio_util::sync::CancellationToken;

use super::alert_hooks::{raise_clock_jump, raise_clock_skew};
use super::alerts::{AlertLog, AlertThresholds, health_at};
use crate::lease::notify::LeaseNotifier;
use crate::store::{OrderStore, StaleTask, StoreError};

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
}

/// What the sweeper does against clock steps (issue #12 item 6).
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
        if let Some(tolerance) = self.guard.skew_alert
            && let Some(offset) = self.store.clock_offset_ms(now).await?
            && u128::from(offset.unsigned_abs()) > tolerance.as_millis()
        {
            raise_clock_skew(offset);
            return Ok(Vec::new());
        }
        if let Some(max) = self.guard.max_lease {
            let clamped = self.store.task_clamp_leases(now.plus(max), now).await?;
            if !clamped.is_empty() {
                let ids: Vec<&str> = clamped.iter().map(|t| t.as_str()).collect();
                raise_clock_jump(&format!(
                    "{} lease(s) expired later than now + TTL + {} s and were clamped: {}",
                    ids.len(),
                    LEASE_CLAMP_MARGIN.as_secs(),
                    ids.join(", ")
                ));
            }
        }
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
        let mut tick = tokio::time::interval(self.interval);
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
                            raise_clock_jump(&format!("the clock stepped by {stepped} ms between two sweeps"));
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
