//! Background jobs, each with `run_once()` plus a thin `run(shutdown)`.
//!
//! - [`sweeper`]: lease expiry → `stale` (§5).
//! - [`alert_hooks`]: alerts raised from inside a store transition (poison rows, clock jumps).
//! - [`alerts`]: the alerts of §4.7 computed for `/health`, and the alert job: alert records,
//!   raised and cleared, with the evidence query of a stale task.
//! - [`webhooks`]: delivery of alert events from the durable outbox, signed, retried.
//! - [`query_sweeper`]: account queries (§11): TTL → `expired`, lapsed lease → redelivery or
//!   `failed`, retention purge.

pub mod alert_hooks;
pub mod alerts;
pub mod query_sweeper;
pub mod sweeper;
pub mod webhooks;

/// Calls `run_once` every `interval` (the first time one interval after start) until
/// `shutdown`, only while this instance is the elected
/// alert leader (several instances on one database: one runs it, another takes over when it
/// dies). A failed run is logged as `what` and retried on the next tick.
pub(crate) async fn every_tick_as_leader<F, Fut, T>(
    interval: std::time::Duration,
    shutdown: tokio_util::sync::CancellationToken,
    leader: std::sync::Arc<dyn crate::store::OrderStore>,
    what: &'static str,
    run_once: F,
) where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, crate::store::StoreError>>,
{
    // The first run is one interval after start, not at start: a start-up tick that runs late
    // (a slow first leader election) would otherwise race whatever the caller does meanwhile
    // (tests drive `run_once` themselves with a manual clock and an hourly interval).
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => match leader.alerts_leader().await {
                Ok(true) => {
                    if let Err(e) = run_once().await {
                        tracing::error!(error = ?e, job = what, "background run failed");
                    }
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(error = ?e, job = what, "alert leader election failed"),
            },
        }
    }
}
