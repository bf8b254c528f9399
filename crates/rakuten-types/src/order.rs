//! Request and response bodies of the order task endpoints (spec §4.2–§4.6, §5). Field names are
//! the spec's; additions (`lease_token`, `outcome`, `error_code`) are optional for clients.

use serde::{Deserialize, Serialize};

use crate::intent::{IntentJson, IntentSummary};
use crate::{OrderState, Outcome, TaskId, TaskStatus, Timestamp, WorkerId};

/// Largest accepted `intent`, its JSON text as sent, in bytes: 64 KiB.
pub const MAX_INTENT_BYTES: usize = 64 * 1024;
/// Longest accepted free-text field of a report (`detail`, `site_order_id`, `evidence_ref`), in
/// characters.
pub const MAX_REPORT_TEXT_CHARS: usize = 4096;

/// `site_order_id` of a report: [`MAX_REPORT_TEXT_CHARS`] on one line.
fn report_line() -> utoipa::openapi::schema::Object {
    crate::schema::line_or_null(MAX_REPORT_TEXT_CHARS)
}

/// `detail` of a report: [`MAX_REPORT_TEXT_CHARS`], line breaks and tabs allowed.
fn report_text() -> utoipa::openapi::schema::Object {
    crate::schema::text_or_null(MAX_REPORT_TEXT_CHARS)
}

/// `POST /api/orders` body (§4.2).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitOrder {
    /// The upstream's idempotency key; generated (UUIDv7) when absent.
    #[serde(default)]
    pub task_id: Option<TaskId>,
    /// Must be `rakuten`.
    #[schema(schema_with = crate::schema::site)]
    pub site: String,
    /// Passed through untouched: its JSON text is stored and handed to the worker byte for byte
    /// (numbers, key order, spacing); must be a JSON object of at most 64 KiB that a worker can
    /// execute ([`crate::intent`]).
    #[schema(schema_with = crate::schema::intent)]
    pub intent: IntentJson,
    /// Optional deadline: the last instant a worker may lease the task (an RFC 3339 timestamp,
    /// e.g. `2026-07-27T09:15:00.000Z`; any offset is read, answers show it in UTC). It must lie
    /// in the future when the task is created (else 422). A task still queued after it is never
    /// leased, and the gateway ends it `expired` (nothing was ordered; a `task_expired` alert
    /// tells the operator). A task already leased is unaffected. Part of the request the
    /// `task_id` stands for: the same id with another deadline is a 409. Absent: no deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_after: Option<Timestamp>,
}

/// `POST /api/orders` answer (§4.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SubmitOrderAck {
    /// The task's id.
    pub task_id: TaskId,
    /// The task's status now (an existing task keeps its own).
    pub status: TaskStatus,
    /// `false` when the id already existed: nothing was created.
    pub created: bool,
}

/// A lease handed to a worker by `GET /api/orders/lease` or `POST /api/orders/{id}/reclaim` (§4.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LeaseGrant {
    /// The task.
    pub task_id: TaskId,
    /// Its site.
    pub site: String,
    /// The upstream intent, its JSON text exactly as submitted.
    #[schema(value_type = Object)]
    pub intent: IntentJson,
    /// When this lease lapses unless renewed.
    pub lease_expires_at: Timestamp,
    /// How many grants this task has had; `> 1` means the worker must verify on the site first (§5).
    pub lease_count: i64,
    /// The latest reported order state, `null` on a first grant.
    pub known_state: Option<OrderState>,
    /// Fencing token of this grant: renew and report may send it back; a token of an earlier grant
    /// is refused with 6002.
    pub lease_token: String,
}

/// `POST /api/orders/{id}/renew` body (required): the holder and its grant's token, in the body
/// only (a query string naming them is a 422, D-holder-fields-in-body).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenewLease {
    /// The holder (required).
    pub worker_id: WorkerId,
    /// The grant's fencing token (optional).
    #[serde(default)]
    #[schema(schema_with = crate::schema::lease_token_or_null)]
    pub lease_token: Option<String>,
}

/// `POST /api/orders/{id}/renew` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RenewAck {
    /// The task.
    pub task_id: TaskId,
    /// The new expiry.
    pub lease_expires_at: Timestamp,
}

