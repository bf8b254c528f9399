//! Post-payment monitoring (spec §6 "付款后监控"): for every order this worker placed and that is
//! not yet delivered or cancelled, read its detail page, and when the site shows a new state,
//! store evidence, journal it and report it — also after the task is terminal (the gateway appends
//! such reports for the last lease owner, §4.5). Convenience-store orders get one warning when
//! their pay deadline is less than [`DEADLINE_WARNING`] away or past.

use std::sync::Arc;
use std::time::Duration;

use rakuten_types::{OrderState, Timestamp};
use tokio_util::sync::CancellationToken;

use crate::ctx::WorkerCtx;
use crate::journal::{LocalStatus, OrderRow, RecordMode, StepRecord};
use crate::site::{OrderStatus, PageSnapshot, Step};

/// How long before the pay deadline the warning is reported.
pub const DEADLINE_WARNING: Duration = Duration::from_secs(24 * 3600);

/// The monitor loop.
#[derive(Debug, Clone)]
pub struct Monitor {
    ctx: Arc<WorkerCtx>,
}

impl Monitor {
    /// A monitor over the shared context.
    pub fn new(ctx: Arc<WorkerCtx>) -> Self {
        Monitor { ctx }
    }

    /// One pass: flushes pending reports of finished tasks, then checks every monitored order.
    /// Returns how many state changes were recorded. Errors are logged per order; a pass never
    /// fails as a whole.
    pub async fn run_once(&self) -> usize {
        self.flush_finished().await;
        let rows = match self.ctx.journal.orders_monitored().await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "monitor: cannot read the journal");
                return 0;
            }
        };
        let mut changes = 0;
        for row in rows {
            if row.status != LocalStatus::Finished {
                continue;
            }
            if self.watch_order(&row).await {
                changes += 1;
            }
        }
        changes
    }

    /// Sends the pending reports of finished tasks (an executing task's go out with its next
    /// grant); what is not delivered stays in the outbox for the next pass.
    async fn flush_finished(&self) {
        let ctx = &self.ctx;
        if let Ok(ids) = ctx.journal.outbox_finished_tasks().await {
            for id in ids {
                if let Err(e) = ctx.flush(&id).await {
                    tracing::warn!(task_id = %id, error = %e, "monitor: pending reports not delivered yet");
                }
            }
        }
    }

    /// Reads one monitored order on the site, records a new state, and warns once when its pay
    /// deadline is near or past. Returns whether a state change was recorded.
    async fn watch_order(&self, row: &OrderRow) -> bool {
        let ctx = &self.ctx;
        let Some(order_number) = row.site_order_id.clone() else {
            return false;
        };
        let r = {
            let _g = ctx.locks.lock(ctx.site.account()).await;
            ctx.site.order_status(&order_number).await
        };
        let step = match r {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(task_id = %row.task_id, order_number = %order_number, error = %e, "monitor: cannot read the order");
                return false;
            }
        };
        let now = ctx.clock.now();
        let mut result = Ok(());
        let mut changed = false;
        // A site shows an order stopped by a payment challenge as plain `ordered`; the
        // journal calls it `awaiting_payment` (§10.1): not a change.
        let same = |s: &OrderState| {
            *s == row.state
                || (*s == OrderState::Ordered && row.state == OrderState::AwaitingPayment)
        };
        if let Some(state) = step.value.state.filter(|s| !same(s)) {
            result = self
                .record_change(row, &order_number, state, &step, now)
                .await;
            changed = result.is_ok();
        }
        let waiting = step.value.state.unwrap_or(row.state) == OrderState::AwaitingPayment;
        if let (true, false, Some(deadline)) = (waiting, row.deadline_alerted, row.pay_deadline)
            && deadline.minus(DEADLINE_WARNING) <= now
        {
            result = self
                .warn_pay_deadline(row, &order_number, deadline, &step.page, now)
                .await;
        }
        if let Err(e) = result {
            tracing::error!(task_id = %row.task_id, error = %e, "monitor: change not recorded");
        }
        changed
    }

    /// Records and reports the order's new `state` on the site; monitoring ends once it is
    /// delivered or cancelled.
    async fn record_change(
        &self,
        row: &OrderRow,
        order_number: &str,
        state: OrderState,
        step: &Step<OrderStatus>,
        now: Timestamp,
    ) -> anyhow::Result<()> {
        let mut rec = StepRecord::new(
            &row.task_id,
            &format!("monitor-{}", state.as_str().replace('_', "-")),
            state,
            now,
        );
        rec.mode = RecordMode::Monitoring;
        rec.detail = Some(format!(
            "monitor: order {order_number} now {} ({state})",
            step.value
                .stage_label
                .as_deref()
                .unwrap_or("without a stage label")
        ));
        rec.monitoring = Some(!matches!(
            state,
            OrderState::Delivered | OrderState::Cancelled
        ));
        self.record(&rec, Some(&step.page)).await
    }

    /// Records and reports, once, that the pay `deadline` of an order still awaiting payment is
    /// less than [`DEADLINE_WARNING`] away or past.
    async fn warn_pay_deadline(
        &self,
        row: &OrderRow,
        order_number: &str,
        deadline: Timestamp,
        page: &PageSnapshot,
        now: Timestamp,
    ) -> anyhow::Result<()> {
        let what = if deadline <= now {
            "has passed"
        } else {
            "is less than 24 h away"
        };
        let msg = format!(
            "monitor: pay deadline {deadline} of order {order_number} {what}; payment still outstanding"
        );
        tracing::warn!(task_id = %row.task_id, "{msg}");
        let mut rec = StepRecord::new(
            &row.task_id,
            "monitor-pay-deadline",
            OrderState::AwaitingPayment,
            now,
        );
        rec.mode = RecordMode::Monitoring;
        rec.detail = Some(msg);
        let result = self.record(&rec, Some(page)).await;
        if result.is_ok() {
            let _ = self
                .ctx
                .journal
                .order_mark_deadline_alerted(&row.task_id)
                .await;
        }
        result
    }

    async fn record(&self, rec: &StepRecord, page: Option<&PageSnapshot>) -> anyhow::Result<()> {
        let ctx = &self.ctx;
        let seq = ctx
            .journal
            .evidence_seq(&rec.task_id, None, &rec.step)
            .await?;
        let entry = ctx
            .evidence
            .write_async(rec.evidence_of(seq), page.cloned())
            .await?;
        let mut rec = rec.clone();
        rec.evidence = Some(entry);
        ctx.journal
            .step_record(&rec, &ctx.settings.worker_id)
            .await?;
        if let Err(e) = ctx.flush(&rec.task_id).await {
            tracing::warn!(task_id = %rec.task_id, error = %e, "monitor: report not delivered yet (kept in the outbox)");
        }
        Ok(())
    }

    /// Runs a pass every `RAKUTEN_MONITOR_INTERVAL_SECONDS` until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            let n = self.run_once().await;
            if n > 0 {
                tracing::info!(changes = n, "monitor pass");
            }
            tokio::select! {
                () = tokio::time::sleep(self.ctx.settings.monitor_interval) => {}
                () = shutdown.cancelled() => break,
            }
        }
    }
}
