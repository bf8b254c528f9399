//! Alerts as records, their delivery to a person, and audited operator actions.
//!
//! An alert is raised once per `(kind, subject)` while its cause lasts and cleared when the cause
//! is gone; each raise and each clear is one [`AlertNotice`] POSTed to every configured webhook
//! from a durable outbox (at least once, deduplicated by `event_id`).
//!
//! ```text
//! alert:     (cause appears) ──> open ──Clear──> cleared          (a new cause → a new alert)
//! delivery:  pending ──Delivered──> delivered
//!               └──Failed──> pending (next attempt later, exponential backoff with jitter)
//! ```
//!
//! [`AlertState::transition`] and [`DeliveryState::transition`] are the only places that decide
//! what may follow what; the store repeats the guards in SQL.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{OrderState, Outcome, QueryId, TaskId, TaskStatus, Timestamp};

/// What an alert is about. The subject is a task id, a worker id, a site or a webhook host.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    /// A worker has not polled for `RAKUTEN_WORKER_OFFLINE_ALERT_SECONDS` (§4.7). Subject: worker.
    WorkerOffline,
    /// A task queued longer than `RAKUTEN_QUEUED_ALERT_SECONDS` (§4.7). Subject: task.
    TaskQueuedTooLong,
    /// A task's lease lapsed (§5). Subject: task.
    TaskStale,
    /// A task ended `needs_human` (amount guard 5004, 3-D Secure 5005, unverifiable recovery, …).
    /// Subject: task.
    TaskNeedsHuman,
    /// The site session is logged out: the latest order report or account-query result of the
    /// site carried 5001. Subject: site.
    AccountLoggedOut,
    /// Alert deliveries to a webhook keep failing. Subject: the webhook's host.
    WebhookFailing,
    /// A gateway instance's clock stepped (a lease stamped while the clock ran ahead was clamped,
    /// or the wall clock moved differently from the monotonic one between two sweeps). An event,
    /// not a state: cleared once no new jump was seen for `CLOCK_JUMP_QUIET` (10 min, D-clock-alerts).
    /// Subject: the instance id.
    ClockJump,
    /// A gateway instance's clock is off from the shared database's by more than
    /// `RAKUTEN_CLOCK_SKEW_ALERT_SECONDS`; it does not sweep leases meanwhile. Cleared when its
    /// offset is back within tolerance (or it stopped reporting). Subject: the instance id.
    ClockSkew,
    /// A queued task's `not_after` passed before any worker leased it; the sweeper ended it
    /// `expired` (nothing was ordered). An event, not a state: cleared `TASK_EXPIRED_SHOWN`
    /// (10 min) after the expiry (D-task-not-after-expired). Subject: task.
    TaskExpired,
    /// A task ended with a verdict (`succeeded` or `failed`) and its latest reported order state
    /// says the other: a late `paid` after an operator resolved `failed`, a `cancelled` after
    /// `succeeded` (D-late-report-contradiction-alert). The upstream reads both side by side and
    /// may order again. Cleared when the latest state fits the outcome again (a later report, or
    /// an operator's new verdict). Subject: task.
    TaskStateContradictsOutcome,
}

impl AlertKind {
    /// Every kind.
    pub const ALL: [AlertKind; 10] = [
        AlertKind::WorkerOffline,
        AlertKind::TaskQueuedTooLong,
        AlertKind::TaskStale,
        AlertKind::TaskNeedsHuman,
        AlertKind::AccountLoggedOut,
        AlertKind::WebhookFailing,
        AlertKind::ClockJump,
        AlertKind::ClockSkew,
        AlertKind::TaskExpired,
        AlertKind::TaskStateContradictsOutcome,
    ];

    /// The wire and storage name.
    pub const fn as_str(self) -> &'static str {
        match self {
            AlertKind::WorkerOffline => "worker_offline",
            AlertKind::TaskQueuedTooLong => "task_queued_too_long",
            AlertKind::TaskStale => "task_stale",
            AlertKind::TaskNeedsHuman => "task_needs_human",
            AlertKind::AccountLoggedOut => "account_logged_out",
            AlertKind::WebhookFailing => "webhook_failing",
            AlertKind::ClockJump => "clock_jump",
            AlertKind::ClockSkew => "clock_skew",
            AlertKind::TaskExpired => "task_expired",
            AlertKind::TaskStateContradictsOutcome => "task_state_contradicts_outcome",
        }
    }

    /// Whether the subject is a task id.
    pub const fn is_about_a_task(self) -> bool {
        matches!(
            self,
            AlertKind::TaskQueuedTooLong
                | AlertKind::TaskStale
                | AlertKind::TaskNeedsHuman
                | AlertKind::TaskExpired
                | AlertKind::TaskStateContradictsOutcome
        )
    }
}

