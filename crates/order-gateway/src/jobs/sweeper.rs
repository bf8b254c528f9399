//! The lease sweeper (§5): every `RAKUTEN_SWEEP_INTERVAL_SECONDS`, turns each active task whose
//! lease lapsed into `stale` (never `queued`), logs a structured warning per task, wakes waiting
//! long-polls (the gate is free again). With several instances on one PostgreSQL database every
//! instance sweeps (each lapsed lease turns stale once, and only the instance that turned it logs
//! its warning). Alerts are the alert job's ([`super::alerts::AlertJob`]).

use std::sync::Arc;
use std::time::Duration;

use rakuten_types::{Clock, Timestamp};
use tokio_util::sync::CancellationToken;

use crate::lease::notify::LeaseNotifier;
use crate::store::{OrderStore, StaleTask, StoreError};

/// The sweeper service.
#[derive(Debug, Clone)]
pub struct Sweeper {
    store: Arc<dyn OrderStore>,
    clock: Arc<dyn Clock>,
    notifier: LeaseNotifier,
    interval: Duration,
}

impl Sweeper {
    /// A sweeper over `store`.
    pub fn new(
        store: Arc<dyn OrderStore>,
        clock: Arc<dyn Clock>,
        notifier: LeaseNotifier,
        interval: Duration,
    ) -> Self {
        Sweeper {
            store,
            clock,
            notifier,
            interval,
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
                lease_expires_at = ?t.lease_expires_at.map(|e| e.to_rfc3339()),
                lease_count = t.lease_count,
                "lease expired; task is stale and waits for an explicit reclaim (never re-queued)"
            );
        }
        if !staled.is_empty() {
            self.notifier.notify_leasable();
        }
        Ok(staled)
    }

    /// Sweeps every interval until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => {
                    if let Err(e) = self.run_once(self.clock.now()).await {
                        tracing::error!(error = ?e, "lease sweep failed");
                    }
                }
            }
        }
    }
}
