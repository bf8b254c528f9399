//! Storage of the operator's loop: alert records and their webhook outbox, audited
//! operator actions (resolve, cancel, retire; reclaim records its action through the order
//! store), and the worker list. The trait is [`OperatorStore`]; its one implementation, SQL
//! written once for both engines, is `store/sql/operator.rs`.
//!
//! Contract:
//! - at most one open alert per `(kind, subject)`: the partial unique index `one_open_alert`;
//!   [`OperatorStore::alert_sync`] raises, clears and enqueues the webhook events of one tick in ONE
//!   transaction, so a raise is never committed without its outbox rows (a gateway killed with -9
//!   after the commit delivers after restart);
//! - resolve and cancel are conditional updates (`WHERE status = …`) decided by
//!   `TaskStatus::transition`; any other status is a typed 6003 conflict; each writes its
//!   `operator_actions` row in the same transaction;
//! - `now` is the caller's.

use std::time::Duration;

use async_trait::async_trait;
use rakuten_types::alert::{
    AlertKind, AlertNotice, AlertState, AlertView, DeliveryEvent, OperatorActionAck,
    OperatorActionView,
};
use rakuten_types::order::Page;
use rakuten_types::{OrderState, Outcome, QueryId, SITE_RAKUTEN, TaskId, Timestamp, WorkerId};

use super::StoreError;

/// The fingerprint of a lease token that the lease history keeps instead of the token: the first
/// 8 hex digits of its SHA-256 (the same form as card-polling's claim fingerprint). Enough to tell
/// grants apart on a page; useless to act with.
pub fn token_fingerprint(token: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(token.as_bytes())[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// How a lease grant came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantVia {
    /// A worker's poll: a claim of a queued task or a re-grant of its own.
    Poll,
    /// An operator's reclaim of a stale task to a named worker.
    Reclaim,
}

impl GrantVia {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            GrantVia::Poll => "poll",
            GrantVia::Reclaim => "reclaim",
        }
    }

    /// The stored name back; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        [GrantVia::Poll, GrantVia::Reclaim]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

/// How a lease grant ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantEnd {
    /// The holder's final report (an outcome) ended the task.
    Reported,
    /// The lease lapsed and the sweeper made the task `stale`.
    Expired,
    /// The same worker polled again while holding it: a new grant replaced this one.
    Regranted,
    /// An operator resolved the task while this grant was open.
    Resolved,
    // No `Cancelled`: an operator may cancel only a queued task (D-resolve-and-cancel), and a queued task
    // never holds a grant — every grant leaves `queued` and nothing returns to it (spec §3, §5).
    // D-lease-grant-history.
}

impl GrantEnd {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            GrantEnd::Reported => "reported",
            GrantEnd::Expired => "expired",
            GrantEnd::Regranted => "regranted",
            GrantEnd::Resolved => "resolved",
        }
    }

    /// The stored name back; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        [
            GrantEnd::Reported,
            GrantEnd::Expired,
            GrantEnd::Regranted,
            GrantEnd::Resolved,
        ]
        .into_iter()
        .find(|v| v.as_str() == s)
    }
}

/// One grant of a task's lease, as the lease history keeps it (table `lease_grants`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseGrantRecord {
    /// The task's `lease_count` right after this grant.
    pub grant_no: i64,
    /// The worker it was granted to.
    pub worker_id: String,
    /// A poll or an operator's reclaim.
    pub via: GrantVia,
    /// [`token_fingerprint`] of the grant's lease token.
    pub token_fp: String,
    /// When it was granted.
    pub granted_at: Timestamp,
    /// When it expires (or expired): moved by each renewal and by clamping.
    pub expires_at: Timestamp,
    /// How often it was renewed.
    pub renewals: i64,
    /// The last renewal, if any.
    pub last_renewed_at: Option<Timestamp>,
    /// When it ended; `None` while open.
    pub ended_at: Option<Timestamp>,
    /// How it ended; `None` while open.
    pub ended_how: Option<GrantEnd>,
}

/// What [`OperatorStore::alert_sync`] needs besides the database.
#[derive(Debug, Clone)]
pub struct AlertSyncRequest {
    /// Worker silence that raises `worker_offline`.
    pub worker_offline: Duration,
    /// Queue time that raises `task_queued_too_long`.
    pub queued: Duration,
    /// Failed attempts of a pending delivery that raise `webhook_failing` for its host.
    pub webhook_failing_after: i64,
    /// Receivers: each new event gets one outbox row per URL.
    pub webhook_urls: Vec<String>,
}

/// What one sync did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AlertSyncOutcome {
    /// Alerts raised by this sync.
    pub raised: Vec<AlertView>,
    /// Alerts cleared by this sync.
    pub cleared: Vec<AlertView>,
}

