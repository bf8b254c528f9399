//! Storage behind a narrow trait with verb-noun methods ([`Store`], the contract; this file), one
//! implementation written once for both engines (D-one-sql-store-per-engine):
//! - `sql/`: the SQL, one file per concern (`mod.rs` the trait impl, `domain.rs` host domain,
//!   `enqueue.rs` snapshot and enqueue-or-merge, `items.rs` claim/attempt/finish/close/expire,
//!   `query.rs` scoped reads, `rows.rs`, `schedule.rs` ordinary polling and manual triggers),
//!   compiled once per engine by [`sqlite`] (the default) and [`postgres`]
//!   (`RAKUTEN_POLL_DB_URL`), which also open the pool and embed their migrations
//!   (`migrations/sqlite`, `migrations/postgres`, same numbering).
//! - `dialect.rs`: what the engines force apart (write transaction, row locking, aggregates and
//!   collation, time arithmetic, boolean literal), each with its reason.
//! - `common.rs`: row decoders, the item-list filter and pagination, the migration source, generic
//!   over the sqlx database.
//! - `tests.rs`: the store checks, run unchanged on both engines.
//!
//! Every method that changes state is one transaction on PostgreSQL and one SAVEPOINT of the
//! group-commit writer's `BEGIN IMMEDIATE` batch on SQLite (D-sqlite-writer-group-commit; a large import is several,
//! D-import-in-parts), and every transition is a guarded `UPDATE … WHERE status … RETURNING`: zero rows is
//! a typed error, never a silent no-op. Enqueueing happens inside the transaction that commits the business fact.

/// Compiles the one SQL implementation (`store/sql/`) in the engine module it is invoked in, for
/// sqlx driver `$db` and the `dialect` module of the same name (D-one-sql-store-per-engine): it names `Db` and
/// `dialect` there and loads `sql/mod.rs` as that module's `sql` (once per engine, hence the
/// `duplicate_mod` allowance).
macro_rules! one_implementation {
    ($db:ty, $engine:ident) => {
        /// The sqlx driver `store/sql/` is compiled for in this module.
        pub(crate) type Db = $db;
        pub(crate) use crate::store::dialect::$engine as dialect;

        #[allow(clippy::duplicate_mod)]
        #[path = "sql/mod.rs"]
        mod sql;
    };
}
use one_implementation;

mod common;
mod dialect;
mod hot;
pub mod observe;
pub mod postgres;
mod retry;
pub mod sqlite;
mod sqlite_sync;
#[cfg(test)]
mod tests;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use rakuten_types::Timestamp;

use crate::domain::account::Account;
use crate::domain::asset::{AssetRef, BindingRow, CardRow, DeviceRow};
use crate::domain::package::{OrderStatus, PackageKind, PaymentStatus};
use crate::domain::{Scope, Shop, TokenHash};
use crate::priority::TriggerType;
use crate::priority::item_status::ItemStatus;

/// Storage errors. `NotFound` covers "out of scope" too, so callers cannot tell them apart.
/// Cloneable because one failed group commit answers every caller of its batch (D-sqlite-writer-group-commit).
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// No such row, or not in the caller's scope.
    #[error("not found")]
    NotFound,
    /// A guarded transition hit zero rows or a uniqueness rule: the state does not allow it.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The claim token no longer holds the item (taken over, closed or expired).
    #[error("the claim on this item is no longer held")]
    ClaimLost,
    /// Input that only the database can judge (unknown parent shop, unknown shop of a card, …).
    #[error("invalid: {0}")]
    Invalid(String),
    /// The database did not answer within its bound: a lock wait, busy or statement timeout, or
    /// no free connection; or it cannot store anything now (a read-only file,
    /// a full disk, an I/O error, a lost connection: D-writes-failing-is-503-and-unready), which its text says rather
    /// than "busy" (D-exit-2-or-3). Retry later: HTTP 503 with `Retry-After`.
    #[error("{}", busy_text(.0))]
    Busy(#[source] std::sync::Arc<sqlx::Error>),
    /// The store is shutting down: its writer takes no more work, or its pool is closed (HTTP
    /// 503 with `Retry-After`).
    #[error("the store is closed")]
    Closed,
    /// The database failed.
    #[error("database error")]
    Db(#[source] std::sync::Arc<sqlx::Error>),
    /// A concurrent transaction changed what this transition read (PostgreSQL, several writers,
    /// D-poll-postgres-concurrent-writes): the store retries the whole transition, so this surfaces only once the retries
    /// ran out. Retry later: HTTP 503 with `Retry-After`, like [`StoreError::Busy`].
    #[error("a concurrent change: {0}")]
    Raced(&'static str),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        if common::is_unstorable_text(&e) {
            StoreError::Invalid(
                "a text value holds a character the database cannot store (a NUL byte)".into(),
            )
        } else if common::is_busy(&e) || common::is_storage_unavailable(&e) {
            StoreError::Busy(e.into())
        } else if matches!(e, sqlx::Error::PoolClosed) {
            StoreError::Closed
        } else {
            StoreError::Db(e.into())
        }
    }
}

