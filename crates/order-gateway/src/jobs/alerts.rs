//! Alerts (§4.7). Two views of one set of causes:
//! - [`health_at`]: a worker silent longer than `RAKUTEN_WORKER_OFFLINE_ALERT_SECONDS`, a task
//!   queued longer than `RAKUTEN_QUEUED_ALERT_SECONDS`, every stale task, an instance whose clock
//!   is skewed or jumped in the last 10 min (`clock_signals`), computed from a
//!   [`HealthSnapshot`] and the injected clock for `/health` (which adds the open records of the
//!   event-raised kinds below, D-gateway-health-content);
//! - [`AlertJob`]: alert records (`GET /api/alerts`), the kinds above plus `task_needs_human`,
//!   `account_logged_out`, `webhook_failing`, `clock_skew` and `clock_jump`, raised once, cleared when the cause is gone,
//!   each event queued for the webhooks ([`super::webhooks`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rakuten_types::order::{ActiveTask, Alert, Health, WorkerHealth};
use rakuten_types::{Clock, QueryId, Timestamp};
use tokio_util::sync::CancellationToken;

use crate::lease::notify::LeaseNotifier;
use crate::store::operator::{AlertFilter, AlertSyncOutcome, AlertSyncRequest};
use crate::store::queries::NewQuery;
use crate::store::{
    CLOCK_JUMP_QUIET, HealthSnapshot, OperatorStore, OrderStore, QueryStore, StoreError,
    clock_signal_fresh,
};
use crate::telemetry::GatewayMetrics;
use rakuten_types::alert::AlertKind;

/// Alert kinds.
pub const WORKER_OFFLINE: &str = "worker_offline";
/// Alert kinds.
pub const TASK_QUEUED_TOO_LONG: &str = "task_queued_too_long";
/// Alert kinds.
pub const TASK_STALE: &str = "task_stale";
/// Alert kinds.
pub const CLOCK_SKEW: &str = "clock_skew";
/// Alert kinds.
pub const CLOCK_JUMP: &str = "clock_jump";

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
        .collect::<Vec<_>>();
    let offline_listed = workers.iter().filter(|w| w.offline).count() as i64;
    let unlisted_workers = snap.workers_total - snap.workers.len() as i64;
    if unlisted_workers > 0 && offline_listed == snap.workers.len() as i64 {
        // Every listed worker is offline, so some unlisted ones may be too.
        alerts.push(more(
            WORKER_OFFLINE,
            format!(
                "{unlisted_workers} more workers are not listed; the {offline_listed} longest \
                 silent are all offline"
            ),
        ));
    }
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
    let unlisted_queued = snap.queued_too_long_count - snap.queued_too_long.len() as i64;
    if unlisted_queued > 0 {
        alerts.push(more(
            TASK_QUEUED_TOO_LONG,
            format!("{unlisted_queued} more tasks queued too long are not listed"),
        ));
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
    let unlisted_stale = snap.stale_count - snap.stale.len() as i64;
    if unlisted_stale > 0 {
        alerts.push(more(
            TASK_STALE,
            format!("{unlisted_stale} more stale tasks are not listed"),
        ));
    }
    // Each instance's clock, the fresh signals only; the same causes as the
    // `clock_skew` / `clock_jump` alert records.
    let clocks: Vec<_> = snap
        .clocks
        .iter()
        .filter(|c| clock_signal_fresh(c, now))
        .cloned()
        .collect();
    for c in &clocks {
        if c.skewed {
            alerts.push(Alert {
                kind: CLOCK_SKEW.into(),
                subject: c.instance_id.clone(),
                message: format!(
                    "instance {}'s clock is off from the database's by {} ms; it does not sweep \
                     leases",
                    c.instance_id,
                    c.offset_ms.unwrap_or_default()
                ),
            });
        }
    }
    for c in &snap.clocks {
        if let (Some(at), Some(detail)) = (c.last_jump_at, &c.last_jump_detail)
            && at >= now.minus(CLOCK_JUMP_QUIET)
        {
            alerts.push(Alert {
                kind: CLOCK_JUMP.into(),
                subject: c.instance_id.clone(),
                message: format!(
                    "instance {}'s clock jumped at {at}: {detail}",
                    c.instance_id
                ),
            });
        }
    }
    Health {
        clocks,
        status: if alerts.is_empty() { "ok" } else { "degraded" }.into(),
        writes_failing: false,
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
        workers_total: snap.workers_total,
        alerts,
    }
}

