//! Alerts (§4.7, issue #10). Two views of one set of causes:
//! - [`health_at`]: a worker silent longer than `RAKUTEN_WORKER_OFFLINE_ALERT_SECONDS`, a task
//!   queued longer than `RAKUTEN_QUEUED_ALERT_SECONDS`, every stale task, computed from a
//!   [`HealthSnapshot`] and the injected clock for `/health`;
//! - [`AlertJob`]: alert records (`GET /api/alerts`), the kinds above plus `task_needs_human`,
//!   `account_logged_out` and `webhook_failing`, raised once, cleared when the cause is gone,
//!   each event queued for the webhooks ([`super::webhooks`]).

use std::sync::Arc;
use std::time::Duration;

use rakuten_types::order::{ActiveTask, Alert, Health, WorkerHealth};
use rakuten_types::{Clock, QueryId, Timestamp};
use tokio_util::sync::CancellationToken;

use crate::lease::notify::LeaseNotifier;
use crate::store::operator::{AlertSyncOutcome, AlertSyncRequest};
use crate::store::queries::NewQuery;
use crate::store::{HealthSnapshot, OperatorStore, OrderStore, QueryStore, StoreError};

/// Alert kinds.
pub const WORKER_OFFLINE: &str = "worker_offline";
/// Alert kinds.
pub const TASK_QUEUED_TOO_LONG: &str = "task_queued_too_long";
/// Alert kinds.
pub const TASK_STALE: &str = "task_stale";

/// Alert thresholds.
#[derive(Debug, Clone, Copy)]
pub struct AlertThresholds {
    /// Worker silence that raises `worker_offline`.
    pub worker_offline: Duration,
    /// Queue time that raises `task_queued_too_long`.
    pub queued: Duration,
}

/// Reads what `/health` needs and computes it at `now`.
///
/// # Errors
/// [`StoreError`] from the read.
pub async fn health_at(
    store: &dyn OrderStore,
    thresholds: AlertThresholds,
    now: Timestamp,
) -> Result<Health, StoreError> {
    let snap = store.health_snapshot(now.minus(thresholds.queued)).await?;
    Ok(compute(&snap, thresholds, now))
}

/// The `/health` body for a snapshot at `now`.
pub fn compute(snap: &HealthSnapshot, th: AlertThresholds, now: Timestamp) -> Health {
    let mut alerts = Vec::new();
    let workers = snap
        .workers
        .iter()
        .map(|w| {
            let secs = now.seconds_since(w.last_seen_at);
            let offline = secs > th.worker_offline.as_secs_f64();
            if offline {
                alerts.push(Alert {
                    kind: WORKER_OFFLINE.into(),
                    subject: w.worker_id.clone(),
                    message: format!("worker {} has not polled for {secs:.0} s", w.worker_id),
                });
            }
            WorkerHealth {
                worker_id: w.worker_id.clone(),
                last_seen_at: w.last_seen_at,
                last_seen_seconds: secs,
                offline,
            }
        })
        .collect();
    for t in &snap.queued_too_long {
        alerts.push(Alert {
            kind: TASK_QUEUED_TOO_LONG.into(),
            subject: t.task_id.to_string(),
            message: format!(
                "task {} queued for {:.0} s without a lease",
                t.task_id,
                now.seconds_since(t.created_at)
            ),
        });
    }
    for t in &snap.stale {
        alerts.push(Alert {
            kind: TASK_STALE.into(),
            subject: t.task_id.to_string(),
            message: format!(
                "task {} lease expired (owner {}, {} grants); verify and reclaim (§5)",
                t.task_id,
                t.lease_owner.as_deref().unwrap_or("-"),
                t.lease_count
            ),
        });
    }
    Health {
        status: if alerts.is_empty() { "ok" } else { "degraded" }.into(),
        queued: snap.queued,
        stale: snap.stale_count,
        active: snap
            .active
            .iter()
            .map(|t| ActiveTask {
                task_id: t.task_id.clone(),
                status: t.status,
                lease_owner: t.lease_owner.clone(),
                lease_expires_at: t.lease_expires_at,
            })
            .collect(),
        workers,
        alerts,
    }
}

/// What the alert job needs besides the stores.
#[derive(Debug, Clone)]
pub struct AlertJobSettings {
    /// Period of [`AlertJob::run`].
    pub interval: Duration,
    /// Thresholds of the time-based alerts.
    pub thresholds: AlertThresholds,
    /// Failed attempts of a delivery that raise `webhook_failing`.
    pub webhook_failing_after: u32,
    /// Webhook receivers.
    pub webhook_urls: Vec<String>,
    /// The evidence query of a stale task starts this long before the task was created.
    pub evidence_margin: Duration,
    /// Most leases of the evidence query.
    pub query_max_attempts: i64,
}

