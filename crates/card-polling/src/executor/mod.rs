//! The one executor: one (card, task type) poll against the carrier, for a priority item
//! ([`Executor::execute_one`]) or an ordinary/manual-trigger poll ([`Executor::execute_ordinary`]).
//! Both run the same content ([`Executor::poll_content`]): the upstream poll; for `card_status`
//! the resume decision (refused under the stop lock); for `package` the package verdict that
//! enqueues `no_valid_package`. [`pool`] runs it with a concurrency cap per task type.
//!
//! Order inside [`Executor::execute_one`]:
//! 1. claim (conditional update; `None` means another executor holds it: skip this round) — not
//!    at all while this instance's clock is off from the shared database's ([`clock_guard`]);
//! 2. a takeover that finds the attempts already used up fails the item without a call;
//! 3. the scope check (card gone → failed, no retry; card or bound device polling off → failed);
//! 4. count the attempt, call the carrier (bounded by [`UPSTREAM_TIMEOUT`]);
//! 5. for a suspended card, the normal resume decision — refused while the stop lock is held;
//! 6. finish with the claim token: completed, back to pending after the task type's interval,
//!    or failed at the limit / on a business failure.
//!
//! The scheduler ([`crate::scheduler`]) feeds [`pool::ExecutorPool`]; [`Executor::run_once`]
//! (claim and run every due item at once) remains for tests and tools.

pub mod clock_guard;
pub mod pool;

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use serde::Serialize;

use rakuten_types::{Clock, Timestamp};

use self::clock_guard::ClockGuard;
use crate::domain::TaskTypes;
use crate::hints::Hints;
use crate::priority::{CLAIM_LEASE, UPSTREAM_TIMEOUT};
use crate::store::{
    CardScope, ClaimedItem, Finish, NewLog, PollRecord, Store, StoreError, StoreResult,
};
use crate::telemetry::PollMetrics;
use crate::upstream::{PollRequest, Upstream, UpstreamError};

/// The task type whose normal content includes the stop/resume decision.
pub const CARD_STATUS: &str = "card_status";
/// The task type whose normal content includes the package verdict (`no_valid_package`).
pub const PACKAGE: &str = "package";