/// `POST /api/orders/{id}/report` body (§4.5).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportState {
    /// The reporting worker (required; must hold the lease). In the body only
    /// (D-holder-fields-in-body).
    pub worker_id: WorkerId,
    /// The grant's fencing token (optional).
    #[serde(default)]
    #[schema(schema_with = crate::schema::lease_token_or_null)]
    pub lease_token: Option<String>,
    /// The order state reached.
    pub state: OrderState,
    /// Payable amount, yen (not negative).
    #[serde(default, deserialize_with = "crate::whole::option")]
    #[schema(minimum = 0)]
    pub payable_yen: Option<i64>,
    /// Payment deadline.
    #[serde(default)]
    pub pay_deadline: Option<Timestamp>,
    /// The site's order number (one line of at most 4,096 characters).
    #[serde(default)]
    #[schema(schema_with = report_line)]
    pub site_order_id: Option<String>,
    /// Local evidence path `{task_id}/{NN}-{step}`, without extension (§6.1): this task's id,
    /// NN two or more digits, step `[a-z0-9-]+`, at most 256 characters.
    #[serde(default)]
    #[schema(schema_with = crate::schema::evidence_ref_or_null)]
    pub evidence_ref: Option<String>,
    /// Free text (at most 4,096 characters; line breaks and tabs allowed).
    #[serde(default)]
    #[schema(schema_with = report_text)]
    pub detail: Option<String>,
    /// A site or guard error code (e.g. 5004 amount guard), when the report explains a stop.
    #[serde(default, deserialize_with = "crate::whole::option")]
    pub error_code: Option<i32>,
    /// `true` ends the task.
    #[serde(default)]
    pub terminal: bool,
    /// The explicit terminal outcome; when absent on a terminal report it is implied by `state`
    /// (paid/shipped/delivered → succeeded, cancelled → failed, else 422).
    #[serde(default)]
    pub outcome: Option<Outcome>,
}

/// `POST /api/orders/{id}/report` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReportAck {
    /// The task.
    pub task_id: TaskId,
    /// The task's status after the report.
    pub status: TaskStatus,
    /// The state recorded.
    pub state: OrderState,
    /// `true` when `(task_id, state)` had been reported before (the row was overwritten, §4.5).
    pub duplicate: bool,
}

/// `POST /api/orders/{id}/reclaim` body (§5, required): `worker_id` and `reason` in the body only
/// (a query string naming them is a 422, D-holder-fields-in-body).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReclaimTask {
    /// The worker the stale task is handed to (required).
    pub worker_id: WorkerId,
    /// Why (recorded in the task's `operator_actions`; `(no reason given)` when absent).
    #[serde(default)]
    #[schema(schema_with = crate::schema::reason_or_null)]
    pub reason: Option<String>,
}

/// One row of the state mirror (`task_reports`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReportView {
    /// The order state.
    pub state: OrderState,
    /// Payable amount, yen.
    pub payable_yen: Option<i64>,
    /// Payment deadline.
    pub pay_deadline: Option<Timestamp>,
    /// Site order number.
    pub site_order_id: Option<String>,
    /// Local evidence path.
    pub evidence_ref: Option<String>,
    /// Free text.
    pub detail: Option<String>,
    /// Error code carried by the report.
    pub error_code: Option<i32>,
    /// Worker that reported.
    pub worker_id: Option<String>,
    /// The operator (token name) who recorded this state by resolving the task; `null` for
    /// worker reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    /// When first reported.
    pub reported_at: Timestamp,
}

/// A task without its history, as listed by `GET /api/orders` (and `/health`, the console's
/// lists): the intent as an [`IntentSummary`], never the whole intent, so a page stays small
/// whatever the intents hold (D-list-pages-bounded). One summary is at most
/// [`MAX_TASK_SUMMARY_BYTES`] of JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TaskSummary {
    /// Id.
    pub task_id: TaskId,
    /// Site.
    pub site: String,
    /// The checked fields of the intent (`GET /api/orders/{task_id}` has the whole intent);
    /// `null` when the stored intent cannot be read.
    pub intent: Option<IntentSummary>,
    /// Size of the whole intent's JSON text, bytes.
    #[serde(default)]
    pub intent_bytes: i64,
    /// Status.
    pub status: TaskStatus,
    /// Current or last lease holder.
    pub lease_owner: Option<String>,
    /// Current lease expiry.
    pub lease_expires_at: Option<Timestamp>,
    /// Number of grants so far.
    pub lease_count: i64,
    /// Terminal outcome, once terminal.
    pub outcome: Option<Outcome>,
    /// Latest reported order state.
    pub latest_state: Option<OrderState>,
    /// Created.
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// The upstream's deadline for a lease (`not_after` at submit); absent when none was given.
    /// Still queued after it: the task ends `expired`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_after: Option<Timestamp>,
    /// Why the gateway set the task aside as `needs_human` without a grant (`undecodable row`:
    /// its stored row could not be read back). Absent for every other task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_aside_reason: Option<String>,
}

