//! One task's execution (spec §6): steps `01-cart-add → 02-cart-check → 03-order-confirm →
//! amount guard → 04-order-submit → 05-payment`, and the recovery branch that acts on
//! [`crate::verify`]'s verdict. Every step is action → evidence on disk (fsynced) → journal
//! (event, evidence index, outbox row; one transaction) → report (from the outbox).
//!
//! Irreversible actions (submit, pay) are wrapped in a write-ahead intent: pending is committed,
//! then the lease is renewed (a 6002 aborts the intent with the reason and stops the task before
//! the action), then the site is called, then the intent is resolved with the step's record. A
//! pending intent found later forces the verification branch; nothing irreversible is repeated.

use std::future::Future;
use std::time::Duration;

use rakuten_types::order::LeaseGrant;
use rakuten_types::{ErrorCode, OrderState, Outcome, TaskId};
use tokio_util::sync::CancellationToken;

use crate::failpoint::Point;
use crate::gateway_client::{GatewayError, backoff};
use crate::intent::Intent;
use crate::journal::{Action, IntentResolution, JournalError, OrderRow, StepRecord};
use crate::site::{
    CartLine, ConfirmView, PageSnapshot, PayOutcome, SiteError, SiteErrorClass, SiteErrorKind,
};
use crate::verify::{self, Verdict};
use crate::worker::WorkerCtx;

/// Why a task run stopped without finishing the task.
#[derive(Debug, thiserror::Error)]
pub enum Stop {
    /// The lease is gone (6002): nothing more may be done for this task.
    #[error("lease lost: {0}")]
    LeaseLost(String),
    /// The gateway could not be reached to renew before an irreversible action.
    #[error("gateway: {0}")]
    Gateway(GatewayError),
    /// Shutting down.
    #[error("shutting down")]
    Shutdown,
    /// The journal failed: the step is not recorded, so it is not reported either.
    #[error("journal: {0}")]
    Journal(#[from] JournalError),
    /// Evidence could not be written: the step is not recorded or reported.
    #[error("evidence: {0}")]
    Evidence(#[from] std::io::Error),
}

impl From<GatewayError> for Stop {
    fn from(e: GatewayError) -> Self {
        match e {
            GatewayError::LeaseLost(m) => Stop::LeaseLost(m),
            GatewayError::ShuttingDown => Stop::Shutdown,
            e => Stop::Gateway(e),
        }
    }
}

/// Main step numbers of §6.1.
const SEQ_CART_ADD: i64 = 1;
const SEQ_CART_CHECK: i64 = 2;
const SEQ_CONFIRM: i64 = 3;
const SEQ_SUBMIT: i64 = 4;
const SEQ_PAYMENT: i64 = 5;

/// How long the recovery branch keeps retrying the task read while it holds the lease before it
/// hands the task to a human (D-worker-10).
pub const TASK_READ_MAX: Duration = Duration::from_secs(60);

/// Attempts of one step before the submit, the first included, when the site fails
/// transiently (D-worker-11).
pub const SAFE_STEP_ATTEMPTS: u32 = 5;

/// Time budget of one step's attempts before the submit: no further attempt starts when its
/// pause would end after this (D-worker-11). Well below the lease TTL; the renewal loop keeps
/// the lease meanwhile.
pub const SAFE_STEP_MAX: Duration = Duration::from_secs(30);

/// Largest pause between two attempts of a step before the submit (also capped by
/// `RAKUTEN_GATEWAY_RETRY_MAX_SECONDS`).
const SAFE_STEP_PAUSE_MAX: Duration = Duration::from_secs(8);

fn clip(s: &str) -> String {
    s.chars().take(1000).collect()
}

/// The outcome of a stop caused by a site error before anything irreversible happened.
fn outcome_before_submit(kind: SiteErrorKind) -> Outcome {
    match kind {
        SiteErrorKind::LoginLost | SiteErrorKind::Challenge => Outcome::NeedsHuman,
        _ => Outcome::Failed,
    }
}

/// A task being worked on under one grant.
#[derive(Debug)]
pub struct TaskRun<'a> {
    ctx: &'a WorkerCtx,
    grant: &'a LeaseGrant,
    lost: CancellationToken,
}

impl<'a> TaskRun<'a> {
    /// A run of `grant`; `lost` is cancelled by the renewal loop on 6002.
    pub fn new(ctx: &'a WorkerCtx, grant: &'a LeaseGrant, lost: CancellationToken) -> Self {
        TaskRun { ctx, grant, lost }
    }