/// What [`StoreError::Busy`] says: busy, or unable to store (so a read-only file is not
/// reported as busy).
fn busy_text(e: &sqlx::Error) -> &'static str {
    if common::is_storage_unavailable(e) {
        "the database cannot store anything now"
    } else {
        "the database is busy"
    }
}

/// Whether `e` is SQLite refusing to write a read-only file or folder: start-up names the file
/// and its variable instead of failing as if the database were busy (D-exit-2-or-3).
pub fn is_read_only(e: &sqlx::Error) -> bool {
    common::is_read_only(e)
}

impl StoreError {
    /// Whether this is SQLite refusing to write a read-only file or folder ([`is_read_only`]).
    pub fn is_read_only(&self) -> bool {
        matches!(self, StoreError::Busy(e) | StoreError::Db(e) if common::is_read_only(e))
    }

    /// The same error about one import row (see [`import_row`]): the request's fault (conflict,
    /// invalid) says which row; any other error is not about a row and stays as it is.
    pub fn at_row(self, row: &str) -> Self {
        match self {
            StoreError::Conflict(m) => StoreError::Conflict(format!("{row}: {m}")),
            StoreError::Invalid(m) => StoreError::Invalid(format!("{row}: {m}")),
            e => e,
        }
    }

    /// An import part's error once earlier parts of the same import are committed (D-import-in-parts): its
    /// message says what landed and stays, so that the caller resends only the rest instead of
    /// learning it from a retry refused as conflicts (D-import-in-parts). Errors without a message of
    /// their own (busy, closed) are logged with the counts instead.
    #[must_use]
    pub fn after_committed(self, committed: &ImportCounts) -> Self {
        if *committed == ImportCounts::default() {
            return self;
        }
        let c = committed;
        let k = &c.skipped;
        let skipped = k.shops + k.accounts + k.cards + k.devices;
        let skipped = if skipped > 0 {
            format!(" ({skipped} rows already stored were skipped)")
        } else {
            String::new()
        };
        // Bindings go in deactivations first (D-import-bindings-end-state): the committed ones are not the
        // file's first rows, and need not be: an upsert sent again changes nothing.
        let bindings = if c.bindings > 0 {
            "; bindings went in deactivations first, not in the file's order: resend all of them \
             (they are upserts)"
        } else {
            ""
        };
        let landed = format!(
            "earlier parts of this import are committed and stay: {} shops, {} accounts, {} cards, \
             {} devices, {} bindings{skipped}; resend only the rows after them, or all of them with \
             ?existing=skip{bindings}",
            c.shops, c.accounts, c.cards, c.devices, c.bindings
        );
        match self {
            StoreError::Conflict(m) => StoreError::Conflict(format!("{m} ({landed})")),
            StoreError::Invalid(m) => StoreError::Invalid(format!("{m} ({landed})")),
            e => {
                tracing::warn!(error = %e, "import stopped: {landed}");
                e
            }
        }
    }
}

/// Names one row of an import in an error message: `cards row 17 (iccid 8981…)`, where `n` is
/// the row's 1-based position in its list of the request and `key` the row's key name and value
/// (D-import-refusals-name-the-row). A key that is not a well-formed identifier is left out, never echoed.
pub fn import_row(list: &str, n: usize, key: Option<(&str, &str)>) -> String {
    match key.filter(|(_, v)| crate::domain::parse_key("key", v).is_ok()) {
        Some((name, v)) => format!("{list} row {n} ({name} {v})"),
        None => format!("{list} row {n}"),
    }
}