/// Filter and page of `GET /api/alerts`.
#[derive(Debug, Clone)]
pub struct AlertFilter {
    /// Only open alerts (`state=open`, the default) or every alert (`state=all`).
    pub open_only: bool,
    /// Only this kind.
    pub kind: Option<AlertKind>,
    /// Page size (already clamped to 1..=200).
    pub limit: i64,
    /// Offset (≥ 0).
    pub offset: i64,
}

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

/// An operator's resolve of a `stale` or `needs_human` task.
#[derive(Debug, Clone)]
pub struct ResolveRequest {
    /// The task.
    pub task_id: TaskId,
    /// `succeeded` or `failed`.
    pub outcome: Outcome,
    /// Why.
    pub reason: String,
    /// Who (the token's name).
    pub actor: String,
    /// The site order number the person saw.
    pub site_order_id: Option<String>,
    /// The order state the person saw; recorded in `history` marked with the operator.
    pub state: Option<OrderState>,
}

/// An operator's cancel of a queued task.
#[derive(Debug, Clone)]
pub struct CancelRequest {
    /// The task.
    pub task_id: TaskId,
    /// Why.
    pub reason: String,
    /// Who.
    pub actor: String,
}

/// An operator's retirement of a worker.
#[derive(Debug, Clone)]
pub struct RetireRequest {
    /// The worker.
    pub worker_id: WorkerId,
    /// Why.
    pub reason: String,
    /// Who.
    pub actor: String,
}

/// A worker row.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerRow {
    /// The worker.
    pub worker_id: String,
    /// Its last poll (or valid renew/report).
    pub last_seen_at: Timestamp,
    /// When an operator retired it (cleared by its next poll).
    pub retired_at: Option<Timestamp>,
    /// The task it holds, if any.
    pub active_task: Option<TaskId>,
}

/// A `task_stale` alert still without its evidence query.
#[derive(Debug, Clone, PartialEq)]
pub struct StaleEvidence {
    /// The alert.
    pub alert_id: String,
    /// The stale task.
    pub task_id: TaskId,
    /// Its site.
    pub site: String,
    /// When it was created (the evidence window starts a margin before).
    pub created_at: Timestamp,
    /// The order-list query an earlier stale alert of the same task asked for, still queued or
    /// leased: its window is this one (it starts at the task's creation), so the new alert links
    /// it instead of asking the site again (one query per lapse would pile up).
    pub pending_query: Option<QueryId>,
}

/// The operator's-loop store.
#[async_trait]
pub trait OperatorStore: Send + Sync + std::fmt::Debug + 'static {
    /// Computes every alert cause at `now`, raises the new ones, clears those whose cause is gone,
    /// and enqueues one outbox row per event and receiver; one transaction.
    async fn alert_sync(
        &self,
        req: AlertSyncRequest,
        now: Timestamp,
    ) -> Result<AlertSyncOutcome, StoreError>;

    /// A page of alerts, newest first.
    async fn alert_list(&self, filter: AlertFilter) -> Result<Page<AlertView>, StoreError>;

    /// The console's alert list: one keyset page in `(raised_at, insertion order)`
    /// order, oldest first within the page, of the open alerts (`open_only`) or every alert, of
    /// `kind` when set, with a total capped at [`super::COUNT_CAP`] + 1. An index seek plus at
    /// most `limit + 1` rows at any depth (migration 0009).
    async fn alert_seek(
        &self,
        open_only: bool,
        kind: Option<AlertKind>,
        seek: super::Seek,
        limit: i64,
    ) -> Result<super::SeekPage<AlertView>, StoreError>;

    /// Open `task_stale` alerts whose evidence query is not yet submitted (at most 100).
    async fn alert_stale_without_evidence(&self) -> Result<Vec<StaleEvidence>, StoreError>;

    /// Links an alert to the account query submitted as its evidence.
    async fn alert_set_evidence(
        &self,
        alert_id: &str,
        query_id: &QueryId,
    ) -> Result<(), StoreError>;

    /// The receivers with a pending delivery due at `now` (at most `limit`): each is delivered to
    /// as a queue of its own (D-webhook-per-receiver-queues).
    async fn outbox_receivers_due(
        &self,
        now: Timestamp,
        limit: i64,
    ) -> Result<Vec<String>, StoreError>;

    /// One receiver's pending deliveries due at `now`, in `sequence` order (at most `limit`),
    /// without those whose alert has an earlier event still pending to that receiver: the events
    /// of one alert reach a receiver in the order they happened (D-webhook-per-alert-order).
    async fn outbox_due(
        &self,
        url: &str,
        now: Timestamp,
        limit: i64,
    ) -> Result<Vec<OutboxItem>, StoreError>;

    /// Records one delivery attempt (a guarded update of a pending row).
    async fn outbox_record(
        &self,
        attempt: DeliveryAttempt,
        now: Timestamp,
    ) -> Result<(), StoreError>;

    /// `stale|needs_human → succeeded|failed`, audited; 6003 from any other status.
    async fn task_resolve(
        &self,
        req: ResolveRequest,
        now: Timestamp,
    ) -> Result<OperatorActionAck, StoreError>;

    /// `queued → failed`, audited; 6003 from any other status (a lease that won the race).
    async fn task_cancel(
        &self,
        req: CancelRequest,
        now: Timestamp,
    ) -> Result<OperatorActionAck, StoreError>;

    /// The operator actions on a task, oldest first.
    async fn task_operator_actions(
        &self,
        task_id: &TaskId,
    ) -> Result<Vec<OperatorActionView>, StoreError>;

    /// The newest `limit` lease grants of a task, newest first (the console's lease history,
    /// D-lease-grant-history). Empty for a task leased only before migration 0006.
    async fn task_lease_grants(
        &self,
        task_id: &TaskId,
        limit: i64,
    ) -> Result<Vec<LeaseGrantRecord>, StoreError>;

    /// The evidence queries submitted for a task, oldest first.
    async fn task_evidence_queries(&self, task_id: &TaskId) -> Result<Vec<QueryId>, StoreError>;

    /// Every known worker (retired ones included), by id.
    async fn worker_list(&self) -> Result<Vec<WorkerRow>, StoreError>;

    /// Hides a worker from `/health` and `worker_offline` until it polls again, audited.
    async fn worker_retire(
        &self,
        req: RetireRequest,
        now: Timestamp,
    ) -> Result<OperatorActionView, StoreError>;
}

