//! The lease long-poll (§4.3): try once; if nothing can be granted, wait for an in-process
//! wake-up ([`LeaseNotifier`]) or the periodic database check ([`FALLBACK_CHECK`]), try again, until
//! `wait` elapses.
//!
//! Disconnects: the whole poll runs inside the HTTP handler's future. When the client goes away,
//! hyper drops that future, so no further attempt is made; an attempt already queued at the
//! writer is skipped because its reply channel is closed. Only an attempt that already ran when the
//! client vanished can commit a grant nobody receives: that task stays leased to the same worker,
//! whose next poll gets it back as a new grant (`lease_count + 1`, so it verifies on the site
//! first), or it expires to `stale` and waits for a reclaim. Never a silent second execution.

use std::time::Duration;

use rakuten_types::Clock;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::notify::{AttemptCause, LeaseNotifier};
use crate::store::{LeaseAttempt, LeaseRequest, OrderStore, StoreError};

/// Period of the database re-check while waiting (the spec asks for at most 1 s).
pub const FALLBACK_CHECK: Duration = Duration::from_millis(1000);

/// Leases for `req`, waiting up to `wait` for something to become leasable.
///
/// Returns the last attempt's answer: a grant, or `Empty` / `GateBusy` when `wait` ran out.
///
/// # Errors
/// [`StoreError`] from the store.
pub async fn lease_with_wait(
    store: &dyn OrderStore,
    notifier: &LeaseNotifier,
    clock: &dyn Clock,
    req: LeaseRequest,
    wait: Duration,
    shutdown: &CancellationToken,
) -> Result<LeaseAttempt, StoreError> {
    let deadline = Instant::now() + wait;
    let mut cause = AttemptCause::First;
    loop {
        // Registered before the attempt: a wake-up that lands between the attempt and the wait
        // below is kept, not lost.
        let notified = notifier.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();

        let attempt = store.task_lease(req.clone(), clock.now()).await?;
        super::probe::mark(super::probe::Step::LeaseReturned);
        notifier.count_attempt(cause);
        if matches!(attempt, LeaseAttempt::Granted(_)) {
            return Ok(attempt);
        }
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Ok(attempt);
            }
            let tick = (now + FALLBACK_CHECK).min(deadline);
            tokio::select! {
                _ = &mut notified => {
                    super::probe::mark(super::probe::Step::PollWoken);
                    cause = AttemptCause::Woken;
                    break;
                }
                _ = shutdown.cancelled() => return Ok(attempt),
                _ = tokio::time::sleep_until(tick) => {
                    if tick >= deadline {
                        return Ok(attempt);
                    }
                    let leasable = store
                        .task_leasable_exists(&req.worker_id, req.site.as_deref(), req.scope, clock.now())
                        .await?;
                    if leasable {
                        cause = AttemptCause::Rechecked;
                        break;
                    }
                }
            }
        }
    }
}