    fn task_id(&self) -> &TaskId {
        &self.grant.task_id
    }

    fn check_lease(&self) -> Result<(), Stop> {
        if self.ctx.shutdown.is_cancelled() {
            return Err(Stop::Shutdown);
        }
        if self.lost.is_cancelled() {
            return Err(Stop::LeaseLost("the renewal loop saw 6002".into()));
        }
        Ok(())
    }

    fn rec(&self, step: &str, state: OrderState) -> StepRecord {
        StepRecord::new(self.task_id(), step, state, self.ctx.clock.now())
    }

    /// Evidence → journal → report for one step.
    async fn record(
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
    async fn finish(
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

    async fn fail_site(
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

    /// Runs a step that is safe to repeat (item detail, cart add, cart check, order confirm:
    /// nothing irreversible happens before the submit), retrying a [`SiteErrorClass::Retryable`]
    /// failure up to [`SAFE_STEP_ATTEMPTS`] times within [`SAFE_STEP_MAX`], with jittered
    /// exponential pauses (D-worker-11). `locked`: each attempt holds the account lock (not the
    /// pauses). The lease is checked before every attempt and a pause ends early when it is lost
    /// or the worker shuts down ([`Stop`]). `Ok(Err)`: a fatal failure, or the last retryable one
    /// (its message says how many attempts were made). Never use it for submit or pay.
    async fn safe_step<T, F, Fut>(
        &self,
        step: &str,
        locked: bool,
        mut call: F,
    ) -> Result<Result<T, SiteError>, Stop>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SiteError>>,
    {
        let started = tokio::time::Instant::now();
        let cap = self.ctx.settings.retry_max.min(SAFE_STEP_PAUSE_MAX);
        let mut attempt: u32 = 0;
        loop {
            self.check_lease()?;
            let r = if locked {
                let _g = self.ctx.locks.lock(self.ctx.site.account()).await;
                call().await
            } else {
                call().await
            };
            let mut e = match r {
                Ok(v) => return Ok(Ok(v)),
                Err(e) if e.class() == SiteErrorClass::Fatal => return Ok(Err(e)),
                Err(e) => e,
            };
            let pause = backoff(attempt, cap);
            attempt += 1;
            if attempt >= SAFE_STEP_ATTEMPTS || started.elapsed() + pause > SAFE_STEP_MAX {
                e.message = format!("{} (gave up after {attempt} attempts)", e.message);
                return Ok(Err(e));
            }
            tracing::warn!(task_id = %self.task_id(), step, attempt, error = %e, "transient site failure before the submit; retrying");
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = self.lost.cancelled() => {}
                () = self.ctx.shutdown.cancelled() => {}
            }
        }
    }

    /// A step before the submit: its action through [`Self::safe_step`]; on failure the task
    /// ends ([`Self::fail_site`] with `state`) and the answer is `None`.
    async fn site_step<T, F, Fut>(
        &self,
        seq: Option<i64>,
        step: &str,
        locked: bool,
        state: OrderState,
        call: F,
    ) -> Result<Option<T>, Stop>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SiteError>>,
    {
        match self.safe_step(step, locked, call).await? {
            Ok(v) => Ok(Some(v)),
            Err(e) => {
                self.fail_site(seq, step, state, &e).await?;
                Ok(None)
            }
        }
    }

    /// Evidence → journal → report of a step that went well: `detail` says what the page showed,
    /// `extra` fills the rest of the record.
    async fn record_step(
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

    /// Renews before an irreversible action; on failure aborts the pending intent with the
    /// reason.
    async fn renew_before(&self, action: Action) -> Result<(), Stop> {
        let token = self.grant.lease_token.as_str();
        let res = match self.check_lease() {
            Err(e) => Err(e),
            Ok(()) => self
                .ctx
                .gateway
                .renew(self.task_id(), token)
                .await
                .map(|_| ())
                .map_err(Stop::from),
        };
        if let Err(e) = res {
            let reason = match &e {
                Stop::LeaseLost(m) => format!(
                    "lease lost (6002) before {}: {m}; nothing sent to the site",
                    action.as_str()
                ),
                other => format!(
                    "lease renewal before {} failed: {other}; nothing sent to the site",
                    action.as_str()
                ),
            };
            tracing::warn!(task_id = %self.task_id(), reason = %reason, "irreversible action not started");
            if matches!(e, Stop::LeaseLost(_)) {
                self.lost.cancel();
            }
            let res = IntentResolution {
                action,
                done: false,
                reason: Some(reason),
            };
            self.ctx
                .journal
                .intent_resolve(self.task_id(), &res, None, self.ctx.clock.now())
                .await?;
            return Err(e);
        }
        Ok(())
    }

    /// The normal path, from the first step.
    pub async fn execute(&self) -> Result<(), Stop> {
        let task_id = self.task_id().clone();
        let intent = match Intent::parse(&self.grant.intent) {
            Ok(i) => i,
            Err(msg) => {
                return self
                    .finish(
                        None,
                        "intent",
                        None,
                        OrderState::Created,
                        Outcome::Failed,
                        Some(ErrorCode::Validation),
                        msg,
                        |_| {},
                    )
                    .await;
            }
        };
        let Some(purchase) = self
            .site_step(None, "item-detail", false, OrderState::Created, || {
                self.ctx.scraper.item_detail(&intent.item_url)
            })
            .await?
        else {
            return Ok(());
        };
        let variant_ok = match (&intent.variant_id, purchase.variant_ids.is_empty()) {
            (None, true) => true,
            (Some(v), false) => purchase.variant_ids.contains(v),
            _ => false,
        };
        if !variant_ok {
            let msg = format!(
                "invalid intent: variant {:?} does not match the item's variants {:?}",
                intent.variant_id, purchase.variant_ids
            );
            return self
                .finish(
                    None,
                    "intent",
                    None,
                    OrderState::Created,
                    Outcome::Failed,
                    Some(ErrorCode::Validation),
                    msg,
                    |_| {},
                )
                .await;
        }
        self.ctx
            .journal
            .order_set_purchase(
                &task_id,
                &serde_json::to_string(&purchase).unwrap_or_default(),
            )
            .await?;
        let line = CartLine {
            item_id: purchase.item_id,
            variant_id: intent.variant_id.clone(),
            quantity: intent.quantity,
        };

        // 01 cart add
        let Some(step) = self
            .site_step(
                Some(SEQ_CART_ADD),
                "cart-add",
                true,
                OrderState::Created,
                || self.ctx.site.cart_add(&line),
            )
            .await?
        else {
            return Ok(());
        };
        let detail = format!(
            "added {} × item {} {:?}",
            line.quantity, line.item_id, line.variant_id
        );
        self.record_step(
            SEQ_CART_ADD,
            "cart-add",
            OrderState::InCart,
            &step.page,
            detail,
            |_| {},
        )
        .await?;

        // 02 cart check
        let Some(step) = self
            .site_step(
                Some(SEQ_CART_CHECK),
                "cart-check",
                true,
                OrderState::InCart,
                || self.ctx.site.cart_check(),
            )
            .await?
        else {
            return Ok(());
        };
        let cart = &step.value;
        let exact = cart.lines.len() == 1
            && cart.lines[0].0 == line.item_id
            && cart.lines[0].1 == line.variant_id
            && cart.lines[0].2 == line.quantity;
        if !exact {
            let msg = format!(
                "cart does not hold exactly the intended line: {:?}",
                cart.lines
            );
            return self
                .finish(
                    Some(SEQ_CART_CHECK),
                    "cart-check",
                    Some(&step.page),
                    OrderState::InCart,
                    Outcome::Failed,
                    Some(ErrorCode::SiteUnexpectedPage),
                    msg,
                    |_| {},
                )
                .await;
        }
        let cart_subtotal = cart.subtotal_yen;
        let detail = format!("cart holds the intended line; subtotal {cart_subtotal} yen");
        self.record_step(
            SEQ_CART_CHECK,
            "cart-check",
            OrderState::InCart,
            &step.page,
            detail,
            |_| {},
        )
        .await?;

        // 03 order confirm
        let Some(step) = self
            .site_step(
                Some(SEQ_CONFIRM),
                "order-confirm",
                true,
                OrderState::InCart,
                || self.ctx.site.order_confirm(),
            )
            .await?
        else {
            return Ok(());
        };
        let confirm = step.value.clone();
        let detail = format!(
            "payable {} yen (items {} + shipping {}), payment {}",
            confirm.payable_yen, confirm.subtotal_yen, confirm.shipping_yen, confirm.payment_method
        );
        self.record_step(
            SEQ_CONFIRM,
            "order-confirm",
            OrderState::InCart,
            &step.page,
            detail,
            |r| {
                r.payable_yen = Some(confirm.payable_yen);
                r.pay_deadline = confirm.pay_deadline;
                r.payment_method = Some(confirm.payment_method.clone());
            },
        )
        .await?;

        // Amount guard: the confirm page's evidence is the guard's evidence.
        let limit = intent
            .max_total_yen
            .unwrap_or(self.ctx.settings.max_total_yen);
        let guard = if confirm.payable_yen > limit {
            Some(format!(
                "amount guard: payable {} yen exceeds the limit {limit} yen; nothing submitted",
                confirm.payable_yen
            ))
        } else if confirm.subtotal_yen != cart_subtotal {
            Some(format!(
                "amount guard: items subtotal changed between cart ({cart_subtotal} yen) and confirm ({} yen); nothing submitted",
                confirm.subtotal_yen
            ))
        } else {
            None
        };
        if let Some(msg) = guard {
            let mut rec = self.rec("amount-guard", OrderState::InCart);
            rec.finish = Some((
                Outcome::NeedsHuman,
                Some(ErrorCode::AmountOverLimit.as_i32()),
            ));
            rec.detail = Some(msg.clone());
            tracing::warn!(task_id = %task_id, detail = %msg, "amount guard stopped the task");
            // No new page: the report points at 03-order-confirm, already on disk.
            self.ctx
                .journal
                .step_record(&rec, &self.ctx.settings.worker_id)
                .await?;
            self.ctx.flush(&task_id).await?;
            return Ok(());
        }

        self.submit(&confirm).await
    }

    /// 04 order submit (irreversible), then payment.
    async fn submit(&self, confirm: &ConfirmView) -> Result<(), Stop> {
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
                    Some(SEQ_SUBMIT),
                    "order-submit",
                    e.page.as_ref(),
                    OrderState::InCart,
                    rec_outcome,
                    Some(e.kind.code()),
                    reason.clone(),
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

    /// 05 payment (irreversible).
    async fn pay(&self, order_number: &str) -> Result<(), Stop> {
        let task_id = self.task_id().clone();
        self.check_lease()?;
        self.ctx
            .journal
            .intent_begin(&task_id, Action::Pay, self.ctx.clock.now())
            .await?;
        self.renew_before(Action::Pay).await?;
        let r = {
            let _g = self.ctx.locks.lock(self.ctx.site.account()).await;
            self.ctx.site.pay(order_number).await
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
                    let msg = format!(
                        "payment needs a human: {kind} challenge; nothing bypassed, order {order_number} left unpaid"
                    );
                    self.finish(
                        Some(SEQ_PAYMENT),
                        "payment",
                        Some(&step.page),
                        OrderState::Ordered,
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
                            "payment answer lost ({}); the site shows {:?}; not retried",
                            e.message, d.value.stage_label
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
                self.finish(
                    Some(SEQ_PAYMENT),
                    "payment",
                    e.page.as_ref(),
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
        }
    }

    /// The recovery branch (§5): verify on the site, then report what is there, continue where
    /// it is safe, or hand over to a human. `inserted` says whether this worker had no local
    /// record of the task before this grant.
    pub async fn recover(&self, row: &OrderRow, inserted: bool) -> Result<(), Stop> {
        let since = if inserted {
            // No local record: the task's creation on the gateway bounds the window.
            match self.read_task_created_at().await? {
                Ok(t) => t,
                Err(msg) => {
                    return self
                        .finish(
                            None,
                            "verify",
                            None,
                            row.state,
                            Outcome::NeedsHuman,
                            None,
                            msg,
                            |_| {},
                        )
                        .await;
                }
            }
        } else {
            row.created_at
        };
        self.recover_with(row, since).await
    }

    /// Reads the task's creation time from the gateway for the recovery window, retrying
    /// transient failures with the client's backoff while this grant holds the lease (D-worker-10):
    /// the lease is renewed when half of its last known term has passed; 6002 stops the task
    /// (nothing recorded, like any lost lease); a lease that could not be renewed within its term
    /// stops it too ([`Stop::Gateway`]: it turns stale and a reclaim recovers it again). `Ok(Err)`
    /// — give up, the task needs a human — on a final refusal (4xx) or after
    /// [`TASK_READ_MAX`] of failures.
    async fn read_task_created_at(&self) -> Result<Result<rakuten_types::Timestamp, String>, Stop> {
        let started = tokio::time::Instant::now();
        let term = |expires: rakuten_types::Timestamp| {
            // Clocks of this host and the gateway may differ: keep the term within sane bounds.
            Duration::from_secs_f64(
                expires
                    .seconds_since(self.ctx.clock.now())
                    .clamp(1.0, 600.0),
            )
        };
        let mut lease_term = term(self.grant.lease_expires_at);
        let mut renewed_at = started;
        let mut attempt: u32 = 0;
        loop {
            self.check_lease()?;
            let err = match self.ctx.gateway.task(self.task_id()).await {
                Ok(t) => return Ok(Ok(t.task.created_at)),
                Err(e @ GatewayError::Transient(_)) => e,
                Err(e @ (GatewayError::LeaseLost(_) | GatewayError::ShuttingDown)) => {
                    return Err(e.into());
                }
                Err(e @ GatewayError::Rejected { .. }) => {
                    return Ok(Err(format!(
                        "recovery: the gateway refused to show the task ({e}); order status unknown"
                    )));
                }
            };
            if started.elapsed() >= TASK_READ_MAX {
                return Ok(Err(format!(
                    "recovery: cannot read the task's creation time from the gateway for {}s ({err}, {} attempts); order status unknown",
                    TASK_READ_MAX.as_secs(),
                    attempt + 1
                )));
            }
            tracing::warn!(task_id = %self.task_id(), attempt, error = %err, "recovery: task read failed, retrying");
            if renewed_at.elapsed() >= lease_term / 2 {
                match self
                    .ctx
                    .gateway
                    .renew(self.task_id(), &self.grant.lease_token)
                    .await
                {
                    Ok(ack) => {
                        lease_term = term(ack.lease_expires_at);
                        renewed_at = tokio::time::Instant::now();
                    }
                    Err(GatewayError::LeaseLost(m)) => {
                        self.lost.cancel();
                        return Err(Stop::LeaseLost(m));
                    }
                    Err(GatewayError::ShuttingDown) => return Err(Stop::Shutdown),
                    Err(e) if renewed_at.elapsed() >= lease_term => {
                        tracing::warn!(task_id = %self.task_id(), error = %e, "recovery: the lease could not be renewed within its term; stopping");
                        return Err(Stop::Gateway(e));
                    }
                    Err(e) => {
                        tracing::warn!(task_id = %self.task_id(), error = %e, "recovery: renewal failed, retrying")
                    }
                }
            }
            let pause = backoff(attempt, self.ctx.settings.retry_max);
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = self.lost.cancelled() => {}
                () = self.ctx.shutdown.cancelled() => {}
            }
            attempt = attempt.saturating_add(1);
        }
    }

    async fn recover_with(
        &self,
        row: &OrderRow,
        since: rakuten_types::Timestamp,
    ) -> Result<(), Stop> {
        let task_id = self.task_id().clone();
        self.check_lease()?;
        let intents = self.ctx.journal.intents(&task_id).await?;
        let pending = |a: Action| {
            intents
                .iter()
                .any(|i| i.action == a.as_str() && i.status == "pending")
        };
        let known_id = row
            .site_order_id
            .clone()
            .or_else(|| intents.iter().find_map(|i| i.site_order_id.clone()));
        let v = verify::verify_on_site(self.ctx, row, known_id.as_deref(), since).await;
        // Evidence of every page read; the verdict's record points at the last one.
        let n = v.pages.len();
        let mut last_page = None;
        for (i, (step, page)) in v.pages.iter().enumerate() {
            if i + 1 == n {
                last_page = Some((step.clone(), page.clone()));
                break;
            }
            let mut rec = self.rec(step, row.state);
            rec.report = false;
            rec.detail = Some("recovery check: page read".into());
            self.record(None, Some(page), rec).await?;
        }
        let (vstep, vpage) = match last_page {
            Some((s, p)) => (s, Some(p)),
            None => ("verify".to_owned(), None),
        };
        tracing::info!(task_id = %task_id, verdict = ?v.verdict, "recovery check");
        match v.verdict {
            Verdict::AlreadyOrdered {
                order_number,
                state,
            } => {
                let submit_pending = pending(Action::Submit);
                let pay_pending = pending(Action::Pay);
                let found = format!(
                    "recovery: order {order_number} found on the site ({state}); not submitted again"
                );
                let base = |r: &mut StepRecord| {
                    r.site_order_id = Some(order_number.clone());
                    if submit_pending {
                        r.intents.push(IntentResolution {
                            action: Action::Submit,
                            done: true,
                            reason: Some("found on the site by the recovery check".into()),
                        });
                    }
                };
                match state {
                    OrderState::Paid
                    | OrderState::Shipped
                    | OrderState::Delivered
                    | OrderState::AwaitingPayment => {
                        self.finish(
                            None,
                            &vstep,
                            vpage.as_ref(),
                            state,
                            Outcome::Succeeded,
                            None,
                            found.clone(),
                            |r| {
                                base(r);
                                if pay_pending {
                                    r.intents.push(IntentResolution {
                                        action: Action::Pay,
                                        done: true,
                                        reason: Some(
                                            "site shows the order paid/awaiting payment".into(),
                                        ),
                                    });
                                }
                                r.monitoring = Some(state != OrderState::Delivered);
                            },
                        )
                        .await
                    }
                    OrderState::Cancelled => {
                        self.finish(
                            None,
                            &vstep,
                            vpage.as_ref(),
                            state,
                            Outcome::Failed,
                            None,
                            found.clone(),
                            |r| {
                                base(r);
                                if pay_pending {
                                    r.intents.push(IntentResolution {
                                        action: Action::Pay,
                                        done: false,
                                        reason: Some("order cancelled on the site".into()),
                                    });
                                }
                            },
                        )
                        .await
                    }
                    _ if pay_pending => {
                        let msg = format!(
                            "{found}; a payment was started before the restart and the site shows it unpaid: not retried"
                        );
                        self.finish(
                            None,
                            &vstep,
                            vpage.as_ref(),
                            OrderState::Ordered,
                            Outcome::NeedsHuman,
                            None,
                            msg.clone(),
                            |r| {
                                base(r);
                                r.intents.push(IntentResolution {
                                    action: Action::Pay,
                                    done: false,
                                    reason: Some(clip(&msg)),
                                });
                                r.monitoring = Some(true);
                            },
                        )
                        .await
                    }
                    _ => {
                        // Ordered and no payment was ever started: paying is the next step.
                        let mut rec = self.rec(&vstep, OrderState::Ordered);
                        rec.detail = Some(found);
                        base(&mut rec);
                        self.record(None, vpage.as_ref(), rec).await?;
                        self.pay(&order_number).await
                    }
                }
            }
            Verdict::NotOrdered { detail } => {
                if let Some(k) = self.grant.known_state.filter(|k| k.is_submitted()) {
                    let msg = format!(
                        "recovery: the gateway knows state {k} but the site lists no order ({detail}); needs a human"
                    );
                    return self
                        .finish(
                            None,
                            &vstep,
                            vpage.as_ref(),
                            row.state,
                            Outcome::NeedsHuman,
                            None,
                            msg,
                            |_| {},
                        )
                        .await;
                }
                let aborted_submits = intents
                    .iter()
                    .filter(|i| i.action == "submit" && i.status == "aborted")
                    .count();
                if aborted_submits >= 2 {
                    let msg = format!(
                        "recovery: not ordered on the site ({detail}), but submits were already attempted {aborted_submits} times; needs a human"
                    );
                    return self
                        .finish(
                            None,
                            &vstep,
                            vpage.as_ref(),
                            row.state,
                            Outcome::NeedsHuman,
                            None,
                            msg,
                            |_| {},
                        )
                        .await;
                }
                let mut rec = self.rec(&vstep, row.state);
                rec.report = false;
                rec.detail = Some(clip(&format!(
                    "recovery: not ordered on the site ({detail}); executing from the start"
                )));
                if pending(Action::Submit) {
                    rec.intents.push(IntentResolution {
                        action: Action::Submit,
                        done: false,
                        reason: Some(clip(&format!("verified not ordered on the site: {detail}"))),
                    });
                }
                self.record(None, vpage.as_ref(), rec).await?;
                Box::pin(self.execute()).await
            }
            Verdict::Unknown { reason, code } => {
                let msg = format!(
                    "recovery: cannot tell whether the order was placed: {reason}; needs a human"
                );
                self.finish(
                    None,
                    &vstep,
                    vpage.as_ref(),
                    row.state,
                    Outcome::NeedsHuman,
                    code,
                    msg,
                    |_| {},
                )
                .await
            }
        }
    }
}
