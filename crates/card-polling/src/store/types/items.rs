//! Priority items as the store takes and answers them: enqueue demands and their outcome, the
//! claim handle and how an execution ends ([`crate::store::ClaimStore`]), and the scoped
//! list/detail views with their filter ([`crate::store::ItemStore`]).

use serde::{Deserialize, Serialize};

use rakuten_types::Timestamp;

use crate::priority::TriggerType;
use crate::priority::item_status::ItemStatus;

/// What one enqueue did to one (card, task type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnqueueAction {
    /// A new active item.
    Created,
    /// Merged into the existing active item.
    Merged,
    /// The same trigger event was seen before: nothing changed.
    Replayed,
}

/// One (card, task type) touched by an enqueue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnqueuedItem {
    /// The active item (or, for a replay whose item is gone, the item it created).
    pub item_id: i64,
    /// Card.
    pub iccid: String,
    /// Task type.
    pub task_type: String,
    /// What happened.
    pub action: EnqueueAction,
}

/// A priority demand: who, why, for which task types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Demand {
    /// Trigger type.
    pub trigger_type: TriggerType,
    /// The source fact (e.g. `order:O1`, `usage:U2`, `manual:alice`).
    pub source: String,
    /// Replay key: the same event id for the same card and task type adds nothing.
    pub event_id: String,
    /// Operator for manual demands.
    pub operator: Option<String>,
    /// Reason for manual demands.
    pub reason: Option<String>,
    /// Task types (one item per card per task type).
    pub task_types: Vec<String>,
}

/// An item held by a claim. Only this handle may finish the item (the SQL checks the token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedItem {
    /// Item id.
    pub id: i64,
    /// Card.
    pub iccid: String,
    /// Task type.
    pub task_type: String,
    /// The claim token (UUIDv7).
    pub token: String,
    /// Attempts made before this claim (plus one after `item_begin_attempt`).
    pub attempts: i64,
    /// The attempt limit stored with the item.
    pub max_attempts: i64,
    /// True when this claim took over a running item whose lease passed.
    pub took_over: bool,
}

/// Whether a card is still in polling scope (checked after the claim, before any upstream call).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CardScope {
    /// The card row is gone.
    Missing,
    /// The card's own polling switch is off.
    CardPollingOff,
    /// The actively bound device's polling switch is off.
    DevicePollingOff,
    /// In scope; `stop_locked` says whether a resume must be refused.
    InScope {
        /// Carrier channel threshold stop lock held.
        stop_locked: bool,
    },
}

impl CardScope {
    /// Decodes the scope code the store's SQL computes (`dialect::card_scope_code`): `None` (the
    /// card is gone) or 1..=4. An unknown code reads as out of scope: never a call on doubt.
    pub fn from_code(code: Option<i64>) -> Self {
        match code {
            None => CardScope::Missing,
            Some(3) => CardScope::InScope { stop_locked: false },
            Some(4) => CardScope::InScope { stop_locked: true },
            Some(2) => CardScope::DevicePollingOff,
            Some(_) => CardScope::CardPollingOff,
        }
    }
}

/// One upstream call to record in the integration interaction log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLog {
    /// `poll` or `resume`.
    pub operation: String,
    /// Safe request summary.
    pub request_summary: String,
    /// Safe response summary (never the raw body).
    pub response_summary: String,
    /// Latency in milliseconds.
    pub latency_ms: i64,
    /// `ok` or an error label.
    pub outcome: String,
}

/// How an execution ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finish {
    /// Success: `completed`.
    Completed {
        /// Result text (e.g. `ok`, `ok; resume refused: stop lock held`).
        result: String,
    },
    /// Recoverable failure below the limit: back to `pending` at `next_run_at`.
    Retry {
        /// Safe failure reason.
        reason: String,
        /// When to run again (now + the task type's normal interval).
        next_run_at: Timestamp,
    },
    /// Dequeue as `failed`.
    Failed {
        /// Safe failure reason.
        reason: String,
        /// Short result label.
        result: String,
        /// Whether an upstream call failed in this execution (adds a `failure` audit fact).
        after_call: bool,
    },
}

/// Filters of the list query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ItemFilter {
    /// Status.
    pub status: Option<ItemStatus>,
    /// Task type.
    pub task_type: Option<String>,
    /// Trigger type (the creating trigger).
    pub trigger_type: Option<TriggerType>,
    /// ICCID.
    pub iccid: Option<String>,
    /// Enqueued at or after.
    pub enqueued_from: Option<Timestamp>,
    /// Enqueued before.
    pub enqueued_to: Option<Timestamp>,
    /// Exceptions-and-retries view conditions (any of them matches).
    pub exceptions: Vec<ExceptionCondition>,
    /// Only items of this shop and its sub-shops (`shop_closure`), on top of the scope: a shop
    /// outside the scope matches nothing, exactly like a missing shop.
    pub shop: Option<String>,
    /// Only ids below this (keyset pagination, newest first: the older page).
    pub before_id: Option<i64>,
    /// Only ids above this (keyset pagination: the newer page, walked oldest first and returned
    /// newest first). Ignored when `before_id` is set.
    pub after_id: Option<i64>,
    /// Page size (1..=200).
    pub limit: i64,
}

