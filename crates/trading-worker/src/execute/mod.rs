//! One task's execution (spec §6): steps `01-cart-add → 02-cart-check → 03-order-confirm →
//! amount guard → 04-order-submit → 05-payment`, and the recovery branch that acts on
//! [`crate::verify`]'s verdict. Every step is action → evidence on disk (fsynced) → journal
//! (event, evidence index, outbox row; one transaction) → report (from the outbox).
//!
//! Irreversible actions (submit, pay) are wrapped in a write-ahead intent: pending is committed,
//! then the lease is renewed (a 6002 aborts the intent with the reason and stops the task before
//! the action), then the site is called, then the intent is resolved with the step's record. A
//! pending intent found later forces the verification branch; nothing irreversible is repeated.
//!
//! One file per step of §6, each an `impl TaskRun` block:
//! - `mod.rs`: [`TaskRun`], [`Stop`], the lease checks, and [`TaskRun::execute`], which reads the
//!   item detail and then runs the steps in order;
//! - `record.rs`: evidence → journal → report of one step, and ending a task (`Ending`);
//! - `safe_step.rs`: the retry of a step before the submit (D-pre-submit-retries);
//! - `cart.rs`: `01-cart-add`, `02-cart-check`;
//! - `confirm.rs`: `03-order-confirm` and the amount guard;
//! - `submit.rs`: `04-order-submit` (irreversible);
//! - `pay.rs`: `05-payment` (irreversible): act, then answered, answer lost or refused;
//! - `recovery.rs`: the recovery hand-off, acting on [`crate::verify`]'s verdict, one function
//!   per verdict.

use rakuten_types::order::LeaseGrant;
use rakuten_types::{ErrorCode, OrderState, Outcome, TaskId};
use tokio_util::sync::CancellationToken;

use crate::ctx::WorkerCtx;
use crate::gateway_client::GatewayError;
use crate::intent::Intent;
use crate::journal::{Action, IntentResolution, JournalError};
use crate::site::{CartLine, SiteErrorKind};

mod cart;
mod confirm;
mod pay;
mod record;

use record::Ending;
mod recovery;
mod safe_step;
mod submit;

pub use recovery::TASK_READ_MAX;
pub use safe_step::{SAFE_STEP_ATTEMPTS, SAFE_STEP_MAX};

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

    pub(super) fn task_id(&self) -> &TaskId {
        &self.grant.task_id
    }

    pub(super) fn check_lease(&self) -> Result<(), Stop> {
        if self.ctx.shutdown.is_cancelled() {
            return Err(Stop::Shutdown);
        }
        if self.lost.is_cancelled() {
            return Err(Stop::LeaseLost("the renewal loop saw 6002".into()));
        }
        Ok(())
    }

    /// Renews before an irreversible action; on failure aborts the pending intent with the
    /// reason.
    pub(super) async fn renew_before(&self, action: Action) -> Result<(), Stop> {
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
                        Ending {
                            seq: None,
                            step: "intent",
                            page: None,
                            state: OrderState::Created,
                            outcome: Outcome::Failed,
                            code: Some(ErrorCode::Validation),
                            detail: msg,
                        },
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
            let wanted = match &intent.variant_id {
                Some(v) => format!("variant {v}"),
                None => "no variant".to_owned(),
            };
            let offered = if purchase.variant_ids.is_empty() {
                "none".to_owned()
            } else {
                purchase.variant_ids.join(", ")
            };
            let msg =
                format!("invalid intent: {wanted} does not match the item's variants ({offered})");
            return self
                .finish(
                    Ending {
                        seq: None,
                        step: "intent",
                        page: None,
                        state: OrderState::Created,
                        outcome: Outcome::Failed,
                        code: Some(ErrorCode::Validation),
                        detail: msg,
                    },
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

        let Some(cart_subtotal) = self.cart(&line).await? else {
            return Ok(());
        };
        let Some(confirm) = self.confirm(&intent, cart_subtotal).await? else {
            return Ok(());
        };
        self.submit(&confirm).await
    }
}