impl sqlite_writer::WriterError for StoreError {
    fn closed() -> Self {
        StoreError::Closed
    }

    fn is_storage_failure(&self) -> bool {
        matches!(self, StoreError::Busy(e) if common::is_storage_unavailable(e))
    }
}

/// How long a request waits for the database (SQLite busy timeout, PostgreSQL `lock_timeout`,
/// a pool connection) unless `RAKUTEN_POLL_DB_LOCK_TIMEOUT_MS` says otherwise.
pub const DEFAULT_LOCK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Result alias.
pub type StoreResult<T> = Result<T, StoreError>;

/// Rows to load into the host domain. Existing rows with the same key are refused (conflict), or
/// skipped when equal ([`ImportExisting`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportBatch {
    /// Shops, parents before children (or in any order: the driver sorts them).
    #[serde(default)]
    pub shops: Vec<Shop>,
    /// Accounts with their plain tokens (hashed before storage).
    #[serde(default)]
    pub accounts: Vec<AccountImport>,
    /// Cards.
    #[serde(default)]
    pub cards: Vec<CardRow>,
    /// Devices.
    #[serde(default)]
    pub devices: Vec<DeviceRow>,
    /// Bindings.
    #[serde(default)]
    pub bindings: Vec<BindingRow>,
}

/// An account to import.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountImport {
    /// Account id.
    pub id: String,
    /// Role name.
    pub role: crate::domain::Role,
    /// Bound shop (required for agents).
    #[serde(default)]
    pub shop_id: Option<String>,
    /// Plain Bearer token (at least 16 characters); only its SHA-256 is stored.
    pub token: String,
    /// The manual polling trigger permission (default on).
    #[serde(default = "yes")]
    pub perm_manual_trigger: bool,
    /// The card data permission (default on).
    #[serde(default = "yes")]
    pub perm_card_data: bool,
}

impl std::fmt::Debug for AccountImport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccountImport")
            .field("id", &self.id)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

fn yes() -> bool {
    true
}

/// An account as stored, with the hash of the token that signs it in now: `None` once revoked
/// (`DELETE /api/admin/accounts/{id}/token`). The console checks every session against it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountRecord {
    /// The account.
    pub account: Account,
    /// Its current token's hash; `None`: revoked.
    pub token: Option<TokenHash>,
}

/// Rows inserted by an import, and rows it found already stored and skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportCounts {
    /// Shops inserted.
    pub shops: u64,
    /// Accounts inserted.
    pub accounts: u64,
    /// Cards inserted.
    pub cards: u64,
    /// Devices inserted.
    pub devices: u64,
    /// Bindings inserted or updated.
    pub bindings: u64,
    /// Rows already stored exactly as sent, skipped ([`ImportExisting::Skip`]; all zero
    /// otherwise).
    #[serde(default)]
    pub skipped: SkippedCounts,
}

impl ImportCounts {
    /// Adds `other`'s counts (one part of an import) to these.
    pub fn add(&mut self, other: &ImportCounts) {
        self.shops += other.shops;
        self.accounts += other.accounts;
        self.cards += other.cards;
        self.devices += other.devices;
        self.bindings += other.bindings;
        self.skipped.shops += other.skipped.shops;
        self.skipped.accounts += other.skipped.accounts;
        self.skipped.cards += other.skipped.cards;
        self.skipped.devices += other.skipped.devices;
    }
}

/// Rows of an import found already stored exactly as sent, and skipped
/// ([`ImportExisting::Skip`]). Bindings are upserts and count as imported either way.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedCounts {
    /// Shops.
    pub shops: u64,
    /// Accounts.
    pub accounts: u64,
    /// Cards.
    pub cards: u64,
    /// Devices.
    pub devices: u64,
}

