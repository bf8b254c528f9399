//! `05-payment` (§6), irreversible: under a write-ahead intent, after a lease renewal; a
//! challenge (3-D Secure, SMS) is never bypassed; an answer lost on the way is settled by
//! reading the order, never by paying again.

use rakuten_types::{ErrorCode, OrderState, Outcome};

use super::{SEQ_PAYMENT, Stop, TaskRun, clip};
use crate::journal::{Action, IntentResolution};
use crate::site::{PayOutcome, SiteErrorKind};

impl TaskRun<'_> {
    /// 05 payment (irreversible).
    pub(super) async fn pay(&self, order_number: &str) -> Result<(), Stop> {
        let task_id = self.task_id().clone();
        self.check_lease()?;
        self.ctx
            .journal
            .intent_begin(&task_id, Action::Pay, self.ctx.clock.now())
            .await?;
        self.renew_before(Action::Pay).await?;
        let r = {
            let _g = self.ctx.locks.lock(self.ctx.site.account()).await;
            self.ctx.site.pay(order_number, task_id.as_str()).await
        };
        let done = |reason: &str| IntentResolution {
            action: Action::Pay,
            done: true,
            reason: Some(reason.to_owned()),
        };
        let aborted = |reason: &str| IntentResolution {
            action: Action::Pay,
            done: false,
            reason: Some(clip(reason)),
        };
        match r {
            Ok(step) => match step.value.clone() {
                PayOutcome::Paid => {
                    self.finish(
                        Some(SEQ_PAYMENT),
                        "payment",
                        Some(&step.page),
                        OrderState::Paid,
                        Outcome::Succeeded,
                        None,
                        format!("order {order_number} paid"),
                        |r| {
                            r.intents.push(done("paid"));
                            r.monitoring = Some(true);
                        },
                    )
                    .await
                }
                PayOutcome::AwaitingPayment {
                    pay_deadline,
                    detail,
                } => {
                    self.finish(
                        Some(SEQ_PAYMENT),
                        "payment",
                        Some(&step.page),
                        OrderState::AwaitingPayment,
                        Outcome::Succeeded,
                        None,
                        detail,
                        |r| {
                            r.intents
                                .push(done("deferred payment: awaiting payment at the store"));
                            r.pay_deadline = pay_deadline;
                            r.monitoring = Some(true);
                        },
                    )
                    .await
                }
                PayOutcome::ChallengeRequired(kind) => {
                    // §10.1: a challenge means the order stays placed and unpaid, waiting for a
                    // human to pay it: `awaiting_payment` + `needs_human`.
                    let msg = format!(
                        "payment needs a human: {kind} challenge; nothing bypassed, order {order_number} awaiting payment"
                    );
                    self.finish(
                        Some(SEQ_PAYMENT),
                        "payment",
                        Some(&step.page),
                        OrderState::AwaitingPayment,
                        Outcome::NeedsHuman,
                        Some(ErrorCode::SiteChallenge),
                        msg.clone(),
                        |r| {
                            r.intents.push(aborted(&msg));
                            r.monitoring = Some(true);
                        },
                    )
                    .await
                }
            },
            Err(e) if e.kind.is_ambiguous() => {
                // The payment may have gone through: read the order instead of paying again.
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
                        self.finish(
                            Some(SEQ_PAYMENT),
                            "payment",
                            Some(&d.page),
                            st,
                            Outcome::Succeeded,
                            None,
                            format!(
                                "payment answer lost; the site shows order {order_number} as {st}"
                            ),
                            |r| {
                                r.intents.push(done("verified paid on the site"));
                                r.monitoring = Some(true);
                            },
                        )
                        .await
                    }
                    Ok(d) => {
                        let msg = format!(
                            "payment answer lost ({}); the site shows {}; not retried",
                            e.message,
                            d.value.stage_label.as_deref().unwrap_or("no stage")
                        );
                        self.finish(
                            Some(SEQ_PAYMENT),
                            "payment",
                            Some(&d.page),
                            OrderState::Ordered,
                            Outcome::NeedsHuman,
                            Some(e.kind.code()),
                            msg.clone(),
                            |r| {
                                r.intents.push(aborted(&msg));
                                r.monitoring = Some(true);
                            },
                        )
                        .await
                    }
                    Err(e2) => {
                        // Payment outcome unknown: the intent stays pending for a human.
                        let msg = format!(
                            "payment answer lost ({}); cannot read the order ({}); not retried",
                            e.message, e2.message
                        );
                        self.finish(
                            Some(SEQ_PAYMENT),
                            "payment",
                            e.page.as_ref(),
                            OrderState::Ordered,
                            Outcome::NeedsHuman,
                            Some(e.kind.code()),
                            msg,
                            |_| {},
                        )
                        .await
                    }
                }
            }
            Err(e) => {
                let msg = format!("site refused the payment: {}", e.message);
                // A challenge page met as an error ends like a challenge answer (§10.1).
                let state = if e.kind == SiteErrorKind::Challenge {
                    OrderState::AwaitingPayment
                } else {
                    OrderState::Ordered
                };
                self.finish(
                    Some(SEQ_PAYMENT),
                    "payment",
                    e.page.as_ref(),
                    state,
                    Outcome::NeedsHuman,
                    Some(e.kind.code()),
                    msg.clone(),
                    |r| {
                        r.intents.push(aborted(&msg));
                        r.monitoring = Some(true);
                    },
                )
                .await
            }
        }
    }
}