impl fmt::Display for AlertKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name outside a vocabulary of this module.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {name:?}")]
pub struct UnknownName {
    /// Which vocabulary.
    pub what: &'static str,
    /// The name refused (at most 64 characters).
    pub name: String,
}

impl FromStr for AlertKind {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownName {
                what: "alert kind",
                name: s.chars().take(64).collect(),
            })
    }
}

/// Whether an alert's cause is still there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AlertState {
    /// The cause is there. At most one open alert per `(kind, subject)` (a partial unique index).
    Open,
    /// The cause went away; final. A new cause raises a new alert.
    Cleared,
}

/// The one event an open alert takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertEvent {
    /// The cause is gone.
    Clear,
}

/// A transition a state machine of this module does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{machine} in state {from} cannot take event {event}")]
pub struct InvalidAlertTransition {
    /// `alert` or `delivery`.
    pub machine: &'static str,
    /// The state it was in.
    pub from: &'static str,
    /// The event refused.
    pub event: &'static str,
}

impl AlertState {
    /// The single transition function of an alert.
    ///
    /// # Errors
    /// [`InvalidAlertTransition`] when the alert is already cleared.
    pub fn transition(self, event: AlertEvent) -> Result<AlertState, InvalidAlertTransition> {
        match (self, event) {
            (AlertState::Open, AlertEvent::Clear) => Ok(AlertState::Cleared),
            (AlertState::Cleared, AlertEvent::Clear) => Err(InvalidAlertTransition {
                machine: "alert",
                from: self.as_str(),
                event: "clear",
            }),
        }
    }

    /// The storage name.
    pub const fn as_str(self) -> &'static str {
        match self {
            AlertState::Open => "open",
            AlertState::Cleared => "cleared",
        }
    }

    /// The webhook event this state is announced with: `raised` or `cleared`.
    pub const fn notice(self) -> &'static str {
        match self {
            AlertState::Open => "raised",
            AlertState::Cleared => "cleared",
        }
    }
}

impl FromStr for AlertState {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "open" => Ok(AlertState::Open),
            "cleared" => Ok(AlertState::Cleared),
            _ => Err(UnknownName {
                what: "alert state",
                name: s.chars().take(64).collect(),
            }),
        }
    }
}

/// One outbox row: one alert event to one webhook URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryState {
    /// Not yet acknowledged with a 2xx; due at its `next_attempt_at`.
    Pending,
    /// The receiver answered 2xx; final.
    Delivered,
}

/// What one delivery attempt did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryEvent {
    /// 2xx.
    Delivered,
    /// Refused connection, timeout, non-2xx: try again later.
    Failed,
}

impl DeliveryState {
    /// The single transition function of a delivery.
    ///
    /// # Errors
    /// [`InvalidAlertTransition`] for any event on a delivered row.
    pub fn transition(self, event: DeliveryEvent) -> Result<DeliveryState, InvalidAlertTransition> {
        match (self, event) {
            (DeliveryState::Pending, DeliveryEvent::Delivered) => Ok(DeliveryState::Delivered),
            (DeliveryState::Pending, DeliveryEvent::Failed) => Ok(DeliveryState::Pending),
            (DeliveryState::Delivered, e) => Err(InvalidAlertTransition {
                machine: "delivery",
                from: "delivered",
                event: match e {
                    DeliveryEvent::Delivered => "delivered",
                    DeliveryEvent::Failed => "failed",
                },
            }),
        }
    }

    /// The storage name.
    pub const fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
        }
    }
}

