//! The recovery hand-off (§5): after a lost answer or a reclaimed lease, look on the site
//! ([`crate::verify`]) and report what is there, continue where it is safe, or hand the task to
//! a human.

use std::time::Duration;

use rakuten_types::{OrderState, Outcome};

use super::{Ending, Stop, TaskRun, clip};
use crate::gateway_client::{GatewayError, backoff};
use crate::journal::{Action, IntentResolution, OrderRow, StepRecord};
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

    pub(super) async fn recover_with(
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
        tracing::info!(task_id = %task_id, verdict = %v.verdict, "recovery check");
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
                            Ending {
                                seq: None,
                                step: &vstep,
                                page: vpage.as_ref(),
                                state,
                                outcome: Outcome::Succeeded,
                                code: None,
                                detail: found.clone(),
                            },
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
                            Ending {
                                seq: None,
                                step: &vstep,
                                page: vpage.as_ref(),
                                state,
                                outcome: Outcome::Failed,
                                code: None,
                                detail: found.clone(),
                            },
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
                            Ending {
                                seq: None,
                                step: &vstep,
                                page: vpage.as_ref(),
                                state: OrderState::Ordered,
                                outcome: Outcome::NeedsHuman,
                                code: None,
                                detail: msg.clone(),
                            },
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
                            Ending {
                                seq: None,
                                step: &vstep,
                                page: vpage.as_ref(),
                                state: row.state,
                                outcome: Outcome::NeedsHuman,
                                code: None,
                                detail: msg,
                            },
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
                            Ending {
                                seq: None,
                                step: &vstep,
                                page: vpage.as_ref(),
                                state: row.state,
                                outcome: Outcome::NeedsHuman,
                                code: None,
                                detail: msg,
                            },
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
                    Ending {
                        seq: None,
                        step: &vstep,
                        page: vpage.as_ref(),
                        state: row.state,
                        outcome: Outcome::NeedsHuman,
                        code,
                        detail: msg,
                    },
                    |_| {},
                )
                .await
            }
        }
    }
}