/// Most bytes of one [`TaskSummary`]'s JSON: `item_url` (2,048 characters of up to 4 bytes),
/// `variant_id` (256), the task id and holder (128 each), a set-aside reason (at most 300
/// characters) and the fixed fields.
pub const MAX_TASK_SUMMARY_BYTES: usize = 12 * 1024;

/// `GET /api/orders/{id}`: the task with its whole intent, its latest state and every report,
/// oldest first (§4.6). Its fields are [`TaskSummary`]'s, with `intent` the whole JSON text as
/// submitted instead of its summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TaskDetail {
    /// Id.
    pub task_id: TaskId,
    /// Site.
    pub site: String,
    /// The intent, its JSON text exactly as submitted (`null` when the stored row cannot be
    /// read: see `set_aside_reason`).
    #[schema(value_type = Object)]
    pub intent: IntentJson,
    /// Size of the intent's JSON text, bytes.
    #[serde(default)]
    pub intent_bytes: i64,
    /// Status.
    pub status: TaskStatus,
    /// Current or last lease holder.
    pub lease_owner: Option<String>,
    /// Current lease expiry.
    pub lease_expires_at: Option<Timestamp>,
    /// Number of grants so far.
    pub lease_count: i64,
    /// Terminal outcome, once terminal.
    pub outcome: Option<Outcome>,
    /// Latest reported order state.
    pub latest_state: Option<OrderState>,
    /// Created.
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// The upstream's deadline for a lease (`not_after` at submit); absent when none was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_after: Option<Timestamp>,
    /// Why the gateway set the task aside as `needs_human` without a grant (`undecodable row`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_aside_reason: Option<String>,
    /// Every report, oldest first. A report made by an operator's resolve has `worker_id`
    /// `null` and `operator` set to the actor.
    pub history: Vec<ReportView>,
    /// Every operator action on this task, oldest first.
    #[serde(default)]
    pub operator_actions: Vec<crate::alert::OperatorActionView>,
    /// The `order_list` account queries the gateway submitted when the task went stale: the
    /// site's real order list around the task's time.
    #[serde(default)]
    pub evidence_queries: Vec<crate::QueryId>,
}

impl TaskDetail {
    /// The task as a list shows it (the intent summarized).
    pub fn summary(&self) -> TaskSummary {
        TaskSummary {
            task_id: self.task_id.clone(),
            site: self.site.clone(),
            intent: crate::intent::OrderIntent::parse_json(&self.intent)
                .ok()
                .map(|i| i.summary()),
            intent_bytes: self.intent_bytes,
            status: self.status,
            lease_owner: self.lease_owner.clone(),
            lease_expires_at: self.lease_expires_at,
            lease_count: self.lease_count,
            outcome: self.outcome,
            latest_state: self.latest_state,
            created_at: self.created_at,
            updated_at: self.updated_at,
            not_after: self.not_after,
            set_aside_reason: self.set_aside_reason.clone(),
        }
    }
}

/// Most bytes of a list page's `items` (their JSON): a page ends before the item that would pass
/// it (but holds at least one item), and its `limit` then says how many it holds
/// (D-list-pages-bounded).
pub const MAX_PAGE_ITEMS_BYTES: usize = 1024 * 1024;

/// A page of a list endpoint: `{"items": [...], "total": N, "limit": L, "offset": O}`. The next
/// page starts at `offset + limit`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Page<T> {
    /// This page's items.
    pub items: Vec<T>,
    /// Items matching the filter, all pages.
    pub total: i64,
    /// Page size used: the request's (default 50, at most 200), or fewer when the items would
    /// pass 1 MiB of JSON ([`MAX_PAGE_ITEMS_BYTES`]); the next page starts at `offset + limit`.
    pub limit: i64,
    /// Offset used.
    pub offset: i64,
}

