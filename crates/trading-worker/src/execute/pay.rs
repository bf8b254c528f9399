//! `05-payment` (§6), irreversible: under a write-ahead intent, after a lease renewal; a
//! challenge (3-D Secure, SMS) is never bypassed; an answer lost on the way is settled by
//! reading the order, never by paying again.
//!
//! [`TaskRun::pay`] acts; the site's answer then ends the task in one of three ways, one
//! function each: it answered ([`TaskRun::pay_answered`]), its answer was lost
//! ([`TaskRun::pay_answer_lost`]), or it refused ([`TaskRun::pay_refused`]).

use rakuten_types::{ErrorCode, OrderState, Outcome};

use super::{Ending, SEQ_PAYMENT, Stop, TaskRun, clip};
use crate::journal::{Action, IntentResolution};
use crate::site::{PageSnapshot, PayOutcome, SiteError, SiteErrorKind, Step};

/// The ending of the payment step.
fn payment<'a>(
    page: Option<&'a PageSnapshot>,
    state: OrderState,
    outcome: Outcome,
    code: Option<ErrorCode>,
    detail: String,
) -> Ending<'a> {
    Ending {
        seq: Some(SEQ_PAYMENT),
        step: "payment",
        page,
        state,
        outcome,
        code,
        detail,
    }
}

/// The pay intent resolved as done: the order is paid, or the payment is deferred to the store.
fn pay_done(reason: &str) -> IntentResolution {
    IntentResolution {
        action: Action::Pay,
        done: true,
        reason: Some(reason.to_owned()),
    }
}

/// The pay intent resolved as aborted: the order stays unpaid, for a human.
fn pay_aborted(reason: &str) -> IntentResolution {
    IntentResolution {
        action: Action::Pay,
        done: false,
        reason: Some(clip(reason)),
    }
}

impl TaskRun<'_> {
    /// 05 payment (irreversible): the pending intent, the renewal, the site's answer, then the
    /// ending that answer calls for.
    pub(super) async fn pay(&self, order_number: &str) -> Result<(), Stop> {
        let task_id = self.task_id().clone();
        self.check_lease()?;
        self.ctx
            .journal
            .intent_begin(&task_id, Action::Pay, self.ctx.clock.now())
            .await?;
        self.renew_before(Action::Pay).await?;
        let answer = {
            let _g = self.ctx.locks.lock(self.ctx.site.account()).await;
            self.ctx.site.pay(order_number, task_id.as_str()).await
        };
        match answer {
            Ok(step) => self.pay_answered(order_number, step).await,
            Err(e) if e.kind.is_ambiguous() => self.pay_answer_lost(order_number, &e).await,
            Err(e) => self.pay_refused(&e).await,
        }
    }

    /// The site answered: paid, deferred (awaiting payment at the store), or a challenge that
    /// only a human may pass.
    async fn pay_answered(&self, order_number: &str, step: Step<PayOutcome>) -> Result<(), Stop> {
        let page = Some(&step.page);
        match step.value {
            PayOutcome::Paid => {
                let detail = format!("order {order_number} paid");
                let end = payment(page, OrderState::Paid, Outcome::Succeeded, None, detail);
                self.finish(end, |r| {
                    r.intents.push(pay_done("paid"));
                    r.monitoring = Some(true);
                })
                .await
            }
            PayOutcome::AwaitingPayment {
                pay_deadline,
                detail,
            } => {
                let end = payment(
                    page,
                    OrderState::AwaitingPayment,
                    Outcome::Succeeded,
                    None,
                    detail,
                );
                self.finish(end, |r| {
                    r.intents
                        .push(pay_done("deferred payment: awaiting payment at the store"));
                    r.pay_deadline = pay_deadline;
                    r.monitoring = Some(true);
                })
                .await
            }
            PayOutcome::ChallengeRequired(kind) => {
                // §10.1: a challenge means the order stays placed and unpaid, waiting for a
                // human to pay it: `awaiting_payment` + `needs_human`.
                let msg = format!(
                    "payment needs a human: {kind} challenge; nothing bypassed, order {order_number} awaiting payment"
                );
                let end = payment(
                    page,
                    OrderState::AwaitingPayment,
                    Outcome::NeedsHuman,
                    Some(ErrorCode::SiteChallenge),
                    msg.clone(),
                );
                self.finish(end, |r| {
                    r.intents.push(pay_aborted(&msg));
                    r.monitoring = Some(true);
                })
                .await
            }
        }
    }

    /// The payment's answer was lost on the way: it may have gone through, so the order is read
    /// instead of paying again. Paid (or further) on the site ends the task as paid; anything
    /// else, or an order that cannot be read, is left to a human.
    async fn pay_answer_lost(&self, order_number: &str, e: &SiteError) -> Result<(), Stop> {
        let check = {
            let _g = self.ctx.locks.lock(self.ctx.site.account()).await;
            self.ctx.site.order_status(order_number).await
        };
        match check {
            Ok(d)
                if matches!(
                    d.value.state,
                    Some(OrderState::Paid | OrderState::Shipped | OrderState::Delivered)
                ) =>
            {
                let st = d.value.state.unwrap_or(OrderState::Paid);
                let detail =
                    format!("payment answer lost; the site shows order {order_number} as {st}");
                let end = payment(Some(&d.page), st, Outcome::Succeeded, None, detail);
                self.finish(end, |r| {
                    r.intents.push(pay_done("verified paid on the site"));
                    r.monitoring = Some(true);
                })
                .await
            }
            Ok(d) => {
                let msg = format!(
                    "payment answer lost ({}); the site shows {}; not retried",
                    e.message,
                    d.value.stage_label.as_deref().unwrap_or("no stage")
                );
                let end = payment(
                    Some(&d.page),
                    OrderState::Ordered,
                    Outcome::NeedsHuman,
                    Some(e.kind.code()),
                    msg.clone(),
                );
                self.finish(end, |r| {
                    r.intents.push(pay_aborted(&msg));
                    r.monitoring = Some(true);
                })
                .await
            }
            Err(e2) => {
                // Payment outcome unknown: the intent stays pending for a human.
                let msg = format!(
                    "payment answer lost ({}); cannot read the order ({}); not retried",
                    e.message, e2.message
                );
                let end = payment(
                    e.page.as_ref(),
                    OrderState::Ordered,
                    Outcome::NeedsHuman,
                    Some(e.kind.code()),
                    msg,
                );
                self.finish(end, |_| {}).await
            }
        }
    }

    /// The site refused the payment: nothing was paid; the order is left to a human.
    async fn pay_refused(&self, e: &SiteError) -> Result<(), Stop> {
        let msg = format!("site refused the payment: {}", e.message);
        // A challenge page met as an error ends like a challenge answer (§10.1).
        let state = if e.kind == SiteErrorKind::Challenge {
            OrderState::AwaitingPayment
        } else {
            OrderState::Ordered
        };
        let end = payment(
            e.page.as_ref(),
            state,
            Outcome::NeedsHuman,
            Some(e.kind.code()),
            msg.clone(),
        );
        self.finish(end, |r| {
            r.intents.push(pay_aborted(&msg));
            r.monitoring = Some(true);
        })
        .await
    }
}