/// What an import does with a shop, account, card or device whose key is already stored
/// (`POST /api/admin/import?existing=`, D-import-existing-skip).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImportExisting {
    /// Refuse it: 409 naming the row, and the import (or, past 10,000 rows, its part) stores
    /// nothing.
    #[default]
    Refuse,
    /// Skip it when the stored row has the same values (counted in [`ImportCounts::skipped`]);
    /// refuse it (409 naming the row and the fields that differ) when it does not. A client that
    /// lost the answer to a large import (a crash, a timeout) resends the same rows with this and
    /// gets the rest stored, without learning first which parts landed.
    Skip,
}

/// A package order as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderView {
    /// Order id.
    pub id: String,
    /// The asset the package is for.
    pub asset: AssetRef,
    /// Main or add-on.
    pub kind: PackageKind,
    /// Payment status.
    pub status: OrderStatus,
    /// Payment id of the settling callback.
    pub payment_id: Option<String>,
    /// Creation time.
    pub created_at: Timestamp,
}

/// A payment callback (idempotent by `payment_id`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaymentCallback {
    /// The payment's id at the payment provider.
    pub payment_id: String,
    /// The order paid.
    pub order_id: String,
    /// What happened.
    pub status: PaymentStatus,
}

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

/// What the payment callback did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentOutcome {
    /// The order after the callback.
    pub order_id: String,
    /// Its status.
    pub status: OrderStatus,
    /// True when this payment id was already applied: nothing changed.
    pub replayed: bool,
    /// The usage record created (paid orders).
    pub usage_id: Option<String>,
    /// Whether that usage is active (false: queued behind an active main package).
    pub usage_active: bool,
    /// The trigger type used, when items were enqueued.
    pub trigger_type: Option<TriggerType>,
    /// Items enqueued or merged.
    pub items: Vec<EnqueuedItem>,
}

/// What the package poll concluded for an asset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackagePollOutcome {
    /// Usage records that ran out and were marked expired by this poll.
    pub usages_expired: u64,
    /// True when no active main package remains.
    pub no_valid_package: bool,
    /// True when a pending usage record waits.
    pub pending_usage: bool,
    /// Items enqueued (`no_valid_package`) or merged.
    pub items: Vec<EnqueuedItem>,
}

/// A card's package state as the ordinary package poll reads it before deciding to write
/// (D-package-poll-verdict).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageState {
    /// The asset whose packages are judged: the actively bound device, else the card.
    pub asset: AssetRef,
    /// An active usage whose `ends_at` has passed (the poll marks it expired).
    pub lapsed_usage: bool,
    /// An active main package that has not ended.
    pub valid_main: bool,
    /// A pending usage record waits.
    pub pending_usage: bool,
}

impl PackageState {
    /// Whether the poll must run its write transition (`package_poll_asset`): a lapsed usage to
    /// mark expired, or no valid main package while a usage waits (a priority enqueue). Any
    /// other state is answered from this read alone, with no write.
    pub const fn needs_write(&self) -> bool {
        self.lapsed_usage || (!self.valid_main && self.pending_usage)
    }
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

/// Ordinary cards taken from one shard of one task type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardBatch {
    /// Shard number (`0..shards`).
    pub shard: u32,
    /// Cards whose ordinary poll was due, with their polling scope read in the same statement
    /// (D-ordinary-scope-read-by-take); their `next_poll_at` already moved one interval ahead.
    pub cards: Vec<(String, CardScope)>,
}

/// The outcome of one ordinary (or ordinary manual trigger) poll; written in batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollRecord {
    /// Card.
    pub iccid: String,
    /// Task type.
    pub task_type: String,
    /// The ordinary manual trigger this poll served, if any.
    pub manual_trigger_id: Option<i64>,
    /// Short result (`ok`, an error label, `out_of_polling_scope`, …).
    pub result: String,
    /// Upstream calls made (interaction log rows, `item_id` empty).
    pub logs: Vec<NewLog>,
    /// When the poll ran.
    pub at: Timestamp,
    /// The card's next ordinary poll of this task type.
    pub next_poll_at: Timestamp,
}

/// An ordinary manual trigger request ("poll this card now").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManualTriggerRequest {
    /// Operator (account id).
    pub operator: String,
    /// Card.
    pub iccid: String,
    /// Task types (one queue entry each).
    pub task_types: Vec<String>,
    /// Accepted triggers per operator per UTC day.
    pub daily_quota: u32,
}

