//! Claims due items and executes them: one (card, task type) poll against the carrier.
//!
//! Order inside [`Executor::execute_one`]:
//! 1. claim (conditional update; `None` means another executor holds it: skip this round);
//! 2. a takeover that finds the attempts already used up fails the item without a call;
//! 3. the scope check (card gone → failed, no retry; card or bound device polling off → failed);
//! 4. count the attempt, call the carrier (bounded by [`UPSTREAM_TIMEOUT`]);
//! 5. for a suspended card, the normal resume decision — refused while the stop lock is held;
//! 6. finish with the claim token: completed, back to pending after the task type's interval,
//!    or failed at the limit / on a business failure.
//!
//! Issue #6's scheduler drives [`Executor::execute_one`] from its hint and ordinary lanes; for
//! now `serve` calls [`Executor::run_once`] on a timer.

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use serde::Serialize;

use rakuten_types::{Clock, Timestamp};

use super::{CLAIM_LEASE, UPSTREAM_TIMEOUT};
use crate::domain::TaskTypes;
use crate::store::{CardScope, ClaimedItem, Finish, NewLog, Store, StoreError, StoreResult};
use crate::upstream::{PollRequest, Upstream, UpstreamError};

/// The task type whose normal content includes the stop/resume decision.
pub const CARD_STATUS: &str = "card_status";

/// What happened to one item in one round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecOutcome {
    /// Another executor holds the item, or it is not due: skipped, it runs later.
    Skipped,
    /// Completed.
    Completed,
    /// Recoverable failure: back to pending.
    Retried,
    /// Failed and dequeued.
    Failed,
    /// The claim was lost before finishing (taken over, closed or expired meanwhile).
    ClaimLost,
}

/// Counts of one [`Executor::run_once`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RunReport {
    /// Items examined.
    pub due: usize,
    /// Skipped (claimed elsewhere).
    pub skipped: usize,
    /// Completed.
    pub completed: usize,
    /// Back to pending.
    pub retried: usize,
    /// Failed.
    pub failed: usize,
    /// Claim lost.
    pub claim_lost: usize,
}

/// The executor.
#[derive(Clone)]
pub struct Executor {
    store: Arc<dyn Store>,
    upstream: Arc<dyn Upstream>,
    clock: Arc<dyn Clock>,
    task_types: TaskTypes,
    batch: i64,
    concurrency: usize,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("batch", &self.batch)
            .field("concurrency", &self.concurrency)
            .finish_non_exhaustive()
    }
}

impl Executor {
    /// An executor taking at most `batch` due items per round, `concurrency` at a time.
    pub fn new(
        store: Arc<dyn Store>,
        upstream: Arc<dyn Upstream>,
        clock: Arc<dyn Clock>,
        task_types: TaskTypes,
        batch: i64,
        concurrency: usize,
    ) -> Self {
        Executor {
            store,
            upstream,
            clock,
            task_types,
            batch: batch.max(1),
            concurrency: concurrency.max(1),
        }
    }

    /// One round: claims and executes the due items (pending and due, or running with a passed
    /// claim lease).
    ///
    /// # Errors
    /// A storage failure while listing; per-item storage failures are logged and skipped.
    pub async fn run_once(&self, now: Timestamp) -> StoreResult<RunReport> {
        let ids = self.store.item_due(now, self.batch).await?;
        let mut report = RunReport {
            due: ids.len(),
            ..RunReport::default()
        };
        let outcomes: Vec<_> = futures::stream::iter(ids)
            .map(|id| self.execute_one(id, now))
            .buffer_unordered(self.concurrency)
            .collect()
            .await;
        for o in outcomes {
            match o {
                Ok(ExecOutcome::Skipped) => report.skipped += 1,
                Ok(ExecOutcome::Completed) => report.completed += 1,
                Ok(ExecOutcome::Retried) => report.retried += 1,
                Ok(ExecOutcome::Failed) => report.failed += 1,
                Ok(ExecOutcome::ClaimLost) => report.claim_lost += 1,
                Err(e) => tracing::warn!(error = %e, "priority item execution failed"),
            }
        }
        Ok(report)
    }