/// Where [`Store::item_count`] stops counting: the console shows "10,000+" past it.
pub const COUNT_CAP: i64 = 10_000;

/// A condition of the "exceptions and retries" view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExceptionCondition {
    /// Terminal `failed`.
    Failed,
    /// Terminal `expired`.
    Expired,
    /// Attempts reached the maximum.
    AttemptsAtMax,
    /// A failure reason is recorded.
    HasFailureReason,
}

/// One priority item as the queries return it (every field the spec lists; no priority grade).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemView {
    /// Item id.
    pub id: i64,
    /// Asset type.
    pub asset_type: String,
    /// Asset id (ICCID or device number).
    pub asset_id: String,
    /// Device number when the card was bound to a device at trigger time.
    pub device_no: Option<String>,
    /// Card ICCID (the execution target).
    pub iccid: String,
    /// Shop of the card at trigger time.
    pub shop_id: String,
    /// Agent attribution: the shop chain from the top-level agent down to `shop_id`.
    pub agent_chain: Vec<String>,
    /// Task type.
    pub task_type: String,
    /// Status.
    pub status: ItemStatus,
    /// The trigger type that created the item.
    pub trigger_type: TriggerType,
    /// The latest trigger type merged in.
    pub last_trigger_type: TriggerType,
    /// Set of trigger sources.
    pub trigger_sources: Vec<String>,
    /// Number of triggers (creation plus merges; replays do not count).
    pub trigger_count: i64,
    /// Latest trigger time.
    pub last_triggered_at: Timestamp,
    /// Attempts made (upstream calls really issued).
    pub attempts: i64,
    /// Attempt limit (read-only, the constant 3).
    pub max_attempts: i64,
    /// Start of the latest execution.
    pub started_at: Option<Timestamp>,
    /// End of the latest execution.
    pub finished_at: Option<Timestamp>,
    /// Duration of the latest execution, milliseconds.
    pub duration_ms: Option<i64>,
    /// Next planned run (active items only).
    pub next_run_at: Option<Timestamp>,
    /// Claim lease end (running items only).
    pub claim_expires_at: Option<Timestamp>,
    /// Enqueue time.
    pub enqueued_at: Timestamp,
    /// Dequeue time (terminal items).
    pub dequeued_at: Option<Timestamp>,
    /// End of the validity period (read-only).
    pub valid_until: Timestamp,
    /// Result of the latest execution.
    pub result: Option<String>,
    /// Safe failure reason.
    pub failure_reason: Option<String>,
    /// Latest integration interaction log id (no raw response).
    pub last_log_id: Option<i64>,
    /// Operator of a manual enqueue or retrigger.
    pub operator: Option<String>,
    /// Reason of a manual enqueue or retrigger.
    pub reason: Option<String>,
    /// The failed or expired item this one retriggers.
    pub retriggered_from: Option<i64>,
    /// Who closed it.
    pub closed_by: Option<String>,
    /// Why it was closed.
    pub close_reason: Option<String>,
}

/// One audit fact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemEventView {
    /// Event id.
    pub id: i64,
    /// `enqueue`, `merge`, `claim`, `failure`, `retry`, `complete`, `close`, `expire`,
    /// `retrigger` or `fail_dequeue`.
    pub kind: String,
    /// Trigger type (enqueue, merge, retrigger).
    pub trigger_type: Option<String>,
    /// Trigger source.
    pub source: Option<String>,
    /// Operator.
    pub operator: Option<String>,
    /// Reason.
    pub reason: Option<String>,
    /// Result.
    pub result: Option<String>,
    /// Time.
    pub at: Timestamp,
    /// The scheduler/executor instance that made a system transition (claim, takeover, retry,
    /// failure, complete, expire, fail_dequeue): `RAKUTEN_POLL_INSTANCE_ID` or
    /// `<host>-<pid>-<hex>`; `null` on operator facts and on facts written before the column existed (migration 0003).
    pub actor: Option<String>,
    /// First 8 hex digits of the SHA-256 of the claim token the transition made or ended (never
    /// the token); `null` where no claim is involved.
    pub claim_fingerprint: Option<String>,
}

/// One integration interaction log row (summaries only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogView {
    /// Log id.
    pub id: i64,
    /// `poll` or `resume`.
    pub operation: String,
    /// Request summary.
    pub request_summary: String,
    /// Response summary.
    pub response_summary: String,
    /// Latency, milliseconds.
    pub latency_ms: i64,
    /// Outcome label.
    pub outcome: String,
    /// Time.
    pub at: Timestamp,
}

/// Item detail: the item, its audit facts and its interaction log rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemDetail {
    /// The item.
    pub item: ItemView,
    /// The latest 1,000 audit facts, oldest first.
    pub events: Vec<ItemEventView>,
    /// The latest 100 interaction log rows, oldest first.
    pub logs: Vec<LogView>,
}

/// One claimable priority item and its task type (the scheduler's per-cycle recovery read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DueItem {
    /// Item id.
    pub id: i64,
    /// Task type (selects the execution queue).
    pub task_type: String,
}