/// The ordinary polling schedule's configuration: the shard count and every task type with its
/// interval in seconds — as an instance is configured (`RAKUTEN_POLL_SHARDS`,
/// `RAKUTEN_POLL_TASK_TYPES`) or as the last schedule sync stored it for every instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScheduleConfig {
    /// Shards.
    pub shards: u32,
    /// Task type → interval, seconds.
    pub task_types: std::collections::BTreeMap<String, u64>,
}

impl ScheduleConfig {
    /// An instance's configuration.
    pub fn of(task_types: &crate::domain::TaskTypes, shards: u32) -> Self {
        ScheduleConfig {
            shards,
            task_types: task_types
                .all()
                .iter()
                .map(|t| (t.name.clone(), t.interval.as_secs()))
                .collect(),
        }
    }
}

/// In the settings' own words: `RAKUTEN_POLL_TASK_TYPES=card_status=300,… RAKUTEN_POLL_SHARDS=4`.
impl std::fmt::Display for ScheduleConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RAKUTEN_POLL_TASK_TYPES=")?;
        for (i, (name, secs)) in self.task_types.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            write!(f, "{sep}{name}={secs}")?;
        }
        write!(f, " RAKUTEN_POLL_SHARDS={}", self.shards)
    }
}

/// One accepted ordinary manual trigger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuedTrigger {
    /// Trigger id.
    pub id: i64,
    /// Card.
    pub iccid: String,
    /// Task type.
    pub task_type: String,
}

/// What an ordinary manual trigger request did (refusals are recorded too).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum ManualTriggerOutcome {
    /// Accepted: one queued trigger per task type.
    Queued {
        /// The triggers.
        triggers: Vec<QueuedTrigger>,
    },
    /// The operator's daily quota does not cover the request.
    QuotaExceeded {
        /// Accepted triggers today (UTC).
        used: u32,
        /// The quota.
        quota: u32,
    },
    /// The card was already triggered for these task types within 24 h.
    Duplicate {
        /// The task types triggered within 24 h.
        task_types: Vec<String>,
    },
}

/// A history table the retention job prunes ([`crate::jobs::retention`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PruneTable {
    /// `integration_logs`: rows older than the log retention, unless their item is active.
    InteractionLogs,
    /// `priority_item_events`: audit facts of items that ended before the history retention.
    AuditFacts,
    /// `priority_trigger_events`: the replay memory of items that ended before it.
    TriggerEvents,
    /// `manual_triggers`: ordinary manual triggers requested before it, executed or refused.
    ManualTriggers,
    /// `priority_items` with their `priority_item_sources` rows: ended items whose end is before
    /// the history retention and whose audit facts and trigger events are gone, unless a later
    /// retrigger points at them (D-retention-batches, D-retrigger-predecessor-kept). Counted in items.
    Items,
}

impl PruneTable {
    /// The metric label (`cardpoll_pruned_rows_total{table}`).
    pub fn as_str(self) -> &'static str {
        match self {
            PruneTable::InteractionLogs => "interaction_logs",
            PruneTable::AuditFacts => "audit_facts",
            PruneTable::TriggerEvents => "trigger_events",
            PruneTable::ManualTriggers => "manual_triggers",
            PruneTable::Items => "priority_items",
        }
    }
}