/// `GET /health` (§4.6, §4.7).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Health {
    /// `ok`, or `degraded` while any alert is raised or [`Self::writes_failing`].
    pub status: String,
    /// True while the database takes no writes (the SQLite writer's last batch failed: a full
    /// disk, an I/O error, a read-only file, a lock held past the timeout): no submit, lease or
    /// report can be recorded, `/readyz` answers 503 meanwhile.
    #[serde(default)]
    pub writes_failing: bool,
    /// Number of queued tasks.
    pub queued: i64,
    /// Number of stale tasks waiting for a reclaim.
    pub stale: i64,
    /// The leased/running tasks.
    pub active: Vec<ActiveTask>,
    /// Known workers, longest silent (so every offline one) first; at most 1,000 are listed,
    /// `workers_total` counts them all.
    pub workers: Vec<WorkerHealth>,
    /// Every known worker, listed or not.
    #[serde(default)]
    pub workers_total: i64,
    /// Raised alerts. Past a list's bound, one more alert of the same kind (subject `more`) says
    /// how many are not listed, so no alert is ever out of view.
    pub alerts: Vec<Alert>,
    /// Each gateway instance's clock as its sweeper last saw it: offset to the
    /// shared database's clock and whether it is over the tolerance; at most 100 instances,
    /// those that reported in the last 5 minutes.
    #[serde(default)]
    pub clocks: Vec<InstanceClock>,
}

/// One gateway instance's clock in `/health` (`clock_signals` row).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct InstanceClock {
    /// The instance (`<hostname>/<8 hex digits>`, fixed at start-up).
    pub instance_id: String,
    /// The database's clock minus this instance's, milliseconds; `null` on SQLite (one instance,
    /// one clock, nothing to compare).
    pub offset_ms: Option<i64>,
    /// `|offset_ms|` is over `RAKUTEN_CLOCK_SKEW_ALERT_SECONDS`: the instance does not sweep
    /// leases and `clock_skew` is raised.
    pub skewed: bool,
    /// The last clock jump the instance saw, on its own clock.
    pub last_jump_at: Option<Timestamp>,
    /// What that jump was (at most 500 characters).
    pub last_jump_detail: Option<String>,
    /// When the instance last reported, on its own clock (add `offset_ms` for the database's).
    pub updated_at: Timestamp,
}

/// An active task in `/health`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ActiveTask {
    /// Id.
    pub task_id: TaskId,
    /// Status (`leased` or `running`).
    pub status: TaskStatus,
    /// Holder.
    pub lease_owner: Option<String>,
    /// Expiry.
    pub lease_expires_at: Option<Timestamp>,
}

/// A worker in `/health`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct WorkerHealth {
    /// Worker id.
    pub worker_id: String,
    /// Last order lease request (the heartbeat, §4.3).
    pub last_seen_at: Timestamp,
    /// Seconds since then.
    pub last_seen_seconds: f64,
    /// Over `RAKUTEN_WORKER_OFFLINE_ALERT_SECONDS`.
    pub offline: bool,
}

/// A raised alert (§4.7).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Alert {
    /// `worker_offline`, `task_queued_too_long` or `task_stale`.
    pub kind: String,
    /// The worker or task concerned.
    pub subject: String,
    /// Human-readable.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intent::IntentSummary;

    /// The bound [`MAX_TASK_SUMMARY_BYTES`] states holds for the largest summary the checks let
    /// through: every text at its longest, in 4-byte characters.
    #[test]
    fn the_largest_task_summary_stays_under_its_stated_bound() {
        let wide = |n: usize| "\u{1D11E}".repeat(n);
        let ts = Timestamp::parse("2026-07-27T09:15:00.000Z").unwrap();
        let s = TaskSummary {
            task_id: TaskId::parse(&wide(128)).unwrap(),
            site: "rakuten".into(),
            intent: Some(IntentSummary {
                item_url: format!("https://item.rakuten.co.jp/{}", wide(2048 - 27)),
                quantity: 99,
                variant_id: Some(wide(256)),
                max_total_yen: Some(i64::MAX),
            }),
            intent_bytes: 65_536,
            status: TaskStatus::NeedsHuman,
            lease_owner: Some(wide(128)),
            lease_expires_at: Some(ts),
            lease_count: i64::MAX,
            outcome: Some(Outcome::NeedsHuman),
            latest_state: Some(OrderState::AwaitingPayment),
            created_at: ts,
            updated_at: ts,
            not_after: Some(ts),
            set_aside_reason: Some(wide(300)),
        };
        let n = serde_json::to_vec(&s).unwrap().len();
        assert!(n <= MAX_TASK_SUMMARY_BYTES, "{n}");
    }
}
