//! The lease sweeper (§5): every `RAKUTEN_SWEEP_INTERVAL_SECONDS`, turns each active task whose
//! lease lapsed into `stale` (never `queued`), logs a structured warning per task, wakes waiting
//! long-polls (the gate is free again), then logs alerts that appeared. With several instances on
//! one PostgreSQL database every instance sweeps (each lapsed lease turns stale once, and only the
//! instance that turned it logs its warning); alerts are logged by the elected instance only.

use std::sync::Arc;
use std::time::Duration;

use rakuten_types::{Clock, Timestamp};
use tokio_util::sync::CancellationToken;

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
}

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
        }
    }

    /// One sweep at `now`: returns the tasks turned stale.
    ///
    /// # Errors
    /// [`StoreError`] from the store.
    pub async fn run_once(&self, now: Timestamp) -> Result<Vec<StaleTask>, StoreError> {
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
        if !staled.is_empty() {
            self.notifier.notify_leasable();
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
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => {
                    let now = self.clock.now();
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