/// The storage trait.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    // ---- observation (`/metrics`, `/readyz`; [`observe`])
    /// `(status, task_type, count)` of the `pending` and `running` priority items.
    async fn item_counts(&self) -> StoreResult<Vec<(String, String, i64)>>;
    /// Whether the database answers.
    async fn ping(&self) -> StoreResult<()>;
    /// Whether writes are failing as a whole: on SQLite the group-commit writer's last batch
    /// failed (full disk, I/O error, read-only file) and none has committed since
    /// (D-writes-failing-is-503-and-unready); always `false` on PostgreSQL.
    fn writes_failing(&self) -> bool;
    /// The open items by status and the oldest pending item's enqueue instant (`/health`).
    async fn queue_health(&self) -> StoreResult<observe::QueueHealth>;
    /// Stops the store at service stop: queued writes are committed and answered, then every
    /// later call fails with [`StoreError::Closed`] (HTTP 503). Idempotent.
    async fn shutdown(&self);

    // ---- retention ([`crate::jobs::retention`])
    /// Deletes up to `batch` rows of `table` older than `cutoff` in one write transaction
    /// (never a row of an active item); returns how many ([`PruneTable::Items`]: items, each
    /// with its source rows).
    async fn retention_prune(
        &self,
        table: PruneTable,
        cutoff: Timestamp,
        batch: i64,
    ) -> StoreResult<u64>;

    /// How far the database's clock is ahead of `now`, milliseconds, when several instances may
    /// share it (PostgreSQL); `None` for an embedded database, whose only clock is ours
    /// ([`crate::executor::clock_guard`]).
    async fn clock_offset_ms(&self, now: Timestamp) -> StoreResult<Option<i64>>;
    /// Whether [`Store::clock_offset_ms`] measures anything: `true` on PostgreSQL, `false` on an
    /// embedded database (`/health` says which without a measurement, D-poll-clock-skew-no-claims).
    fn clock_shared(&self) -> bool;

    // ---- service facts
    /// Records the priority feature's go-live instant on first start; returns the stored one.
    async fn meta_feature_enabled_at(&self, now: Timestamp) -> StoreResult<Timestamp>;

    // ---- host domain
    /// Finds the account whose token hashes to `hash` (constant-time compare of the hash); a
    /// revoked account is not found.
    async fn account_find_by_token(&self, hash: &TokenHash) -> StoreResult<Option<Account>>;
    /// The account `id` as stored now, with its current token's hash (`None` when revoked).
    async fn account_get(&self, id: &str) -> StoreResult<Option<AccountRecord>>;
    /// Gives account `id` the token hashing to `token` (a revoked account signs in again with
    /// it). [`StoreError::NotFound`] for an unknown account, [`StoreError::Conflict`] when another
    /// account holds that token.
    async fn account_set_token(
        &self,
        id: &str,
        token: &TokenHash,
        now: Timestamp,
    ) -> StoreResult<()>;
    /// Revokes account `id`'s token: it signs nothing in any more, and the console sessions it
    /// opened end. Revoking a revoked account changes nothing. [`StoreError::NotFound`] for an
    /// unknown account.
    async fn account_revoke(&self, id: &str, now: Timestamp) -> StoreResult<()>;
    /// Loads shops, accounts, cards, devices and bindings in one transaction; new cards get their
    /// ordinary polling schedule rows (first poll spread over each task type's interval from `now`).
    /// A row whose key is already stored is refused ([`ImportExisting::Refuse`]).
    async fn domain_import(
        &self,
        batch: &ImportBatch,
        now: Timestamp,
    ) -> StoreResult<ImportCounts> {
        self.domain_import_with(batch, ImportExisting::Refuse, now)
            .await
    }
    /// [`Self::domain_import`], with what to do with rows already stored.
    async fn domain_import_with(
        &self,
        batch: &ImportBatch,
        existing: ImportExisting,
        now: Timestamp,
    ) -> StoreResult<ImportCounts>;
    /// Creates an unpaid package order.
    async fn order_create(
        &self,
        id: &str,
        asset: &AssetRef,
        kind: PackageKind,
        now: Timestamp,
    ) -> StoreResult<OrderView>;
    /// Applies a payment callback; for a paid order creates the usage record and, when it is
    /// active, enqueues in the same transaction. Idempotent by payment id.
    async fn payment_apply(
        &self,
        cb: &PaymentCallback,
        task_types: &[String],
        now: Timestamp,
    ) -> StoreResult<PaymentOutcome>;
    /// Activates a queued main package (pending → active, must hit one row) and enqueues
    /// `queue_activated` in the same transaction.
    async fn usage_activate_queued(
        &self,
        usage_id: &str,
        task_types: &[String],
        now: Timestamp,
    ) -> StoreResult<Vec<EnqueuedItem>>;
    /// The ordinary package poll's verdict for an asset: expires ended usages; with no active
    /// main package and a pending usage, enqueues `no_valid_package` in the same transaction.
    async fn package_poll_asset(
        &self,
        asset: &AssetRef,
        task_types: &[String],
        now: Timestamp,
    ) -> StoreResult<PackagePollOutcome>;
    /// Switches a card's polling.
    async fn card_set_polling(&self, iccid: &str, enabled: bool) -> StoreResult<()>;
    /// Switches a device's polling.
    async fn device_set_polling(&self, device_no: &str, enabled: bool) -> StoreResult<()>;
    /// Sets or clears the carrier channel threshold stop lock of a card.
    async fn card_set_stop_lock(&self, iccid: &str, locked: bool) -> StoreResult<()>;
    /// Deletes a card (and its bindings); its items stay.
    async fn card_delete(&self, iccid: &str) -> StoreResult<()>;
    /// Creates or changes a binding.
    async fn binding_upsert(&self, b: &BindingRow) -> StoreResult<()>;
    /// Records the slot a device reports (never used for targeting).
    async fn device_report_slot(&self, device_no: &str, iccid: Option<&str>) -> StoreResult<()>;

    // ---- priority items
    /// Manual enqueue for an asset in `scope` (not found when outside): merges into active items.
    async fn item_enqueue_manual(
        &self,
        scope: &Scope,
        asset: &AssetRef,
        demand: &Demand,
        now: Timestamp,
    ) -> StoreResult<Vec<EnqueuedItem>>;
    /// Retriggers a failed or expired item in `scope`: a new active item for its card and task
    /// type (attempts 0), or a merge into the active one.
    async fn item_retrigger(
        &self,
        scope: &Scope,
        item_id: i64,
        operator: &str,
        reason: &str,
        now: Timestamp,
    ) -> StoreResult<EnqueuedItem>;
    /// Ids of claimable items: pending and due, or running with a passed claim lease.
    async fn item_due(&self, now: Timestamp, limit: i64) -> StoreResult<Vec<i64>>;
    /// Claims an item (conditional update); `None` when another claimer holds it or it is not due.
    /// An item past its validity is expired here instead, with its `expire` audit fact, and `None`
    /// returned: no item is handed out after `valid_until`.
    async fn item_claim(
        &self,
        id: i64,
        token: &str,
        now: Timestamp,
        lease: std::time::Duration,
    ) -> StoreResult<Option<ClaimedItem>>;
    /// Items this store instance set aside as failed since start because their row could not be
    /// decoded (`cardpoll_items_set_aside_total`).
    fn items_set_aside(&self) -> u64;
    /// The pre-execution scope check of a card.
    async fn card_polling_scope(&self, iccid: &str) -> StoreResult<CardScope>;
    /// Counts an attempt just before the upstream call (guarded by the claim token).
    async fn item_begin_attempt(
        &self,
        claim: &ClaimedItem,
        now: Timestamp,
    ) -> StoreResult<ClaimedItem>;
    /// Ends an execution: writes the interaction logs, the item transition and its audit facts in
    /// one transaction. [`StoreError::ClaimLost`] when the claim no longer holds.
    async fn item_finish(
        &self,
        claim: &ClaimedItem,
        finish: &Finish,
        logs: &[NewLog],
        now: Timestamp,
    ) -> StoreResult<ItemStatus>;
    /// Manually closes an active item in `scope`.
    async fn item_close(
        &self,
        scope: &Scope,
        id: i64,
        operator: &str,
        reason: &str,
        now: Timestamp,
    ) -> StoreResult<()>;
    /// Expires active items whose validity (from max(enqueued_at, feature_enabled_at)) passed;
    /// at most `batch` per call. Returns how many.
    async fn item_mark_expired(
        &self,
        now: Timestamp,
        validity: std::time::Duration,
        batch: i64,
    ) -> StoreResult<u64>;
    /// Lists items in `scope`, newest first.
    async fn item_list(&self, scope: &Scope, filter: &ItemFilter) -> StoreResult<Vec<ItemView>>;
    /// How many items in `scope` match `filter` (its cursors and limit ignored), counted to at
    /// most [`COUNT_CAP`]` + 1`: an index walk that stops there instead of counting a large table.
    async fn item_count(&self, scope: &Scope, filter: &ItemFilter) -> StoreResult<i64>;
    /// One item in `scope` with its audit facts and logs.
    async fn item_get(&self, scope: &Scope, id: i64) -> StoreResult<Option<ItemDetail>>;
    /// Claimable items with their task types (pending and due, or running with a passed lease),
    /// oldest first, at most `limit`: the scheduler's one recovery read per cycle.
    async fn item_due_typed(&self, now: Timestamp, limit: i64) -> StoreResult<Vec<DueItem>>;

    // ---- ordinary polling
    /// Records the configured task types and shard count and gives every card a schedule row per
    /// task type (missing rows added, shards recomputed when the count changed, rows of task types
    /// no longer configured removed). Cheap when nothing changed. Returns rows written.
    async fn schedule_sync(
        &self,
        task_types: &crate::domain::TaskTypes,
        shards: u32,
        now: Timestamp,
    ) -> StoreResult<u64>;
    /// The schedule configuration as stored by the last sync of any instance, read in one
    /// statement; `None` before the first sync (D-schedule-config-check).
    async fn schedule_config_read(&self) -> StoreResult<Option<ScheduleConfig>>;
    /// Takes up to `per_shard` due cards from each listed shard of `task_type` and moves their
    /// `next_poll_at` to `now + interval` in the same transaction.
    async fn schedule_take_due(
        &self,
        task_type: &str,
        interval: std::time::Duration,
        shards: &[u32],
        per_shard: i64,
        now: Timestamp,
    ) -> StoreResult<Vec<ShardBatch>>;
    /// Writes a batch of ordinary poll outcomes in one transaction: interaction logs, the cards'
    /// `last_polled_at`/`next_poll_at`, and served manual triggers.
    async fn poll_record(&self, records: &[PollRecord]) -> StoreResult<()>;
    /// The package state a card's package poll judges at `now`, in one read: the asset (its
    /// actively bound device, else the card itself) and whether it has lapsed usages, an
    /// unexpired active main package and a pending usage; `None` when the card is gone.
    async fn card_package_state(
        &self,
        iccid: &str,
        now: Timestamp,
    ) -> StoreResult<Option<PackageState>>;
    /// An ordinary manual trigger in `scope` (card not found when outside): checks the operator's
    /// daily quota and the 24 h dedupe per (card, task type) and records the request either way.
    async fn manual_trigger_request(
        &self,
        scope: &Scope,
        req: &ManualTriggerRequest,
        now: Timestamp,
    ) -> StoreResult<ManualTriggerOutcome>;
    /// Queued (not yet executed) manual triggers of a task type requested at or before `before`,
    /// oldest first: recovers entries lost from the manual queue.
    async fn manual_trigger_queued(
        &self,
        task_type: &str,
        before: Timestamp,
        limit: i64,
    ) -> StoreResult<Vec<QueuedTrigger>>;
}