/// What one run of the poll content produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollContent {
    /// The result text on success, the carrier error otherwise.
    pub answer: Result<String, UpstreamError>,
    /// Interaction log rows of the calls made.
    pub logs: Vec<NewLog>,
}

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
    hints: Hints,
    metrics: Arc<PollMetrics>,
    clock_guard: Arc<ClockGuard>,
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
    /// An executor; [`Executor::run_once`] takes at most `batch` due items, `concurrency` at a
    /// time. `hints` receives the items the package verdict enqueues.
    pub fn new(
        store: Arc<dyn Store>,
        upstream: Arc<dyn Upstream>,
        clock: Arc<dyn Clock>,
        task_types: TaskTypes,
        batch: i64,
        concurrency: usize,
        hints: Hints,
    ) -> Self {
        let metrics = Arc::new(PollMetrics::new());
        let clock_guard = Arc::new(ClockGuard::new(
            store.clone(),
            clock.clone(),
            metrics.clone(),
            None,
        ));
        Executor {
            store,
            upstream,
            clock,
            task_types,
            batch: batch.max(1),
            concurrency: concurrency.max(1),
            hints,
            metrics,
            clock_guard,
        }
    }

    /// The same executor, making no claims while its clock differs from the shared database's
    /// by more than `max_skew` (`None`: no check; [`clock_guard`]).
    pub fn with_clock_max_skew(mut self, max_skew: Option<std::time::Duration>) -> Self {
        self.clock_guard = Arc::new(ClockGuard::new(
            self.store.clone(),
            self.clock.clone(),
            self.metrics.clone(),
            max_skew,
        ));
        self
    }

    /// The clock guard (its last check is shown in `/health`).
    pub fn clock_guard(&self) -> &Arc<ClockGuard> {
        &self.clock_guard
    }

    /// This service's metrics (`/metrics`).
    pub fn metrics(&self) -> &Arc<PollMetrics> {
        &self.metrics
    }

    /// The configured task types.
    pub fn task_types(&self) -> &TaskTypes {
        &self.task_types
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The normal polling content of one (card, task type): the carrier poll (bounded by
    /// [`UPSTREAM_TIMEOUT`]); for a suspended card on `card_status`, the resume decision —
    /// refused while the stop lock is held; for `package`, the package verdict (which enqueues
    /// `no_valid_package` and pushes its hints after commit). `item_id` only labels the call;
    /// `attempt` (1-based; 1 for ordinary polls) is sent to the carrier.
    pub async fn poll_content(
        &self,
        iccid: &str,
        task_type: &str,
        stop_locked: bool,
        item_id: Option<i64>,
        attempt: u32,
    ) -> PollContent {
        let content = self
            .poll_content_uncounted(iccid, task_type, stop_locked, item_id, attempt)
            .await;
        for l in &content.logs {
            self.metrics.carrier_call(&l.operation, &l.outcome);
        }
        content
    }

    async fn poll_content_uncounted(
        &self,
        iccid: &str,
        task_type: &str,
        stop_locked: bool,
        item_id: Option<i64>,
        attempt: u32,
    ) -> PollContent {
        let req = PollRequest {
            iccid: iccid.to_owned(),
            task_type: task_type.to_owned(),
            attempt: attempt.max(1),
            item_id,
        };
        let started = Instant::now();
        let answer = tokio::time::timeout(UPSTREAM_TIMEOUT, self.upstream.poll(&req))
            .await
            .unwrap_or(Err(UpstreamError::Timeout));
        let latency_ms = started.elapsed().as_millis() as i64;
        // Summaries only: never the carrier URL, a credential or the raw answer.
        let request_summary = format!(
            "poll {} iccid={} attempt={}",
            req.task_type, req.iccid, req.attempt
        );
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
        let resp = match answer {
            Ok(r) => r,
            Err(e) => {
                return PollContent {
                    answer: Err(e),
                    logs,
                };
            }
        };
        let mut result = "ok".to_owned();
        if resp.suspended && task_type == CARD_STATUS {
            // The scope passed in may be a moment old (an ordinary poll's was read when its
            // batch was taken): a resume is decided on the lock as it is now.
            let now_scope = if stop_locked {
                Ok(CardScope::InScope { stop_locked })
            } else {
                self.store.card_polling_scope(iccid).await
            };
            if let Ok(CardScope::InScope { stop_locked: true }) = now_scope {
                // The existing lock-refusal semantics: never resume a locked card.
                result = "ok; resume refused: carrier channel threshold stop lock held".into();
            } else if !matches!(now_scope, Ok(CardScope::InScope { .. })) {
                // Gone, out of scope, or unreadable now: no resume on doubt.
                result =
                    "ok; resume skipped: the card's polling scope changed or is unreadable".into();
            } else {
                let t0 = Instant::now();
                let r = tokio::time::timeout(UPSTREAM_TIMEOUT, self.upstream.resume(iccid))
                    .await
                    .unwrap_or(Err(UpstreamError::Timeout));
                logs.push(NewLog {
                    operation: "resume".into(),
                    request_summary: format!("resume iccid={iccid}"),
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
        if task_type == PACKAGE {
            result = self.package_verdict(iccid, result).await;
        }
        PollContent {
            answer: Ok(result),
            logs,
        }
    }

    async fn package_verdict(&self, iccid: &str, result: String) -> String {
        let now = self.clock.now();
        let state = match self.store.card_package_state(iccid, now).await {
            Ok(Some(s)) => s,
            Ok(None) => return result,
            Err(e) => {
                tracing::warn!(error = %e, "package verdict: asset lookup failed");
                return result;
            }
        };
        // Most polls find nothing to change: answered from the read, no write (D-package-poll-verdict).
        if !state.needs_write() {
            return if state.valid_main {
                result
            } else {
                format!("{result}; no valid package")
            };
        }
        let names = self.task_types.names();
        match self
            .store
            .package_poll_asset(&state.asset, &names, now)
            .await
        {
            Ok(out) => {
                self.hints.push_items(&out.items).await;
                if out.no_valid_package && out.pending_usage {
                    format!("{result}; no valid package, priority enqueued")
                } else if out.no_valid_package {
                    format!("{result}; no valid package")
                } else {
                    result
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "package verdict failed");
                result
            }
        }
    }

    /// One ordinary poll (or ordinary manual trigger) of a card for a task type at `now`: the
    /// scope check (no call for a card gone or out of polling scope), then the same content as a
    /// priority execution. Returns the record to write in the next batch.
    ///
    /// `scope` is the card's scope as the scheduler's take read it (an ordinary poll, D-ordinary-scope-read-by-take);
    /// `None` (a manual trigger) reads it here.
    pub async fn execute_ordinary(
        &self,
        iccid: &str,
        task_type: &str,
        manual_trigger_id: Option<i64>,
        scope: Option<CardScope>,
        now: Timestamp,
    ) -> StoreResult<PollRecord> {
        let interval = self
            .task_types
            .get(task_type)
            .map(|t| t.interval)
            .unwrap_or(std::time::Duration::from_secs(3600));
        let mut record = PollRecord {
            iccid: iccid.to_owned(),
            task_type: task_type.to_owned(),
            manual_trigger_id,
            result: String::new(),
            logs: vec![],
            at: now,
            next_poll_at: now.plus(interval),
        };
        if self.task_types.get(task_type).is_none() {
            record.result = "task_type_unknown".into();
            return Ok(record);
        }
        let scope = match scope {
            Some(s) => s,
            None => self.store.card_polling_scope(iccid).await?,
        };
        let stop_locked = match scope {
            CardScope::Missing => {
                record.result = "card_missing".into();
                return Ok(record);
            }
            CardScope::CardPollingOff | CardScope::DevicePollingOff => {
                record.result = "out_of_polling_scope".into();
                return Ok(record);
            }
            CardScope::InScope { stop_locked } => stop_locked,
        };
        let content = self
            .poll_content(iccid, task_type, stop_locked, None, 1)
            .await;
        record.result = match &content.answer {
            Ok(r) => r.clone(),
            Err(e) => e.label().into(),
        };
        record.logs = content.logs;
        Ok(record)
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
        if !self.clock_guard.may_claim().await {
            return Ok(ExecOutcome::Skipped);
        }
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
        let content = self
            .poll_content(
                &claim.iccid,
                &claim.task_type,
                stop_locked,
                Some(claim.id),
                u32::try_from(claim.attempts).unwrap_or(1),
            )
            .await;
        let logs = content.logs;
        let now = self.clock.now();
        let finish = match content.answer {
            Ok(result) => Finish::Completed { result },
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
