//! The order loop of spec §6, serial: long-poll a lease; the local idempotency gate (a task
//! finished here is re-reported from the journal, never executed again); the recovery branch when
//! `lease_count > 1` or a write-ahead intent is pending; otherwise execution, with the lease
//! renewed every `RAKUTEN_LEASE_RENEW_INTERVAL_SECONDS` meanwhile. The loop never dies: every
//! error is logged, reported when possible, and the next lease is asked for.

use std::sync::Arc;

use rakuten_types::order::LeaseGrant;
use rakuten_types::{SITE_RAKUTEN, TaskId};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::ctx::WorkerCtx;
use crate::execute::{Stop, TaskRun};
use crate::gateway_client::{GatewayError, run_turns};
use crate::journal::{LocalStatus, RecordMode, StepRecord};

/// What one turn of the loop did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tick {
    /// The long-poll returned nothing.
    Idle,
    /// A grant was handled (whatever its result).
    Handled(TaskId),
}

/// The order loop.
#[derive(Debug, Clone)]
pub struct OrderLoop {
    ctx: Arc<WorkerCtx>,
}

/// Renews a lease in the background; cancels `lost` on 6002.
struct LeaseKeeper {
    lost: CancellationToken,
    stop: CancellationToken,
    handle: JoinHandle<()>,
}

impl LeaseKeeper {
    fn start(ctx: Arc<WorkerCtx>, grant: &LeaseGrant) -> Self {
        let lost = CancellationToken::new();
        let stop = CancellationToken::new();
        let (l, s) = (lost.clone(), stop.clone());
        let task_id = grant.task_id.clone();
        let token = grant.lease_token.clone();
        let handle = tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(ctx.settings.renew_interval) => {}
                    () = s.cancelled() => return,
                }
                match ctx.gateway.renew(&task_id, &token).await {
                    Ok(ack) => {
                        tracing::debug!(task_id = %task_id, expires = %ack.lease_expires_at, "lease renewed")
                    }
                    Err(GatewayError::LeaseLost(m)) => {
                        tracing::warn!(task_id = %task_id, msg = %m, "lease lost (6002) while executing");
                        l.cancel();
                        return;
                    }
                    Err(GatewayError::ShuttingDown) => return,
                    Err(e) => {
                        tracing::warn!(task_id = %task_id, error = %e, "lease renewal failed; will retry next period")
                    }
                }
            }
        });
        LeaseKeeper { lost, stop, handle }
    }

    async fn stop(self) {
        self.stop.cancel();
        let _ = self.handle.await;
    }
}

impl OrderLoop {
    /// A loop over the shared context.
    pub fn new(ctx: Arc<WorkerCtx>) -> Self {
        OrderLoop { ctx }
    }

    /// One turn: lease (long-poll up to `RAKUTEN_LEASE_WAIT_SECONDS`) and handle the grant.
    ///
    /// # Errors
    /// Only the lease request's own failure; everything after a grant is handled inside.
    pub async fn run_once(&self) -> Result<Tick, GatewayError> {
        let grant = self
            .ctx
            .gateway
            .lease(self.ctx.settings.lease_wait_seconds, Some(SITE_RAKUTEN))
            .await?;
        let Some(grant) = grant else {
            return Ok(Tick::Idle);
        };
        let id = grant.task_id.clone();
        tracing::info!(task_id = %id, lease_count = grant.lease_count, known_state = grant.known_state.map_or("none", |s| s.as_str()), "lease granted");
        if let Err(e) = self.handle(&grant).await {
            match e {
                Stop::LeaseLost(m) => {
                    tracing::warn!(task_id = %id, msg = %m, "task stopped: lease lost")
                }
                Stop::Shutdown => tracing::info!(task_id = %id, "task interrupted by shutdown"),
                e => {
                    tracing::error!(task_id = %id, error = %e, "task stopped; it will turn stale on the gateway and needs a reclaim")
                }
            }
        }
        Ok(Tick::Handled(id))
    }

    async fn handle(&self, grant: &LeaseGrant) -> Result<(), Stop> {
        let ctx = &self.ctx;
        let (row, inserted) = ctx.journal.order_accept(grant, ctx.clock.now()).await?;
        // Reports left over from before (crash, lost answers) go first, with this grant's token.
        match ctx.flush(&grant.task_id).await {
            Ok(()) => {}
            Err(e @ (GatewayError::LeaseLost(_) | GatewayError::ShuttingDown)) => {
                return Err(e.into());
            }
            Err(e) => {
                tracing::warn!(task_id = %grant.task_id, error = %e, "earlier reports not delivered")
            }
        }
        if row.status == LocalStatus::Finished {
            tracing::info!(task_id = %grant.task_id, state = %row.state, outcome = row.outcome.map_or("none", |o| o.as_str()), "finished locally: re-reporting, not executing again");
            let mut rec = StepRecord::new(&grant.task_id, "rereport", row.state, ctx.clock.now());
            rec.mode = RecordMode::Rereport;
            rec.detail = row.detail.clone();
            ctx.journal
                .step_record(&rec, &ctx.settings.worker_id)
                .await?;
            ctx.flush(&grant.task_id).await?;
            return Ok(());
        }
        let pending = ctx
            .journal
            .intents(&grant.task_id)
            .await?
            .iter()
            .any(|i| i.status == "pending");
        let keeper = LeaseKeeper::start(ctx.clone(), grant);
        let run = TaskRun::new(ctx, grant, keeper.lost.clone());
        let res = if grant.lease_count > 1 || pending {
            tracing::info!(task_id = %grant.task_id, lease_count = grant.lease_count, pending_intent = pending, "recovery branch: verifying on the site first");
            run.recover(&row, inserted).await
        } else {
            run.execute().await
        };
        keeper.stop().await;
        res
    }

    /// Runs turns until `shutdown`, backing off after a failed lease request.
    pub async fn run(self, shutdown: CancellationToken) {
        tracing::info!(worker_id = %self.ctx.settings.worker_id, site = self.ctx.site.name(), "order loop started");
        run_turns(
            &shutdown,
            self.ctx.settings.retry_max,
            "lease request",
            || self.run_once(),
        )
        .await;
        tracing::info!("order loop stopped");
    }
}