/// One alert cause found at `now`.
#[derive(Debug, Clone)]
pub(crate) struct Cause {
    pub kind: AlertKind,
    pub subject: String,
    pub summary: String,
    pub task_id: Option<String>,
    pub worker_id: Option<String>,
}

/// The site whose session the `account_logged_out` alert watches.
pub(crate) const WATCHED_SITE: &str = SITE_RAKUTEN;

/// The logged-out error code (§8): a 5001 from either channel raises `account_logged_out`.
pub(crate) const LOGGED_OUT: i32 = 5001;

/// The host a webhook alert names (never the URL: its path or query may hold a secret).
pub(crate) fn webhook_host(url: &str) -> String {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_else(|| "invalid-url".to_owned())
}

/// Why a `needs_human` task stopped: set aside as a poison row (its `set_aside_reason`), or the
/// last error code it reported.
pub(crate) fn needs_human_summary(
    task_id: &str,
    code: Option<i32>,
    detail: Option<&str>,
    set_aside: Option<&str>,
) -> String {
    if let Some(reason) = set_aside {
        // A poison row: no worker ever saw it; the row itself needs repair.
        let reason: String = reason.chars().take(200).collect();
        return format!("task {task_id} needs a human: set aside, never handed out ({reason})");
    }
    let why = match code {
        Some(5004) => "amount guard (5004): the payable amount is over the limit".to_owned(),
        Some(5005) => "3-D Secure / challenge (5005): the site asks for a person".to_owned(),
        Some(5001) => "logged out (5001)".to_owned(),
        Some(c) => format!("error {c}"),
        None => "a person must look".to_owned(),
    };
    let detail: String = detail.unwrap_or("").chars().take(200).collect();
    if detail.is_empty() {
        format!("task {task_id} needs a human: {why}")
    } else {
        format!("task {task_id} needs a human: {why} ({detail})")
    }
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

/// How long a `task_expired` alert stays open after the expiry: it is an event, not a state (the
/// task is over), so it clears by itself (D-task-not-after-expired).
pub const TASK_EXPIRED_SHOWN: Duration = Duration::from_secs(600);

/// What a stale task's latest report says about its order, and what to check first: the words an
/// operator reads first (the `task_stale` alert, the console's Needs attention and the task
/// page's banner) start from what the worker last told us (D-stale-words-follow-the-latest-report).
/// `site_order_id` is the latest order number any report carried.
pub fn stale_advice(latest: Option<OrderState>, site_order_id: Option<&str>) -> String {
    let order = site_order_id
        .map(|n| format!(", site order {n}"))
        .unwrap_or_default();
    match latest {
        Some(OrderState::Cancelled) => format!(
            "The worker reported the order cancelled (latest report cancelled{order}): confirm it \
             on the site, then resolve failed."
        ),
        Some(s) if s.is_submitted() => match site_order_id {
            Some(_) => format!(
                "The worker reported the order placed (latest report {s}{order}): the order \
                 exists. Check its payment and monitoring on the site, then resolve with the \
                 state you see; do not reclaim (a new grant could order again)."
            ),
            None => format!(
                "The worker reported the order placed (latest report {s}, no site order number): \
                 the order exists. Find it in the site's order list, check its payment, then \
                 resolve with the state you see; do not reclaim."
            ),
        },
        Some(s) => format!(
            "The worker reported nothing past the cart (latest report {s}): check the site's \
             order list for whether a submit happened, then resolve if there is an order or \
             reclaim if there is none."
        ),
        None => "The worker reported nothing: check the site's order list for whether a submit \
                 happened, then resolve if there is an order or reclaim if there is none."
            .to_owned(),
    }
}