#[cfg(test)]
mod storage_failure_tests {
    use sqlite_writer::WriterError;
    use sqlx::{ConnectOptions, Connection};

    use super::StoreError;

    /// D-writes-failing-is-503-and-unready: a write SQLite refuses because it cannot store (here a read-only file;
    /// a full disk and an I/O error are the same class) counts as the writer failing; a lock
    /// held elsewhere past the timeout does not.
    #[tokio::test]
    async fn a_read_only_database_is_a_storage_failure_and_a_lock_wait_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let opts = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
            .busy_timeout(std::time::Duration::ZERO);
        let mut rw = opts.connect().await.unwrap();
        sqlx::query("CREATE TABLE t (v INTEGER)")
            .execute(&mut rw)
            .await
            .unwrap();
        let mut ro = opts.clone().read_only(true).connect().await.unwrap();
        let e = StoreError::from(
            sqlx::query("INSERT INTO t VALUES (1)")
                .execute(&mut ro)
                .await
                .unwrap_err(),
        );
        assert!(e.is_storage_failure(), "{e:?}");
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut rw)
            .await
            .unwrap();
        let mut other = opts.connect().await.unwrap();
        let e = StoreError::from(
            sqlx::query("BEGIN IMMEDIATE")
                .execute(&mut other)
                .await
                .unwrap_err(),
        );
        assert!(matches!(e, StoreError::Busy(_)), "{e:?}");
        assert!(!e.is_storage_failure(), "{e:?}");
        rw.close().await.unwrap();
    }
}
