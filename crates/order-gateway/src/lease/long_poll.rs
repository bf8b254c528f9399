//! The lease long-poll (§4.3): try once; if nothing can be granted, wait for a submit's hand-off
//! (the submit runs this poll's attempt in its own transaction and sends the grant after that one
//! commit, D-handoff-in-submit-commit), an in-process wake-up ([`LeaseNotifier`]) or the periodic
//! database check ([`FALLBACK_CHECK`]), try again, until `wait` elapses.
//!
//! Disconnects: the whole poll runs inside the HTTP handler's future. When the client goes away,
//! hyper drops that future, so no further attempt is made; an attempt already queued at the
//! writer is skipped because its reply channel is closed. Only an attempt that already ran when the
//! client vanished can commit a grant nobody receives: that task stays leased to the same worker,
//! whose next poll gets it back as a new grant (`lease_count + 1`, so it verifies on the site
//! first), or it expires to `stale` and waits for a reclaim. The same holds for a grant a submit's
//! hand-off committed for a poll that has gone meanwhile. Never a silent second execution.

use std::time::Duration;

use rakuten_types::Clock;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::notify::{AttemptCause, LeaseNotifier};
use rakuten_types::order::LeaseGrant;

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
        // From here a submit may run this poll's next attempt in its own transaction and hand
        // the grant over (D-handoff-in-submit-commit). Whatever ends the wait first leaves the
        // queue; if a submit took the poll meanwhile, its answer is awaited instead of running
        // an attempt of our own.
        let mut slot = notifier.wait_for_handoff(req.clone());
        let handed = |grant: Option<LeaseGrant>| {
            notifier.count_attempt(AttemptCause::Woken);
            grant.map(LeaseAttempt::Granted)
        };
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Ok(match slot.leave().await {
                    Some(grant) => handed(grant).unwrap_or(attempt),
                    None => attempt,
                });
            }
            let tick = (now + FALLBACK_CHECK).min(deadline);
            tokio::select! {
                grant = slot.handed() => {
                    super::probe::mark(super::probe::Step::LeaseReturned);
                    if let Some(granted) = handed(grant) {
                        return Ok(granted);
                    }
                    // The submit's attempt granted nothing to this poll (or failed): try again.
                    cause = AttemptCause::Woken;
                    break;
                }
                _ = &mut notified => {
                    super::probe::mark(super::probe::Step::PollWoken);
                    if let Some(grant) = slot.leave().await
                        && let Some(granted) = handed(grant)
                    {
                        return Ok(granted);
                    }
                    cause = AttemptCause::Woken;
                    break;
                }
                _ = shutdown.cancelled() => {
                    return Ok(match slot.leave().await {
                        Some(grant) => handed(grant).unwrap_or(attempt),
                        None => attempt,
                    });
                }
                _ = tokio::time::sleep_until(tick) => {
                    if tick >= deadline {
                        continue;
                    }
                    let leasable = store
                        .task_leasable_exists(&req.worker_id, req.site.as_deref(), req.scope, clock.now())
                        .await;
                    if !matches!(leasable, Ok(false)) {
                        if let Some(grant) = slot.leave().await
                            && let Some(granted) = handed(grant)
                        {
                            return Ok(granted);
                        }
                        leasable?;
                        cause = AttemptCause::Rechecked;
                        break;
                    }
                }
            }
        }
    }
}