/// What one run did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AlertRun {
    /// Raised and cleared alerts.
    pub sync: AlertSyncOutcome,
    /// Evidence queries submitted for stale tasks.
    pub evidence: Vec<QueryId>,
}

/// Pages of an evidence `order_list` query.
const EVIDENCE_MAX_PAGES: u32 = 3;

/// The id of the evidence query of an alert: derived from the alert, so a retry after a crash or
/// a second instance submits the same query (idempotent on `query_id`), never a second one.
pub fn evidence_query_id(alert_id: &str) -> QueryId {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(alert_id.as_bytes());
    let hex: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
    // A 24-hex-digit name: valid as an id whatever the alert id looks like.
    QueryId::parse(&format!("evidence-{hex}")).unwrap_or_else(|_| unreachable!("fixed shape"))
}

/// The alert service (issue #10): turns causes into alert records (raise once, clear when the
/// cause is gone, each event into the webhook outbox, all in one transaction), logs each raise
/// and clear, and for every new `task_stale` alert submits an `order_list` account query over
/// the task's window so the site's real order list is there when a person looks.
#[derive(Debug, Clone)]
pub struct AlertJob {
    ops: Arc<dyn OperatorStore>,
    orders: Arc<dyn OrderStore>,
    queries: Arc<dyn QueryStore>,
    query_notifier: LeaseNotifier,
    clock: Arc<dyn Clock>,
    settings: AlertJobSettings,
}

impl AlertJob {
    /// An alert job over the stores.
    pub fn new(
        ops: Arc<dyn OperatorStore>,
        orders: Arc<dyn OrderStore>,
        queries: Arc<dyn QueryStore>,
        query_notifier: LeaseNotifier,
        clock: Arc<dyn Clock>,
        settings: AlertJobSettings,
    ) -> Self {
        AlertJob {
            ops,
            orders,
            queries,
            query_notifier,
            clock,
            settings,
        }
    }

    /// One run at `now`: sync the alert records, then gather the missing evidence.
    ///
    /// # Errors
    /// [`StoreError`] from a store (what committed before stays committed).
    pub async fn run_once(&self, now: Timestamp) -> Result<AlertRun, StoreError> {
        let sync = self
            .ops
            .alert_sync(
                AlertSyncRequest {
                    worker_offline: self.settings.thresholds.worker_offline,
                    queued: self.settings.thresholds.queued,
                    webhook_failing_after: i64::from(self.settings.webhook_failing_after),
                    webhook_urls: self.settings.webhook_urls.clone(),
                },
                now,
            )
            .await?;
        for a in &sync.raised {
            tracing::warn!(alert = %a.kind, subject = %a.subject, alert_id = %a.alert_id, message = %a.summary, "alert raised");
        }
        for a in &sync.cleared {
            tracing::info!(alert = %a.kind, subject = %a.subject, alert_id = %a.alert_id, "alert cleared");
        }
        let mut evidence = Vec::new();
        for s in self.ops.alert_stale_without_evidence().await? {
            let query_id = evidence_query_id(&s.alert_id);
            let since = s.created_at.minus(self.settings.evidence_margin);
            let params = serde_json::json!({ "since": since, "max_pages": EVIDENCE_MAX_PAGES });
            let (kind, params_json) = crate::query_queue::validate_submit("order_list", &params)
                .map_err(|e| StoreError::Corrupt(format!("evidence query: {e:?}")))?;
            let ack = self
                .queries
                .query_insert(
                    NewQuery {
                        query_id: query_id.clone(),
                        site: s.site.clone(),
                        kind,
                        params_json,
                        max_attempts: self.settings.query_max_attempts,
                    },
                    now,
                )
                .await?;
            self.ops.alert_set_evidence(&s.alert_id, &query_id).await?;
            if ack.created {
                self.query_notifier.notify_leasable();
            }
            tracing::info!(task_id = %s.task_id, query_id = %query_id, since = %since, "stale task: order list requested as evidence");
            evidence.push(query_id);
        }
        Ok(AlertRun { sync, evidence })
    }

    /// Runs every interval until `shutdown`, on the elected instance only when several share
    /// one database.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(self.settings.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => {
                    match self.orders.alerts_leader().await {
                        Ok(true) => {
                            if let Err(e) = self.run_once(self.clock.now()).await {
                                tracing::error!(error = ?e, "alert run failed");
                            }
                        }
                        Ok(false) => {}
                        Err(e) => tracing::warn!(error = ?e, "alert leader election failed"),
                    }
                }
            }
        }
    }
}
