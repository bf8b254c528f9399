//! The storage contract, one narrow trait per capability; a caller names the one it needs
//! (the executor a [`ClaimStore`], the expiry and retention jobs theirs). [`Store`] is all of
//! them, what the one SQL implementation (`store/sql/`) provides and what
//! [`crate::state::AppState`] holds.

use async_trait::async_trait;

use rakuten_types::Timestamp;

use crate::domain::account::Account;
use crate::domain::asset::{AssetRef, BindingRow};
use crate::domain::package::PackageKind;
use crate::domain::{Scope, TokenHash};
use crate::priority::item_status::ItemStatus;
use crate::store::observe;
use crate::store::*;

/// What the service asks of its database as a whole: liveness, the counts `/metrics`,
/// `/readyz` and `/health` read, the clock comparison of a shared database, the go-live instant,
/// and shutdown.
#[async_trait]
pub trait ServiceStore: Send + Sync + 'static {
    /// Whether the database answers.
    async fn ping(&self) -> StoreResult<()>;
    /// Whether writes are failing as a whole: on SQLite the group-commit writer's last batch
    /// failed (full disk, I/O error, read-only file) and none has committed since
    /// (D-writes-failing-is-503-and-unready); always `false` on PostgreSQL.
    fn writes_failing(&self) -> bool;
    /// `(status, task_type, count)` of the `pending` and `running` priority items.
    async fn item_counts(&self) -> StoreResult<Vec<(String, String, i64)>>;
    /// The open items by status and the oldest pending item's enqueue instant (`/health`).
    async fn queue_health(&self) -> StoreResult<observe::QueueHealth>;
    /// Items this store instance set aside as failed since start because their row could not be
    /// decoded (`cardpoll_items_set_aside_total`).
    fn items_set_aside(&self) -> u64;
    /// How far the database's clock is ahead of `now`, milliseconds, when several instances may
    /// share it (PostgreSQL); `None` for an embedded database, whose only clock is ours
    /// ([`crate::executor::clock_guard`]).
    async fn clock_offset_ms(&self, now: Timestamp) -> StoreResult<Option<i64>>;
    /// Whether [`ServiceStore::clock_offset_ms`] measures anything: `true` on PostgreSQL, `false` on an
    /// embedded database (`/health` says which without a measurement, D-poll-clock-skew-no-claims).
    fn clock_shared(&self) -> bool;
    /// Records the priority feature's go-live instant on first start; returns the stored one.
    async fn meta_feature_enabled_at(&self, now: Timestamp) -> StoreResult<Timestamp>;
    /// Stops the store at service stop: queued writes are committed and answered, then every
    /// later call fails with [`StoreError::Closed`] (HTTP 503). Idempotent.
    async fn shutdown(&self);
}

/// Accounts and their tokens: sign-in by token hash, token replacement and revocation.
#[async_trait]
pub trait AccountStore: Send + Sync + 'static {
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
}

/// The bulk load of the host domain (`POST /api/admin/import`).
#[async_trait]
pub trait ImportStore: Send + Sync + 'static {
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
}

/// Package orders, payments and usages, and the package poll's verdict: each enqueues in
/// the transaction that commits its business fact.
#[async_trait]
pub trait PackageStore: Send + Sync + 'static {
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
    /// The package state a card's package poll judges at `now`, in one read: the asset (its
    /// actively bound device, else the card itself) and whether it has lapsed usages, an
    /// unexpired active main package and a pending usage; `None` when the card is gone.
    async fn card_package_state(
        &self,
        iccid: &str,
        now: Timestamp,
    ) -> StoreResult<Option<PackageState>>;
}

/// Switches of cards, devices and bindings (the `/api/cards`, `/api/devices`,
/// `/api/bindings` routes).
#[async_trait]
pub trait AssetStore: Send + Sync + 'static {
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
}

/// Priority items as operators see and act on them, in their scope: manual enqueue, retrigger,
/// close, list, count and detail.
#[async_trait]
pub trait ItemStore: Send + Sync + 'static {
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
    /// Manually closes an active item in `scope`.
    async fn item_close(
        &self,
        scope: &Scope,
        id: i64,
        operator: &str,
        reason: &str,
        now: Timestamp,
    ) -> StoreResult<()>;
    /// Lists items in `scope`, newest first.
    async fn item_list(&self, scope: &Scope, filter: &ItemFilter) -> StoreResult<Vec<ItemView>>;
    /// How many items in `scope` match `filter` (its cursors and limit ignored), counted to at
    /// most [`COUNT_CAP`]` + 1`: an index walk that stops there instead of counting a large table.
    async fn item_count(&self, scope: &Scope, filter: &ItemFilter) -> StoreResult<i64>;
    /// One item in `scope` with its audit facts and logs.
    async fn item_get(&self, scope: &Scope, id: i64) -> StoreResult<Option<ItemDetail>>;
}

/// The system side of a priority item's life: which are due, the claim, the scope check before
/// execution, the counted attempt, the finish guarded by the claim token, and expiry.
#[async_trait]
pub trait ClaimStore: Send + Sync + 'static {
    /// Ids of claimable items: pending and due, or running with a passed claim lease.
    async fn item_due(&self, now: Timestamp, limit: i64) -> StoreResult<Vec<i64>>;
    /// Claimable items with their task types (pending and due, or running with a passed lease),
    /// oldest first, at most `limit`: the scheduler's one recovery read per cycle.
    async fn item_due_typed(&self, now: Timestamp, limit: i64) -> StoreResult<Vec<DueItem>>;
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
    /// Expires active items whose validity (from max(enqueued_at, feature_enabled_at)) passed;
    /// at most `batch` per call. Returns how many.
    async fn item_mark_expired(
        &self,
        now: Timestamp,
        validity: std::time::Duration,
        batch: i64,
    ) -> StoreResult<u64>;
}

/// Ordinary polling: the per-card schedule rows, the shard take, recorded poll outcomes and
/// ordinary manual triggers.
#[async_trait]
pub trait ScheduleStore: Send + Sync + 'static {
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

/// Batch deletes of old history ([`crate::jobs::retention`]).
#[async_trait]
pub trait RetentionStore: Send + Sync + 'static {
    /// Deletes up to `batch` rows of `table` older than `cutoff` in one write transaction
    /// (never a row of an active item); returns how many ([`PruneTable::Items`]: items, each
    /// with its source rows).
    async fn retention_prune(
        &self,
        table: PruneTable,
        cutoff: Timestamp,
        batch: i64,
    ) -> StoreResult<u64>;
}

/// Every capability: what the one SQL implementation provides, for holders that hand narrower
/// views on (`Arc<dyn Store>` coerces to `Arc<dyn ClaimStore>` and the others).
pub trait Store:
    ServiceStore
    + AccountStore
    + ImportStore
    + PackageStore
    + AssetStore
    + ItemStore
    + ClaimStore
    + ScheduleStore
    + RetentionStore
{
}

impl<T> Store for T where
    T: ServiceStore
        + AccountStore
        + ImportStore
        + PackageStore
        + AssetStore
        + ItemStore
        + ClaimStore
        + ScheduleStore
        + RetentionStore
{
}
