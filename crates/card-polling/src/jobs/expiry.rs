//! The expiry job: unfinished items past the validity period become `expired` (fields kept).
//! Expiry happens only here, never on a read. Items that existed before the feature went live
//! count from the go-live instant (`meta.feature_enabled_at`).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use rakuten_types::{Clock, Timestamp};

use crate::priority::VALIDITY;
use crate::store::{ClaimStore, StoreResult};

/// Items expired per transaction, so the write lock is held briefly.
pub const EXPIRY_BATCH: i64 = 1_000;

/// The expiry job.
#[derive(Clone)]
pub struct ExpiryJob {
    store: Arc<dyn ClaimStore>,
    clock: Arc<dyn Clock>,
    every: Duration,
}

impl std::fmt::Debug for ExpiryJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExpiryJob")
            .field("every", &self.every)
            .finish()
    }
}

impl ExpiryJob {
    /// A job that runs every `every`.
    pub fn new(store: Arc<dyn ClaimStore>, clock: Arc<dyn Clock>, every: Duration) -> Self {
        ExpiryJob {
            store,
            clock,
            every,
        }
    }

    /// Expires every item whose validity passed at `now`; returns how many.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn run_once(&self, now: Timestamp) -> StoreResult<u64> {
        let mut total = 0;
        loop {
            let n = self
                .store
                .item_mark_expired(now, VALIDITY, EXPIRY_BATCH)
                .await?;
            total += n;
            if n < EXPIRY_BATCH as u64 {
                return Ok(total);
            }
        }
    }

    /// Runs until `shutdown`, once per period.
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            match self.run_once(self.clock.now()).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(expired = n, "priority items expired"),
                Err(e) => tracing::warn!(error = %e, "expiry job failed"),
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(self.every) => {}
            }
        }
    }
}
