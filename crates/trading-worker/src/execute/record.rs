//! Evidence → journal → report of one step ([`TaskRun::record`]), and ending a task
//! ([`TaskRun::finish`] with an [`Ending`]).

use rakuten_types::{ErrorCode, OrderState, Outcome};

use super::{Stop, TaskRun, clip, outcome_before_submit};
use crate::journal::StepRecord;
use crate::site::{PageSnapshot, SiteError};

/// How a task ends ([`TaskRun::finish`]): the step that ends it and the page it read, the order
/// state it leaves, the outcome and error code the terminal report carries, and why.
#[derive(Debug)]
pub(super) struct Ending<'a> {
    /// The §6.1 number of a main step; `None` takes the task's next free evidence number.
    pub(super) seq: Option<i64>,
    /// The step's name, as in the evidence file name.
    pub(super) step: &'a str,
    /// The page the step read, kept as evidence.
    pub(super) page: Option<&'a PageSnapshot>,
    /// The order's state at the end.
    pub(super) state: OrderState,
    /// The task's outcome.
    pub(super) outcome: Outcome,
    /// The error code reported, if the outcome is not a success.
    pub(super) code: Option<ErrorCode>,
    /// Why the task ended, for the report and the logs (clipped to 1,000 characters).
    pub(super) detail: String,
}

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
            .write_async(rec.evidence_of(seq), page.cloned())
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
    /// `extra` fills the rest of the record (intents resolved, monitoring, pay deadline).
    pub(super) async fn finish(
        &self,
        end: Ending<'_>,
        extra: impl FnOnce(&mut StepRecord),
    ) -> Result<(), Stop> {
        let Ending {
            seq,
            step,
            page,
            state,
            outcome,
            code,
            detail,
        } = end;
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
            Ending {
                seq,
                step,
                page: e.page.as_ref(),
                state,
                outcome: outcome_before_submit(e.kind),
                code: Some(e.kind.code()),
                detail: e.message.clone(),
            },
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
