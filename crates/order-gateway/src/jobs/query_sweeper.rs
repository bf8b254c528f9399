//! The account-query sweeper (§11.1, §11.5), every `RAKUTEN_SWEEP_INTERVAL_SECONDS`:
//! 1. queries older than `RAKUTEN_QUERY_TTL_SECONDS` since submit (queued or leased) → `expired`;
//! 2. lapsed leases → back to `queued` (redelivered, attempt kept) or `failed` when attempts are
//!    exhausted — the opposite of the order sweeper, which makes tasks `stale`;
//! 3. terminal queries finished more than `RAKUTEN_QUERY_RETENTION_SECONDS` ago are deleted.
//!
//! TTL runs first, so an old query whose lease lapsed ends `expired`, not redelivered.

use std::sync::Arc;
use std::time::Duration;

use rakuten_types::{Clock, QueryId, Timestamp};
use tokio_util::sync::CancellationToken;

use crate::lease::notify::LeaseNotifier;
use crate::store::StoreError;
use crate::store::queries::{LapsedQuery, QueryStore};

/// What one sweep did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QuerySweep {
    /// Queries turned `expired` by the TTL.
    pub expired: Vec<QueryId>,
    /// Lapsed leases: redelivered (`queued`) or `failed` (attempts exhausted).
    pub lapsed: Vec<LapsedQuery>,
    /// Terminal queries deleted after their retention.
    pub purged: u64,
}

/// Durations the sweeper applies.
#[derive(Debug, Clone, Copy)]
pub struct QuerySweepSettings {
    /// Period of [`QuerySweeper::run`].
    pub interval: Duration,
    /// Query TTL since submit.
    pub query_ttl: Duration,
    /// Retention after finishing.
    pub retention: Duration,
}

/// The account-query sweeper service.
#[derive(Debug, Clone)]
pub struct QuerySweeper {
    store: Arc<dyn QueryStore>,
    clock: Arc<dyn Clock>,
    notifier: LeaseNotifier,
    settings: QuerySweepSettings,
}

impl QuerySweeper {
    /// A sweeper over `store`; `notifier` wakes query long-polls after a redelivery.
    pub fn new(
        store: Arc<dyn QueryStore>,
        clock: Arc<dyn Clock>,
        notifier: LeaseNotifier,
        settings: QuerySweepSettings,
    ) -> Self {
        QuerySweeper {
            store,
            clock,
            notifier,
            settings,
        }
    }

    /// One sweep at `now`.
    ///
    /// # Errors
    /// [`StoreError`] from the store (the steps before the failing one stay committed).
    pub async fn run_once(&self, now: Timestamp) -> Result<QuerySweep, StoreError> {
        let expired = self
            .store
            .query_mark_expired(now.minus(self.settings.query_ttl), now)
            .await?;
        for id in &expired {
            tracing::info!(query_id = %id, "account query expired (older than the query TTL)");
        }
        let lapsed = self.store.query_requeue_expired_leases(now).await?;
        for q in &lapsed {
            tracing::warn!(
                query_id = %q.query_id,
                status = %q.status,
                attempt = q.attempt,
                lease_owner = q.lease_owner.as_deref().unwrap_or("-"),
                "account query lease lapsed without a result"
            );
        }
        if lapsed
            .iter()
            .any(|q| q.status == rakuten_types::query::QueryStatus::Queued)
        {
            self.notifier.notify_leasable();
        }
        let purged = self
            .store
            .query_delete_terminal_before(now.minus(self.settings.retention))
            .await?;
        if purged > 0 {
            tracing::info!(purged, "finished account queries past retention deleted");
        }
        Ok(QuerySweep {
            expired,
            lapsed,
            purged,
        })
    }

    /// Sweeps every interval until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(self.settings.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => {
                    if let Err(e) = self.run_once(self.clock.now()).await {
                        tracing::error!(error = %e, "account query sweep failed");
                    }
                }
            }
        }
    }
}