/// An alert record, as `GET /api/alerts` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AlertView {
    /// The alert's id (UUIDv7).
    pub alert_id: String,
    /// What it is about.
    pub kind: AlertKind,
    /// The task, worker, site or webhook host concerned.
    pub subject: String,
    /// `open` or `cleared`.
    pub state: AlertState,
    /// Human-readable, one line.
    pub summary: String,
    /// The task, for task alerts.
    pub task_id: Option<TaskId>,
    /// The worker, for `worker_offline`.
    pub worker_id: Option<String>,
    /// The `order_list` account query the gateway submitted as evidence (`task_stale`).
    pub query_id: Option<QueryId>,
    /// When raised.
    pub raised_at: Timestamp,
    /// When cleared.
    pub cleared_at: Option<Timestamp>,
}

/// The JSON body POSTed to each `RAKUTEN_ALERT_WEBHOOK_URLS` receiver for each raise and clear.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AlertNotice {
    /// Stable id of this event (the same on every retry and every receiver): deduplicate on it.
    pub event_id: String,
    /// The event's place in the order events happened, assigned by the database when the event
    /// is written (also the `X-Rakuten-Event-Sequence` header): strictly increasing across the
    /// events of one alert, and never given to two events. A receiver keeps the highest
    /// `sequence` seen per `alert_id` and drops an event at or below it (D-webhook-event-sequence).
    /// Events stored before sequences existed read as 0 here and are sent with the one the
    /// database gave them.
    #[serde(default)]
    pub sequence: i64,
    /// The alert.
    pub alert_id: String,
    /// Its kind.
    pub kind: AlertKind,
    /// `raised` or `cleared`.
    pub state: String,
    /// The task, worker, site or webhook host concerned.
    pub subject: String,
    /// Human-readable, one line.
    pub summary: String,
    /// The task, for task alerts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<TaskId>,
    /// The worker, for `worker_offline`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    /// When the alert was raised or cleared.
    pub occurred_at: Timestamp,
}

impl AlertNotice {
    /// The Slack-compatible rendering (`RAKUTEN_ALERT_WEBHOOK_FORMAT=slack`): one line of text.
    /// The subject and the summary carry client text (task and worker ids, a worker's report
    /// detail), so the whole line is escaped as Slack documents ([`slack_escape`]): no mention,
    /// link or channel alert in it is ever live. The line itself uses no Slack markup.
    pub fn slack_text(&self) -> String {
        let mark = if self.state == "raised" {
            "ALERT"
        } else {
            "CLEARED"
        };
        slack_escape(&format!(
            "[{mark}] {kind} {subject}: {summary} (alert {alert}, {at})",
            kind = self.kind,
            subject = self.subject,
            summary = self.summary,
            alert = self.alert_id,
            at = self.occurred_at
        ))
    }
}

/// Escapes text for a Slack message the way Slack documents it: `&` → `&amp;`, `<` → `&lt;`,
/// `>` → `&gt;` (every control sequence — `<!channel>`, `<@U…>`, `<url|label>` — starts with
/// `<`, so none survives).
pub fn slack_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// What an operator did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OperatorActionKind {
    /// `POST /api/orders/{id}/resolve`.
    Resolve,
    /// `POST /api/orders/{id}/cancel`.
    Cancel,
    /// `POST /api/orders/{id}/reclaim`.
    Reclaim,
    /// `DELETE /api/workers/{worker_id}`.
    RetireWorker,
}

impl OperatorActionKind {
    /// The storage name.
    pub const fn as_str(self) -> &'static str {
        match self {
            OperatorActionKind::Resolve => "resolve",
            OperatorActionKind::Cancel => "cancel",
            OperatorActionKind::Reclaim => "reclaim",
            OperatorActionKind::RetireWorker => "retire_worker",
        }
    }
}

impl FromStr for OperatorActionKind {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            OperatorActionKind::Resolve,
            OperatorActionKind::Cancel,
            OperatorActionKind::Reclaim,
            OperatorActionKind::RetireWorker,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
        .ok_or_else(|| UnknownName {
            what: "operator action",
            name: s.chars().take(64).collect(),
        })
    }
}

