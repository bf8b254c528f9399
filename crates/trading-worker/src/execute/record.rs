//! Evidence → journal → report of one step ([`TaskRun::record`]), and ending a task
//! ([`TaskRun::finish`]).

use rakuten_types::{ErrorCode, OrderState, Outcome};

use super::{Stop, TaskRun, clip, outcome_before_submit};
use crate::journal::StepRecord;
use crate::site::{PageSnapshot, SiteError};

impl TaskRun<'_> {
    pub(super) fn rec(&self, step: &str, state: OrderState) -> StepRecord {
        StepRecord::new(self.task_id(), step, state, self.ctx.clock.now())
    }

    /// Evidence → journal → report for one step.
    pub(super) async fn record(
        &self,
        seq: Option<i64>,
        page: Option<&PageSnapshot>,
        mut rec: StepRecord,
    ) -> Result<(), Stop> {
        let seq = self
            .ctx
            .journal
            .evidence_seq(self.task_id(), seq, &rec.step)
            .await?;
        let entry = self
            .ctx
            .evidence
            .write_async(
                self.task_id(),
                seq,
                &rec.step,
                page,
                rec.state,
                rec.detail.as_deref(),
                rec.at,
            )
            .await?;
        rec.evidence = Some(entry);
        self.ctx
            .journal
            .step_record(&rec, &self.ctx.settings.worker_id)
            .await?;
        if rec.report {
            self.ctx.flush(self.task_id()).await?;
        }
        Ok(())
    }

    /// Ends the task: evidence (the page, if any) → journal (finished) → terminal report.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn finish(
        &self,
        seq: Option<i64>,
        step: &str,
        page: Option<&PageSnapshot>,
        state: OrderState,
        outcome: Outcome,
        code: Option<ErrorCode>,
        detail: String,
        mut extra: impl FnMut(&mut StepRecord),
    ) -> Result<(), Stop> {
        let mut rec = self.rec(step, state);
        rec.finish = Some((outcome, code.map(ErrorCode::as_i32)));
        rec.detail = Some(clip(&detail));
        extra(&mut rec);
        tracing::info!(task_id = %self.task_id(), state = %state, outcome = outcome.as_str(), code = code.map(ErrorCode::as_i32), detail = %detail, "task finished");
        self.record(seq, page, rec).await
    }

    pub(super) async fn fail_site(
        &self,
        seq: Option<i64>,
        step: &str,
        state: OrderState,
        e: &SiteError,
    ) -> Result<(), Stop> {
        self.finish(
            seq,
            step,
            e.page.as_ref(),
            state,
            outcome_before_submit(e.kind),
            Some(e.kind.code()),
            e.message.clone(),
            |_| {},
        )
        .await
    }

    /// Evidence → journal → report of a step that went well: `detail` says what the page showed,
    /// `extra` fills the rest of the record.
    pub(super) async fn record_step(
        &self,
        seq: i64,
        step: &str,
        state: OrderState,
        page: &PageSnapshot,
        detail: String,
        extra: impl FnOnce(&mut StepRecord),
    ) -> Result<(), Stop> {
        let mut rec = self.rec(step, state);
        rec.detail = Some(detail);
        extra(&mut rec);
        self.record(Some(seq), Some(page), rec).await
    }
}