/// The alert standing for the ones of `kind` past a list's bound (subject `more`).
fn more(kind: &str, message: String) -> Alert {
    Alert {
        kind: kind.into(),
        subject: MORE.into(),
        message,
    }
}

/// Subject of the alert that counts the alerts of its kind not listed.
pub const MORE: &str = "more";

/// Logs each health alert (`/health`'s list) once when it appears and once when it clears, at
/// debug level: the alert job's records (`alert raised` / `alert cleared` with an `alert_id`) are
/// the warnings a log-based pager reads, exactly once per alert across restarts. This log starts
/// empty in every process, so at warn level each start repeated every open alert as newly raised
/// (D-alert-thresholds-and-logging).
#[derive(Debug, Default)]
pub struct AlertLog {
    raised: Mutex<HashSet<(String, String)>>,
}

impl AlertLog {
    /// Compares with the previous call and logs the difference; returns the newly raised alerts.
    pub fn update(&self, alerts: &[Alert]) -> Vec<Alert> {
        let now: HashSet<(String, String)> = alerts
            .iter()
            .map(|a| (a.kind.clone(), a.subject.clone()))
            .collect();
        let mut raised = self.raised.lock().unwrap_or_else(|e| e.into_inner());
        let new: Vec<Alert> = alerts
            .iter()
            .filter(|a| !raised.contains(&(a.kind.clone(), a.subject.clone())))
            .cloned()
            .collect();
        for a in &new {
            tracing::debug!(alert = %a.kind, subject = %a.subject, message = %a.message, "health alert present");
        }
        for (kind, subject) in raised.difference(&now) {
            tracing::debug!(alert = %kind, subject = %subject, "health alert gone");
        }
        *raised = now;
        new
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
    /// Worker rows silent this long are deleted unless they hold a lease (D-worker-retention).
    pub worker_retention: Duration,
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

/// The alert service: turns causes into alert records (raise once, clear when the
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
    metrics: Arc<GatewayMetrics>,
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
        metrics: Arc<GatewayMetrics>,
    ) -> Self {
        AlertJob {
            ops,
            orders,
            queries,
            query_notifier,
            clock,
            settings,
            metrics,
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
                    worker_retention: self.settings.worker_retention,
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
        // `gateway_alerts_open{kind}`: one counted read per kind, the page itself is one row.
        for kind in AlertKind::ALL {
            let open = self
                .ops
                .alert_list(AlertFilter {
                    open_only: true,
                    kind: Some(kind),
                    limit: 1,
                    offset: 0,
                })
                .await?;
            self.metrics.set_open_alerts(kind, open.total);
        }
        let mut evidence = Vec::new();
        for s in self.ops.alert_stale_without_evidence().await? {
            if let Some(pending) = &s.pending_query {
                // The same window is already waiting for a worker: one site read serves both.
                self.ops.alert_set_evidence(&s.alert_id, pending).await?;
                tracing::info!(task_id = %s.task_id, query_id = %pending, "stale task again: the order list already requested is still waiting and serves this alert too");
                evidence.push(pending.clone());
                continue;
            }
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
        super::every_tick_as_leader(
            self.settings.interval,
            shutdown,
            self.orders.clone(),
            "alert records",
            || self.run_once(self.clock.now()),
        )
        .await;
    }
}
