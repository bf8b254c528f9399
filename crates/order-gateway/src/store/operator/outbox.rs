//! The webhook outbox's items: a pending delivery, the result of one attempt, and the notice
//! each alert event sends with its stable id.

use rakuten_types::Timestamp;
use rakuten_types::alert::{AlertNotice, AlertState, AlertView, DeliveryEvent};

/// A pending webhook delivery.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxItem {
    /// The event (the same for every receiver and every retry).
    pub event_id: String,
    /// The event's sequence (`alert_events.seq`, the wire's `sequence`).
    pub sequence: i64,
    /// The alert the event belongs to.
    pub alert_id: String,
    /// The receiver.
    pub url: String,
    /// The notice, JSON ([`rakuten_types::alert::AlertNotice`]).
    pub body_json: String,
    /// Failed attempts so far.
    pub attempts: i64,
}

/// The result of one delivery attempt.
#[derive(Debug, Clone)]
pub struct DeliveryAttempt {
    /// The event.
    pub event_id: String,
    /// The receiver.
    pub url: String,
    /// Delivered (2xx) or failed.
    pub event: DeliveryEvent,
    /// When a failed delivery is tried again.
    pub next_attempt_at: Timestamp,
    /// What went wrong (failed attempts), without secrets.
    pub error: Option<String>,
}

/// The host a webhook alert names (never the URL: its path or query may hold a secret).
pub(crate) fn webhook_host(url: &str) -> String {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_else(|| "invalid-url".to_owned())
}

/// The stable id of an alert's event: `{alert_id}:{raised|cleared}`.
pub(crate) fn event_id(alert: &AlertView, state: AlertState) -> String {
    format!("{}:{}", alert.alert_id, state.notice())
}

/// The notice of an alert in `state` at `at`, with its stable event id ([`event_id`]) and the
/// sequence the database gave the event.
pub(crate) fn notice(
    alert: &AlertView,
    state: AlertState,
    at: Timestamp,
    sequence: i64,
) -> AlertNotice {
    AlertNotice {
        event_id: event_id(alert, state),
        sequence,
        alert_id: alert.alert_id.clone(),
        kind: alert.kind,
        state: state.notice().to_owned(),
        subject: alert.subject.clone(),
        summary: alert.summary.clone(),
        task_id: alert.task_id.clone(),
        worker_id: alert.worker_id.clone(),
        occurred_at: at,
    }
}