    /// Claims one item at `now` and, when the claim succeeds, executes it.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn execute_one(&self, id: i64, now: Timestamp) -> StoreResult<ExecOutcome> {
        let token = uuid::Uuid::now_v7().to_string();
        let Some(claim) = self.store.item_claim(id, &token, now, CLAIM_LEASE).await? else {
            return Ok(ExecOutcome::Skipped);
        };
        match self.execute_claimed(claim).await {
            Err(StoreError::ClaimLost) => Ok(ExecOutcome::ClaimLost),
            other => other,
        }
    }

    async fn fail(
        &self,
        claim: &ClaimedItem,
        reason: &str,
        result: &str,
    ) -> StoreResult<ExecOutcome> {
        let f = Finish::Failed {
            reason: reason.into(),
            result: result.into(),
            after_call: false,
        };
        self.store
            .item_finish(claim, &f, &[], self.clock.now())
            .await?;
        Ok(ExecOutcome::Failed)
    }

    /// Executes an item this executor holds (the claim token fences every write).
    ///
    /// # Errors
    /// [`StoreError::ClaimLost`] when the claim stopped holding; storage failures.
    pub async fn execute_claimed(&self, claim: ClaimedItem) -> StoreResult<ExecOutcome> {
        if claim.attempts >= claim.max_attempts {
            // A takeover after a crash during the last attempt: the attempts are used up.
            return self
                .fail(&claim, "maximum attempts reached", "attempts_exhausted")
                .await;
        }
        let stop_locked = match self.store.card_polling_scope(&claim.iccid).await? {
            CardScope::Missing => {
                return self
                    .fail(&claim, "card no longer exists", "card_missing")
                    .await;
            }
            CardScope::CardPollingOff => {
                return self
                    .fail(
                        &claim,
                        "card polling is switched off",
                        "out_of_polling_scope",
                    )
                    .await;
            }
            CardScope::DevicePollingOff => {
                return self
                    .fail(
                        &claim,
                        "bound device polling is switched off",
                        "out_of_polling_scope",
                    )
                    .await;
            }
            CardScope::InScope { stop_locked } => stop_locked,
        };
        let Some(task_type) = self.task_types.get(&claim.task_type).cloned() else {
            return self
                .fail(
                    &claim,
                    "task type is not configured any more",
                    "task_type_unknown",
                )
                .await;
        };
        let claim = self
            .store
            .item_begin_attempt(&claim, self.clock.now())
            .await?;
        let req = PollRequest {
            iccid: claim.iccid.clone(),
            task_type: claim.task_type.clone(),
        };
        let started = Instant::now();
        let answer = tokio::time::timeout(UPSTREAM_TIMEOUT, self.upstream.poll(&req))
            .await
            .unwrap_or(Err(UpstreamError::Timeout));
        let latency_ms = started.elapsed().as_millis() as i64;
        let request_summary = format!("poll {} iccid={}", req.task_type, req.iccid);
        let mut logs = vec![NewLog {
            operation: "poll".into(),
            request_summary,
            response_summary: match &answer {
                Ok(r) => r.summary.chars().take(200).collect(),
                Err(e) => e.to_string(),
            },
            latency_ms,
            outcome: match &answer {
                Ok(_) => "ok".into(),
                Err(e) => e.label().into(),
            },
        }];
        let now = self.clock.now();
        let finish = match answer {
            Ok(resp) => {
                let mut result = "ok".to_owned();
                if resp.suspended && claim.task_type == CARD_STATUS {
                    if stop_locked {
                        // The existing lock-refusal semantics: never resume a locked card.
                        result =
                            "ok; resume refused: carrier channel threshold stop lock held".into();
                    } else {
                        let t0 = Instant::now();
                        let r = tokio::time::timeout(
                            UPSTREAM_TIMEOUT,
                            self.upstream.resume(&claim.iccid),
                        )
                        .await
                        .unwrap_or(Err(UpstreamError::Timeout));
                        logs.push(NewLog {
                            operation: "resume".into(),
                            request_summary: format!("resume iccid={}", claim.iccid),
                            response_summary: match &r {
                                Ok(()) => "resumed".into(),
                                Err(e) => e.to_string(),
                            },
                            latency_ms: t0.elapsed().as_millis() as i64,
                            outcome: r
                                .as_ref()
                                .map_or_else(|e| e.label().into(), |_| "ok".into()),
                        });
                        result = match r {
                            Ok(()) => "ok; card resumed".into(),
                            Err(e) => format!("ok; resume failed: {e}"),
                        };
                    }
                }
                Finish::Completed { result }
            }
            Err(e) if !e.is_retryable() => Finish::Failed {
                reason: e.to_string(),
                result: e.label().into(),
                after_call: true,
            },
            Err(e) if claim.attempts >= claim.max_attempts => Finish::Failed {
                reason: format!("maximum attempts reached; last error: {e}"),
                result: "attempts_exhausted".into(),
                after_call: true,
            },
            Err(e) => Finish::Retry {
                reason: e.to_string(),
                next_run_at: now.plus(task_type.interval),
            },
        };
        let status = self.store.item_finish(&claim, &finish, &logs, now).await?;
        Ok(match status {
            crate::priority::ItemStatus::Completed => ExecOutcome::Completed,
            crate::priority::ItemStatus::Pending => ExecOutcome::Retried,
            _ => ExecOutcome::Failed,
        })
    }
}
