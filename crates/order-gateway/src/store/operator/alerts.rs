//! Alert records: what a sync needs and did, the alert list's filter, the `task_stale` alerts
//! that wait for their evidence query, and the causes with their operator-facing words.

use std::time::Duration;

use rakuten_types::alert::{AlertKind, AlertView};
use rakuten_types::{OrderState, QueryId, SITE_RAKUTEN, TaskId, Timestamp};

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
    /// Worker rows silent this long are deleted first, unless they hold a lease
    /// (D-worker-retention).
    pub worker_retention: Duration,
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