/// One audited operator action (`operator_actions`): who, what, when, why, before → after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct OperatorActionView {
    /// The action's id (UUIDv7).
    pub action_id: String,
    /// What was done.
    pub action: OperatorActionKind,
    /// Who did it: the token's name.
    pub actor: String,
    /// Why (required on every action).
    pub reason: String,
    /// The task, for task actions.
    pub task_id: Option<TaskId>,
    /// The worker, for a retire or a reclaim.
    pub worker_id: Option<String>,
    /// Task status before (task actions).
    pub from_status: Option<TaskStatus>,
    /// Task status after (task actions).
    pub to_status: Option<TaskStatus>,
    /// Action-specific facts: the site order id and order state a resolving person saw.
    #[schema(value_type = Object)]
    pub detail: serde_json::Value,
    /// When.
    pub at: Timestamp,
}

/// `site_order_id` of a resolve.
fn resolve_site_order_id() -> utoipa::openapi::schema::Object {
    crate::schema::nonempty_line_or_null(128)
}

/// `POST /api/orders/{id}/resolve` body.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolveTask {
    /// `succeeded` or `failed` (what the person found on the site); must not contradict
    /// `state` (`Outcome::check_fits_state`).
    pub outcome: Outcome,
    /// Why (required, 1–1000 characters of readable text: `crate::text::reason`).
    #[schema(schema_with = crate::schema::reason)]
    pub reason: String,
    /// The site's order number the person saw, if any: 1 to 128 characters on one line.
    #[serde(default)]
    #[schema(schema_with = resolve_site_order_id)]
    pub site_order_id: Option<String>,
    /// The order state the person saw; recorded in `history` as an operator report.
    #[serde(default)]
    pub state: Option<OrderState>,
}

/// `POST /api/orders/{id}/cancel` body.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelTask {
    /// Why (required, 1–1000 characters of readable text: `crate::text::reason`).
    #[schema(schema_with = crate::schema::reason)]
    pub reason: String,
}

/// Answer of resolve and cancel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct OperatorActionAck {
    /// The task.
    pub task_id: TaskId,
    /// Its status now.
    pub status: TaskStatus,
    /// The audit row written.
    pub action: OperatorActionView,
}

/// A worker, as `GET /api/workers` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct WorkerView {
    /// Worker id.
    pub worker_id: String,
    /// Its last lease poll or valid renew/report.
    pub last_seen_at: Timestamp,
    /// Seconds since then.
    pub last_seen_seconds: f64,
    /// Over `RAKUTEN_WORKER_OFFLINE_ALERT_SECONDS`.
    pub offline: bool,
    /// Retired by an operator; it comes back by polling again.
    pub retired: bool,
    /// The task it holds (leased/running), if any.
    pub active_task: Option<TaskId>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_alert_clears_once() {
        assert_eq!(
            AlertState::Open.transition(AlertEvent::Clear),
            Ok(AlertState::Cleared)
        );
        assert!(AlertState::Cleared.transition(AlertEvent::Clear).is_err());
    }

    #[test]
    fn a_delivered_event_takes_no_further_attempt() {
        assert_eq!(
            DeliveryState::Pending.transition(DeliveryEvent::Failed),
            Ok(DeliveryState::Pending)
        );
        assert_eq!(
            DeliveryState::Pending.transition(DeliveryEvent::Delivered),
            Ok(DeliveryState::Delivered)
        );
        assert!(
            DeliveryState::Delivered
                .transition(DeliveryEvent::Failed)
                .is_err()
        );
    }

    #[test]
    fn slack_text_leaves_no_mention_live() {
        let n = AlertNotice {
            event_id: "a:raised".into(),
            sequence: 7,
            alert_id: "a".into(),
            kind: AlertKind::TaskStale,
            state: "raised".into(),
            subject: "po-37 <!channel> & <@U0ADMIN>".into(),
            summary: "detail <https://x.example|click> &amp;".into(),
            task_id: None,
            worker_id: None,
            occurred_at: crate::Timestamp::EPOCH,
        };
        let t = n.slack_text();
        assert!(!t.contains('<') && !t.contains('>'), "{t}");
        assert!(
            t.contains("po-37 &lt;!channel&gt; &amp; &lt;@U0ADMIN&gt;: detail &lt;https://x.example|click&gt; &amp;amp;"),
            "{t}"
        );
    }

    #[test]
    fn kinds_round_trip() {
        for k in AlertKind::ALL {
            assert_eq!(k.as_str().parse::<AlertKind>(), Ok(k));
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
    }
}
