//! Alerts (§4.7): a worker silent longer than `RAKUTEN_WORKER_OFFLINE_ALERT_SECONDS`, a task
//! queued longer than `RAKUTEN_QUEUED_ALERT_SECONDS`, and every stale task. Computed from a
//! [`HealthSnapshot`] and the injected clock; shown by `/health` and logged as structured warnings
//! when they appear.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use rakuten_types::Timestamp;
use rakuten_types::order::{ActiveTask, Alert, Health, WorkerHealth};

use crate::store::{HealthSnapshot, OrderStore, StoreError};

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

/// Logs each alert once when it appears and once when it clears.
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
            tracing::warn!(alert = %a.kind, subject = %a.subject, message = %a.message, "alert raised");
        }
        for (kind, subject) in raised.difference(&now) {
            tracing::info!(alert = %kind, subject = %subject, "alert cleared");
        }
        *raised = now;
        new
    }
}
