//! The recovery hand-off (§5): after a lost answer or a reclaimed lease, look on the site
//! ([`crate::verify`]) and report what is there, continue where it is safe, or hand the task to
//! a human.

use std::time::Duration;

use rakuten_types::{OrderState, Outcome};

use super::{Ending, Stop, TaskRun, clip};
use crate::gateway_client::{GatewayError, backoff};
use crate::journal::{Action, IntentResolution, IntentRow, OrderRow, StepRecord};
use crate::site::PageSnapshot;
use crate::verify::{self, Verdict};

/// How long the recovery branch keeps retrying the task read while it holds the lease before it
/// hands the task to a human (D-recovery-retries-task-read).
pub const TASK_READ_MAX: Duration = Duration::from_secs(60);

impl TaskRun<'_> {
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
                            Ending {
                                seq: None,
                                step: "verify",
                                page: None,
                                state: row.state,
                                outcome: Outcome::NeedsHuman,
                                code: None,
                                detail: msg,
                            },
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
    /// transient failures with the client's backoff while this grant holds the lease (D-recovery-retries-task-read):
    /// the lease is renewed when half of its last known term has passed; 6002 stops the task
    /// (nothing recorded, like any lost lease); a lease that could not be renewed within its term
    /// stops it too ([`Stop::Gateway`]: it turns stale and a reclaim recovers it again). `Ok(Err)`
    /// — give up, the task needs a human — on a final refusal (4xx) or after
    /// [`TASK_READ_MAX`] of failures.
    pub(super) async fn read_task_created_at(
        &self,
    ) -> Result<Result<rakuten_types::Timestamp, String>, Stop> {
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
                Ok(t) => return Ok(Ok(t.created_at)),
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

    /// Verifies on the site ([`crate::verify`], window from `since`), keeps every page it read
    /// as evidence, then acts on the verdict.
    pub(super) async fn recover_with(
        &self,
        row: &OrderRow,
        since: rakuten_types::Timestamp,
    ) -> Result<(), Stop> {
        let task_id = self.task_id().clone();
        self.check_lease()?;
        let intents = self.ctx.journal.intents(&task_id).await?;
        let known_id = row
            .site_order_id
            .clone()
            .or_else(|| intents.iter().find_map(|i| i.site_order_id.clone()));
        let v = verify::verify_on_site(self.ctx, row, known_id.as_deref(), since).await;
        let (step, page) = self.record_check_pages(row, v.pages).await?;
        let checked = Checked {
            row,
            intents,
            step,
            page,
        };
        tracing::info!(task_id = %task_id, verdict = %v.verdict, "recovery check");
        match v.verdict {
            Verdict::AlreadyOrdered {
                order_number,
                state,
            } => self.already_ordered(&checked, &order_number, state).await,
            Verdict::NotOrdered { detail } => self.not_ordered(&checked, &detail).await,
            Verdict::Unknown { reason, code } => {
                let msg = format!(
                    "recovery: cannot tell whether the order was placed: {reason}; needs a human"
                );
                let end = checked.ending(row.state, Outcome::NeedsHuman, code, msg);
                self.finish(end, |_| {}).await
            }
        }
    }

    /// Evidence of every page the check read but the last, unreported; the verdict's record
    /// points at the last one, whose step and page are returned (`verify` and none when the check
    /// read no page).
    async fn record_check_pages(
        &self,
        row: &OrderRow,
        mut pages: Vec<(String, PageSnapshot)>,
    ) -> Result<(String, Option<PageSnapshot>), Stop> {
        let last = pages.pop();
        for (step, page) in &pages {
            let mut rec = self.rec(step, row.state);
            rec.report = false;
            rec.detail = Some("recovery check: page read".into());
            self.record(None, Some(page), rec).await?;
        }
        Ok(match last {
            Some((step, page)) => (step, Some(page)),
            None => ("verify".to_owned(), None),
        })
    }

    /// The site lists the order: it is never submitted again. Paid or further ends the task as
    /// done, cancelled as failed; placed but unpaid continues to the payment, unless a payment
    /// was already started, which a human settles.
    async fn already_ordered(
        &self,
        checked: &Checked<'_>,
        order_number: &str,
        state: OrderState,
    ) -> Result<(), Stop> {
        let submit_pending = checked.pending(Action::Submit);
        let pay_pending = checked.pending(Action::Pay);
        let found = format!(
            "recovery: order {order_number} found on the site ({state}); not submitted again"
        );
        let base = |r: &mut StepRecord| {
            r.site_order_id = Some(order_number.to_owned());
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
                let end = checked.ending(state, Outcome::Succeeded, None, found.clone());
                self.finish(end, |r| {
                    base(r);
                    if pay_pending {
                        r.intents.push(IntentResolution {
                            action: Action::Pay,
                            done: true,
                            reason: Some("site shows the order paid/awaiting payment".into()),
                        });
                    }
                    r.monitoring = Some(state != OrderState::Delivered);
                })
                .await
            }
            OrderState::Cancelled => {
                let end = checked.ending(state, Outcome::Failed, None, found.clone());
                self.finish(end, |r| {
                    base(r);
                    if pay_pending {
                        r.intents.push(IntentResolution {
                            action: Action::Pay,
                            done: false,
                            reason: Some("order cancelled on the site".into()),
                        });
                    }
                })
                .await
            }
            _ if pay_pending => {
                let msg = format!(
                    "{found}; a payment was started before the restart and the site shows it unpaid: not retried"
                );
                let end =
                    checked.ending(OrderState::Ordered, Outcome::NeedsHuman, None, msg.clone());
                self.finish(end, |r| {
                    base(r);
                    r.intents.push(IntentResolution {
                        action: Action::Pay,
                        done: false,
                        reason: Some(clip(&msg)),
                    });
                    r.monitoring = Some(true);
                })
                .await
            }
            _ => {
                // Ordered and no payment was ever started: paying is the next step.
                let mut rec = self.rec(&checked.step, OrderState::Ordered);
                rec.detail = Some(found);
                base(&mut rec);
                self.record(None, checked.page.as_ref(), rec).await?;
                self.pay(order_number).await
            }
        }
    }

    /// The site lists no such order: the task runs again from the start, unless the gateway
    /// already knows it submitted or two submits were already aborted, which a human settles.
    async fn not_ordered(&self, checked: &Checked<'_>, detail: &str) -> Result<(), Stop> {
        let row = checked.row;
        if let Some(k) = self.grant.known_state.filter(|k| k.is_submitted()) {
            let msg = format!(
                "recovery: the gateway knows state {k} but the site lists no order ({detail}); needs a human"
            );
            let end = checked.ending(row.state, Outcome::NeedsHuman, None, msg);
            return self.finish(end, |_| {}).await;
        }
        let aborted_submits = checked
            .intents
            .iter()
            .filter(|i| i.action == "submit" && i.status == "aborted")
            .count();
        if aborted_submits >= 2 {
            let msg = format!(
                "recovery: not ordered on the site ({detail}), but submits were already attempted {aborted_submits} times; needs a human"
            );
            let end = checked.ending(row.state, Outcome::NeedsHuman, None, msg);
            return self.finish(end, |_| {}).await;
        }
        let mut rec = self.rec(&checked.step, row.state);
        rec.report = false;
        rec.detail = Some(clip(&format!(
            "recovery: not ordered on the site ({detail}); executing from the start"
        )));
        if checked.pending(Action::Submit) {
            rec.intents.push(IntentResolution {
                action: Action::Submit,
                done: false,
                reason: Some(clip(&format!("verified not ordered on the site: {detail}"))),
            });
        }
        self.record(None, checked.page.as_ref(), rec).await?;
        Box::pin(self.execute()).await
    }
}

/// What the recovery check leaves to act on: the task's row and intents as the journal holds
/// them, and the step and page the verdict's record points at.
struct Checked<'r> {
    row: &'r OrderRow,
    intents: Vec<IntentRow>,
    step: String,
    page: Option<PageSnapshot>,
}

impl Checked<'_> {
    /// Whether an intent of `action` is still pending.
    fn pending(&self, action: Action) -> bool {
        self.intents
            .iter()
            .any(|i| i.action == action.as_str() && i.status == "pending")
    }

    /// The task's ending on the verdict's record.
    fn ending(
        &self,
        state: OrderState,
        outcome: Outcome,
        code: Option<rakuten_types::ErrorCode>,
        detail: String,
    ) -> Ending<'_> {
        Ending {
            seq: None,
            step: &self.step,
            page: self.page.as_ref(),
            state,
            outcome,
            code,
            detail,
        }
    }
}
