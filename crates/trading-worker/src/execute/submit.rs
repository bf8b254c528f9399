//! `04-order-submit` (§6), irreversible: under a write-ahead intent, after a lease renewal; an
//! answer lost on the way hands over to the recovery check instead of submitting again.

use rakuten_types::{OrderState, Outcome};

use super::{Ending, SEQ_SUBMIT, Stop, TaskRun, clip, outcome_before_submit};
use crate::failpoint::Point;
use crate::journal::{Action, IntentResolution, JournalError};
use crate::site::{ConfirmView, SiteErrorKind};

impl TaskRun<'_> {
    /// 04 order submit (irreversible), then payment.
    pub(super) async fn submit(&self, confirm: &ConfirmView) -> Result<(), Stop> {
        let task_id = self.task_id().clone();
        self.check_lease()?;
        self.ctx
            .journal
            .intent_begin(&task_id, Action::Submit, self.ctx.clock.now())
            .await?;
        self.renew_before(Action::Submit).await?;
        self.ctx.failpoint.hit(Point::BeforeSubmit);
        let r = {
            let _g = self.ctx.locks.lock(self.ctx.site.account()).await;
            self.ctx.site.order_submit(confirm, task_id.as_str()).await
        };
        self.ctx.failpoint.hit(Point::AfterSubmit);
        match r {
            Ok(step) => {
                let order_number = step.value.clone();
                let detail = format!("order {order_number} placed");
                self.record_step(
                    SEQ_SUBMIT,
                    "order-submit",
                    OrderState::Ordered,
                    &step.page,
                    detail,
                    |r| {
                        r.site_order_id = Some(order_number.clone());
                        r.intents.push(IntentResolution {
                            action: Action::Submit,
                            done: true,
                            reason: None,
                        });
                    },
                )
                .await?;
                self.pay(&order_number).await
            }
            Err(e) if e.kind.is_ambiguous() => {
                // The order may exist although we saw no answer: never resubmit; look on the site.
                let mut rec = self.rec("order-submit", OrderState::InCart);
                rec.report = false;
                rec.detail = Some(clip(&format!(
                    "submit answer lost ({}); verifying on the site",
                    e.message
                )));
                self.record(Some(SEQ_SUBMIT), e.page.as_ref(), rec).await?;
                let row = self
                    .ctx
                    .journal
                    .order_get(&task_id)
                    .await?
                    .ok_or_else(|| JournalError::Conflict("order row missing".into()))?;
                self.recover_with(&row, row.created_at).await
            }
            Err(e) => {
                let mut rec_outcome = outcome_before_submit(e.kind);
                if e.kind == SiteErrorKind::UnexpectedPage {
                    rec_outcome = Outcome::Failed;
                }
                let reason = format!("site refused the submit: {}", e.message);
                self.finish(
                    Ending {
                        seq: Some(SEQ_SUBMIT),
                        step: "order-submit",
                        page: e.page.as_ref(),
                        state: OrderState::InCart,
                        outcome: rec_outcome,
                        code: Some(e.kind.code()),
                        detail: reason.clone(),
                    },
                    |r| {
                        r.intents.push(IntentResolution {
                            action: Action::Submit,
                            done: false,
                            reason: Some(clip(&reason)),
                        });
                    },
                )
                .await
            }
        }
    }
}
