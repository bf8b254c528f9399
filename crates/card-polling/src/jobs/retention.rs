//! The retention job: keeps the tables that are not facts bounded, and never
//! deletes a priority fact unless the operator asked it to.
//!
//! - Interaction logs older than [`Retention::logs`] go (an item keeps naming its last log,
//!   `last_log_id`); done ordinary manual triggers requested before [`Retention::manual_triggers`].
//! - Priority facts — ended items with their source rows, their audit facts and trigger events —
//!   are kept for good by default: the spec requires them persisted and queryable and never
//!   deleted automatically ("MUST NOT 自动删除事实"). Only [`Retention::history`] set
//!   (`RAKUTEN_POLL_RETENTION_HISTORY_DAYS`, a departure from the spec the operator opts into)
//!   deletes the audit facts and trigger events of items that ended longer ago, then those items
//!   (unless a later retrigger still points at one, D-retrigger-predecessor-kept) (D-retention-keeps-facts).
//!
//! Rows of an active item are never deleted. Each batch is its own short write transaction of at
//! most [`Retention::batch`] rows (items), with [`Retention::pause`] between batches, so enqueues,
//! claims and outcomes wait for one batch at most.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use rakuten_types::{Clock, Timestamp};

use crate::store::{PruneTable, RetentionStore, StoreResult};
use crate::telemetry::PollMetrics;

/// What to keep and how to delete (`RAKUTEN_POLL_RETENTION_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// How long interaction logs are kept (default 7 days).
    pub logs: Duration,
    /// `None` (the default): ended items, their audit facts and trigger events are kept for good.
    /// `Some`: deleted this long after the item ended — a departure from the spec, set by the
    /// operator.
    pub history: Option<Duration>,
    /// How long done ordinary manual triggers are kept after their request (default 90 days).
    pub manual_triggers: Duration,
    /// Rows deleted per transaction (default 1,000).
    pub batch: i64,
    /// Pause between two batches (default 100 ms; zero in tests).
    pub pause: Duration,
    /// Pause between two runs (default 1 h).
    pub every: Duration,
}

/// Rows deleted by one run, per table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// `integration_logs`.
    pub interaction_logs: u64,
    /// `priority_item_events`.
    pub audit_facts: u64,
    /// `priority_trigger_events`.
    pub trigger_events: u64,
    /// `manual_triggers`.
    pub manual_triggers: u64,
    /// `priority_items` (each with its `priority_item_sources` rows, not counted).
    pub priority_items: u64,
}

impl PruneReport {
    /// Every row deleted.
    pub fn total(&self) -> u64 {
        self.interaction_logs
            + self.audit_facts
            + self.trigger_events
            + self.manual_triggers
            + self.priority_items
    }

    fn slot(&mut self, table: PruneTable) -> &mut u64 {
        match table {
            PruneTable::InteractionLogs => &mut self.interaction_logs,
            PruneTable::AuditFacts => &mut self.audit_facts,
            PruneTable::TriggerEvents => &mut self.trigger_events,
            PruneTable::ManualTriggers => &mut self.manual_triggers,
            PruneTable::Items => &mut self.priority_items,
        }
    }
}

/// The retention job.
#[derive(Clone)]
pub struct RetentionJob {
    store: Arc<dyn RetentionStore>,
    clock: Arc<dyn Clock>,
    metrics: Arc<PollMetrics>,
    retention: Retention,
}

impl std::fmt::Debug for RetentionJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetentionJob")
            .field("retention", &self.retention)
            .finish()
    }
}

impl RetentionJob {
    /// A job keeping `retention`, counting deleted rows in `metrics`
    /// (`cardpoll_pruned_rows_total{table}`).
    pub fn new(
        store: Arc<dyn RetentionStore>,
        clock: Arc<dyn Clock>,
        metrics: Arc<PollMetrics>,
        retention: Retention,
    ) -> Self {
        RetentionJob {
            store,
            clock,
            metrics,
            retention,
        }
    }

    /// Deletes everything past retention at `now`, batch by batch, table by table.
    ///
    /// # Errors
    /// Storage failures (rows deleted by earlier batches stay deleted).
    pub async fn run_once(&self, now: Timestamp) -> StoreResult<PruneReport> {
        self.run_once_observed(now, |_, _, _| {}).await
    }

    /// [`Self::run_once`], calling `on_batch(table, rows deleted, wall time of the batch's write
    /// transaction)` after each batch: the retention benchmark (`benches/retention.rs`) reads from
    /// it the longest time one batch held the writer.
    ///
    /// # Errors
    /// As [`Self::run_once`].
    pub async fn run_once_observed(
        &self,
        now: Timestamp,
        mut on_batch: impl FnMut(PruneTable, u64, Duration) + Send,
    ) -> StoreResult<PruneReport> {
        let mut report = PruneReport::default();
        let r = &self.retention;
        // Facts only when the operator set a history retention; items after their facts and
        // trigger events: an item is deleted only once nothing names it, so its history must be
        // gone first.
        let facts = r.history.map(|history| {
            [
                (PruneTable::AuditFacts, history),
                (PruneTable::TriggerEvents, history),
                (PruneTable::Items, history),
            ]
        });
        let stages = std::iter::once((PruneTable::InteractionLogs, r.logs))
            .chain(facts.into_iter().flatten())
            .chain(std::iter::once((
                PruneTable::ManualTriggers,
                r.manual_triggers,
            )));
        for (table, keep) in stages {
            let cutoff = now.minus(keep);
            loop {
                // Wall time, not the injected clock: this is how long the writer was held.
                let started = std::time::Instant::now();
                let n = self.store.retention_prune(table, cutoff, r.batch).await?;
                on_batch(table, n, started.elapsed());
                *report.slot(table) += n;
                self.metrics.pruned(table.as_str(), n);
                if n < r.batch as u64 {
                    break;
                }
                if !r.pause.is_zero() {
                    tokio::time::sleep(r.pause).await;
                }
            }
        }
        Ok(report)
    }

    /// Runs until `shutdown`, once per [`Retention::every`].
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                out = self.run_once(self.clock.now()) => match out {
                    Ok(r) if r.total() == 0 => {}
                    Ok(r) => tracing::info!(
                        interaction_logs = r.interaction_logs,
                        audit_facts = r.audit_facts,
                        trigger_events = r.trigger_events,
                        manual_triggers = r.manual_triggers,
                        priority_items = r.priority_items,
                        "retention: old rows deleted"
                    ),
                    Err(e) => tracing::warn!(error = %e, "retention job failed"),
                },
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(self.retention.every) => {}
            }
        }
    }
}
