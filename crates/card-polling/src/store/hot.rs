//! The two hottest transitions, claim and enqueue-or-merge, written once over the statements
//! they run ([`ClaimStatements`], [`EnqueueStatements`]). PostgreSQL runs those statements
//! through sqlx (`store/sql/`), SQLite synchronously on its writer's own thread
//! (`store/sqlite_sync.rs`), where a statement costs about a microsecond instead of a round trip
//! to sqlx's connection thread (10–50 µs on these VMs, D-writer-sync-transitions). The decisions (which
//! statement next, what the audit fact says, when a concurrent writer raced) live only here.
//!
//! The statements' texts are here too ([`sql`]), as macros so that an engine can splice its own
//! row lock into one with `concat!`.
//!
//! The trait methods are `async` for sqlx; the synchronous implementation's never wait, and its
//! callers drive them with `now_or_never` (`store/sqlite_sync.rs`).

use std::time::Duration;

use rakuten_types::Timestamp;

use crate::domain::Scope;
use crate::domain::asset::{AssetRef, AssetType};
use crate::priority::TriggerType;
use crate::priority::item_status::{ItemEvent, ItemStatus};
use crate::store::common::t;
use crate::store::{ClaimedItem, Demand, EnqueueAction, EnqueuedItem, StoreError, StoreResult};

/// Statement texts shared by both implementations. Parameters are `$1`, `$2`, … on both engines.
pub(crate) mod sql {
    /// The claim's first read (an engine appends its row lock).
    macro_rules! claim_read {
        () => {
            "SELECT status, claim_token, enqueued_at FROM priority_items WHERE id = $1"
        };
    }
    pub(crate) use claim_read;

    /// Expires a claimable item past its validity: `$1` now, `$2` id, `$3` the cutoff.
    pub(crate) const EXPIRE_AT_CLAIM: &str = "UPDATE priority_items SET status = 'expired', \
           claim_token = NULL, claim_expires_at = NULL, dequeued_at = $1 \
         WHERE id = $2 AND enqueued_at <= $3 AND ((status = 'pending' AND next_run_at <= $1) \
                                               OR (status = 'running' AND claim_expires_at <= $1)) \
         RETURNING id";

    /// Claims or takes over: `$1` token, `$2` now, `$3` lease end, `$4` id.
    pub(crate) const CLAIM: &str = "UPDATE priority_items SET status = 'running', claim_token = $1, \
           claimed_at = $2, claim_expires_at = $3 \
         WHERE id = $4 AND ((status = 'pending' AND next_run_at <= $2) \
                         OR (status = 'running' AND claim_expires_at <= $2)) \
         RETURNING *";

    /// Sets an undecodable claimed item aside: `$1` now, `$2` result, `$3` reason, `$4` id.
    pub(crate) const SET_ASIDE: &str = "UPDATE priority_items SET status = 'failed', \
           claim_token = NULL, claim_expires_at = NULL, dequeued_at = $1, result = $2, \
           failure_reason = $3 WHERE id = $4 AND status = 'running'";

    /// An audit fact of a trigger or an operator.
    pub(crate) const AUDIT: &str = "INSERT INTO priority_item_events \
           (item_id, kind, trigger_type, source, operator, reason, result, at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

    /// An audit fact of a system transition: `$1` item, `$2` kind, `$3` reason, `$4` result,
    /// `$5` now, `$6` instance, `$7` claim fingerprint; its trigger type and source are the
    /// item's latest trigger, read from the item row in the same statement
    /// (D-audit-system-facts-trigger).
    pub(crate) const AUDIT_SYSTEM: &str = "INSERT INTO priority_item_events \
           (item_id, kind, trigger_type, source, reason, result, at, actor, claim_fingerprint) \
         SELECT id, $2, last_trigger_type, last_trigger_source, $3, $4, $5, $6, $7 \
         FROM priority_items WHERE id = $1";

    /// A card's snapshot, its shop included (`$active` the engine's active-binding test).
    macro_rules! snapshot_card {
        ($($active:tt)*) => {
            concat!(
                "SELECT c.iccid, c.shop_id, b.device_no FROM cards c \
                 LEFT JOIN bindings b ON b.iccid = c.iccid AND ",
                $($active)*,
                " WHERE c.iccid = $1"
            )
        };
    }
    pub(crate) use snapshot_card;

    /// A device's cards with an active binding.
    macro_rules! snapshot_device {
        ($($active:tt)*) => {
            concat!(
                "SELECT c.iccid, c.shop_id, b.device_no FROM bindings b \
                 JOIN cards c ON c.iccid = b.iccid WHERE b.device_no = $1 AND ",
                $($active)*,
                " ORDER BY c.iccid"
            )
        };
    }
    pub(crate) use snapshot_device;

    /// A device's own shop.
    pub(crate) const DEVICE_SHOP: &str = "SELECT shop_id FROM devices WHERE device_no = $1";

    /// Whether shop `$2` lies under shop `$1`.
    pub(crate) const SHOP_IN_TREE: &str = "SELECT CAST(1 AS BIGINT) FROM shop_closure \
         WHERE ancestor_id = $1 AND descendant_id = $2";

    /// The item a trigger event was applied to for a card and task type.
    pub(crate) const SEEN: &str = "SELECT item_id FROM priority_trigger_events \
         WHERE event_id = $1 AND iccid = $2 AND task_type = $3";

    /// The active item of a card and task type.
    pub(crate) const ACTIVE: &str = "SELECT id FROM priority_items WHERE iccid = $1 \
         AND task_type = $2 AND status IN ('pending', 'running')";

    /// Enqueue-or-merge on the partial unique index; `$14` is the trigger's source, kept as the
    /// item's latest (`last_trigger_source`) beside its latest trigger type.
    pub(crate) const UPSERT: &str = "INSERT INTO priority_items (iccid, task_type, asset_type, \
           asset_id, device_no, shop_id, status, trigger_type, last_trigger_type, trigger_count, \
           enqueued_at, last_triggered_at, attempts, max_attempts, next_run_at, operator, reason, \
           retriggered_from, last_trigger_source) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, 1, $9, $9, 0, $10, $9, $11, $12, $13, $14) \
         ON CONFLICT (iccid, task_type) WHERE status IN ('pending', 'running') DO UPDATE SET \
           trigger_count = priority_items.trigger_count + 1, \
           last_triggered_at = excluded.last_triggered_at, \
           last_trigger_type = excluded.last_trigger_type, \
           last_trigger_source = excluded.last_trigger_source \
         RETURNING id, trigger_count";

    /// Adds a source to an item's set.
    pub(crate) const ADD_SOURCE: &str = "INSERT INTO priority_item_sources (item_id, source) \
         VALUES ($1, $2) ON CONFLICT (item_id, source) DO NOTHING";

    /// Remembers a trigger event; moves it only from the ended item `$6`.
    pub(crate) const REMEMBER: &str = "INSERT INTO priority_trigger_events \
           (event_id, iccid, task_type, item_id, at) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (event_id, iccid, task_type) DO UPDATE SET item_id = excluded.item_id, \
           at = excluded.at \
         WHERE priority_trigger_events.item_id = $6";
}

/// An audit fact of a system transition (claim, takeover, retry, failure, complete, expire,
/// set-aside): no operator, but the acting `instance` and the fingerprint of the claim `token`
/// involved (so a takeover is traceable; never the token itself); its trigger type and source are the
/// item's latest trigger, which [`sql::AUDIT_SYSTEM`] reads from the item row.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SystemFact<'a> {
    pub item_id: i64,
    pub kind: &'a str,
    pub instance: &'a str,
    pub token: Option<&'a str>,
    pub reason: Option<&'a str>,
    pub result: Option<&'a str>,
    pub now: Timestamp,
}

/// An audit fact of a trigger or an operator.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fact<'a> {
    pub item_id: i64,
    pub kind: &'a str,
    pub trigger_type: Option<&'a str>,
    pub source: Option<&'a str>,
    pub operator: Option<&'a str>,
    pub reason: Option<&'a str>,
    pub result: Option<&'a str>,
    pub now: Timestamp,
}

/// The row a claim read first.
#[derive(Debug, Clone)]
pub(crate) struct BeforeClaim {
    pub status: String,
    pub claim_token: Option<String>,
    /// Stored text (fixed-width RFC 3339).
    pub enqueued_at: String,
}

/// What the claim's `UPDATE … RETURNING *` gave back.
#[derive(Debug, Clone)]
pub(crate) enum ClaimedRow {
    /// The row decodes.
    Row {
        iccid: String,
        task_type: String,
        attempts: i64,
        max_attempts: i64,
    },
    /// The row does not decode: why (`common::undecodable_item`).
    Undecodable(String),
}

/// The statements of a claim.
pub(crate) trait ClaimStatements {
    /// [`sql::claim_read!`], with the engine's row lock (skipping a row another transaction
    /// holds, which then reads as `None`).
    async fn before_claim(&mut self, id: i64) -> StoreResult<Option<BeforeClaim>>;
    /// [`sql::EXPIRE_AT_CLAIM`]: whether it expired the item.
    async fn expire_at_claim(&mut self, id: i64, now: &str, cutoff: &str) -> StoreResult<bool>;
    /// [`sql::CLAIM`].
    async fn claim_row(
        &mut self,
        id: i64,
        token: &str,
        now: &str,
        lease_end: &str,
    ) -> StoreResult<Option<ClaimedRow>>;
    /// [`sql::SET_ASIDE`].
    async fn set_aside(
        &mut self,
        id: i64,
        now: &str,
        result: &str,
        reason: &str,
    ) -> StoreResult<()>;
    /// [`sql::AUDIT_SYSTEM`].
    async fn audit_system(&mut self, fact: SystemFact<'_>) -> StoreResult<()>;
}

/// The result of an `expire` audit fact.
pub(crate) const VALIDITY_PASSED: &str = "validity period passed";

/// Claims item `id` (or takes it over after a lapsed lease). An item enqueued at or before
/// `expired_before` is past its validity: it is expired here, with its audit fact, instead of being
/// handed out (the expiry job may not have run yet). `None`: not claimable.
/// Audit facts name `instance` and the fingerprint of the claim token (the new one; on an expiry
/// the lapsed claim's, if any).
/// An item whose row cannot be decoded is set aside as failed instead, and its reason returned
/// second; the caller logs it once committed.
pub(crate) async fn claim<S: ClaimStatements>(
    s: &mut S,
    instance: &str,
    id: i64,
    token: &str,
    now: Timestamp,
    lease: Duration,
    expired_before: Option<Timestamp>,
) -> StoreResult<(Option<ClaimedItem>, Option<String>)> {
    // The row is locked from this read on (PostgreSQL), so the status, the lapsed token and the
    // claim/takeover decision below are about the row the updates then change. A row another
    // transaction holds (another instance claiming it, a merge, a finish, a close) is skipped:
    // not claimable now; the next due read finds it again if it still is (D-poll-postgres-concurrent-writes).
    let Some(before) = s.before_claim(id).await? else {
        return Ok((None, None));
    };
    let Some(status) = ItemStatus::parse(&before.status) else {
        return Ok((None, None));
    };
    let event = if status == ItemStatus::Running {
        ItemEvent::TakeOver
    } else {
        ItemEvent::Claim
    };
    if status.transition(event).is_err() {
        return Ok((None, None));
    }
    let now_text = t(now);
    // Timestamps are stored as fixed-width RFC 3339 text, so this compares as the SQL does; an
    // item enqueued after the cutoff cannot be past its validity, and the common claim skips
    // the expiring statement (one statement fewer, D-priority-validity-24h).
    if let Some(cutoff) = expired_before.map(t).filter(|c| before.enqueued_at <= *c)
        && s.expire_at_claim(id, &now_text, &cutoff).await?
    {
        status
            .transition(ItemEvent::Expire)
            .map_err(|e| StoreError::Conflict(e.to_string()))?;
        s.audit_system(SystemFact {
            item_id: id,
            kind: "expire",
            instance,
            token: before.claim_token.as_deref(),
            reason: None,
            result: Some(VALIDITY_PASSED),
            now,
        })
        .await?;
        return Ok((None, None));
    }
    let Some(row) = s
        .claim_row(id, token, &now_text, &t(now.plus(lease)))
        .await?
    else {
        return Ok((None, None));
    };
    let (iccid, task_type, attempts, max_attempts) = match row {
        ClaimedRow::Row {
            iccid,
            task_type,
            attempts,
            max_attempts,
        } => (iccid, task_type, attempts, max_attempts),
        ClaimedRow::Undecodable(reason) => {
            s.set_aside(
                id,
                &now_text,
                crate::store::common::UNDECODABLE_ROW,
                &reason,
            )
            .await?;
            s.audit_system(SystemFact {
                item_id: id,
                kind: "fail_dequeue",
                instance,
                token: Some(token),
                reason: Some(&reason),
                result: Some(crate::store::common::UNDECODABLE_ROW),
                now,
            })
            .await?;
            return Ok((None, Some(reason)));
        }
    };
    let took_over = event == ItemEvent::TakeOver;
    s.audit_system(SystemFact {
        item_id: id,
        kind: "claim",
        instance,
        token: Some(token),
        reason: None,
        result: Some(if took_over {
            "taken_over_after_lease"
        } else {
            "claimed"
        }),
        now,
    })
    .await?;
    Ok((
        Some(ClaimedItem {
            id,
            iccid,
            task_type,
            token: token.to_owned(),
            attempts,
            max_attempts,
            took_over,
        }),
        None,
    ))
}

/// One card frozen at trigger time.
#[derive(Debug, Clone)]
pub(crate) struct CardTarget {
    pub iccid: String,
    pub shop_id: String,
    pub device_no: Option<String>,
    pub asset: AssetRef,
}

/// One row of [`sql::UPSERT`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Upsert<'a> {
    pub target: &'a CardTarget,
    pub task_type: &'a str,
    pub trigger_type: &'a str,
    pub source: &'a str,
    pub now: &'a str,
    pub operator: Option<&'a str>,
    pub reason: Option<&'a str>,
    pub retriggered_from: Option<i64>,
}

/// The statements of an enqueue-or-merge.
pub(crate) trait EnqueueStatements {
    /// [`sql::snapshot_card!`] or [`sql::snapshot_device!`]: the asset's current cards.
    async fn snapshot(&mut self, asset: &AssetRef) -> StoreResult<Vec<CardTarget>>;
    /// [`sql::DEVICE_SHOP`].
    async fn device_shop(&mut self, device_no: &str) -> StoreResult<Option<String>>;
    /// [`sql::SHOP_IN_TREE`].
    async fn shop_in_tree(&mut self, root: &str, shop_id: &str) -> StoreResult<bool>;
    /// [`sql::SEEN`].
    async fn seen(
        &mut self,
        event_id: &str,
        iccid: &str,
        task_type: &str,
    ) -> StoreResult<Option<i64>>;
    /// [`sql::ACTIVE`].
    async fn active(&mut self, iccid: &str, task_type: &str) -> StoreResult<Option<i64>>;
    /// [`sql::UPSERT`]: the item's id and its trigger count (1: created).
    async fn upsert(&mut self, row: Upsert<'_>) -> StoreResult<(i64, i64)>;
    /// [`sql::ADD_SOURCE`].
    async fn add_source(&mut self, item_id: i64, source: &str) -> StoreResult<()>;
    /// [`sql::REMEMBER`]: rows written (1, or 0 when a concurrent enqueue wrote it since).
    async fn remember(
        &mut self,
        demand: &Demand,
        iccid: &str,
        task_type: &str,
        item_id: i64,
        now: &str,
        previous_item: Option<i64>,
    ) -> StoreResult<u64>;
    /// [`sql::AUDIT`].
    async fn audit(&mut self, fact: Fact<'_>) -> StoreResult<()>;
}

/// Whether `shop_id` lies in `scope`.
pub(crate) async fn shop_in_scope<S: EnqueueStatements>(
    s: &mut S,
    scope: &Scope,
    shop_id: &str,
) -> StoreResult<bool> {
    match scope {
        Scope::All => Ok(true),
        Scope::ShopTree(root) => s.shop_in_tree(root, shop_id).await,
    }
}

/// A manual enqueue of `asset` within `scope` (`NotFound` outside it).
pub(crate) async fn manual<S: EnqueueStatements>(
    s: &mut S,
    scope: &Scope,
    asset: &AssetRef,
    demand: &Demand,
    now: Timestamp,
) -> StoreResult<Vec<EnqueuedItem>> {
    // A card's snapshot is its own row, shop included: one statement fewer on the hot path of
    // a manual poll (D-writer-syncer-thread); a device has a shop of its own, read first.
    let targets = match asset.asset_type {
        AssetType::Card => {
            let targets = s.snapshot(asset).await?;
            let shop = targets.first().ok_or(StoreError::NotFound)?;
            if !shop_in_scope(s, scope, &shop.shop_id).await? {
                return Err(StoreError::NotFound);
            }
            targets
        }
        AssetType::Device => {
            let shop = s
                .device_shop(&asset.asset_id)
                .await?
                .ok_or(StoreError::NotFound)?;
            if !shop_in_scope(s, scope, &shop).await? {
                return Err(StoreError::NotFound);
            }
            // A device may hold a card of a shop outside the caller's tree (a binding joins any
            // card and device): that card is not the caller's to poll.
            let bound = s.snapshot(asset).await?;
            let any_bound = !bound.is_empty();
            let mut targets = Vec::with_capacity(bound.len());
            for card in bound {
                if shop_in_scope(s, scope, &card.shop_id).await? {
                    targets.push(card);
                }
            }
            if targets.is_empty() && any_bound {
                return Err(StoreError::Conflict(
                    "none of the device's actively bound cards is in the caller's shops".into(),
                ));
            }
            targets
        }
    };
    if targets.is_empty() {
        return Err(StoreError::Conflict(
            "the asset has no card with an active binding".into(),
        ));
    }
    enqueue(s, &targets, demand, now, None).await
}

/// Enqueue-or-merge of one demand for every target card and task type.
///
/// - A trigger event already applied to this card and task type is a replay: it changes nothing
///   and only leaves a `merge` audit fact with result `replayed` on the active item. Except a
///   manual enqueue whose event id's item has since ended: that is a new request. With no active
///   item it creates one whose `enqueue` fact says `created_after_end,previous_item=N`; with
///   another item active (a later demand) it merges into that one, its `merge` fact saying
///   `merged_after_end,previous_item=N` (D-manual-event-id-after-item-ended; every
///   manual enqueue is recorded, suppression is the active item's merge).
/// - Otherwise `INSERT … ON CONFLICT` on the partial unique index: a new pending item, or a
///   merge (trigger count + 1, last trigger time and type, source added to the set).
///
/// Several writers at once (PostgreSQL, D-poll-postgres-concurrent-writes): the partial unique index decides create or
/// merge (a concurrent creator of the same card and task type waits on the index, then merges);
/// the upsert locks the active item, so everything after it about this card and task type is
/// serialized. Pairs are upserted in (ICCID, task type) order, whatever order the demand lists
/// them in, so two enqueues never lock two items in opposite orders; the answer keeps the
/// demand's order. The replay check is a read before the upsert: if the trigger event row it
/// found missing (or found pointing at an ended item) has changed by the time this transaction
/// writes it, a concurrent enqueue of the same event won, and the transition is run again
/// ([`StoreError::Raced`]), which then sees the replay.
pub(crate) async fn enqueue<S: EnqueueStatements>(
    s: &mut S,
    targets: &[CardTarget],
    demand: &Demand,
    now: Timestamp,
    retriggered_from: Option<i64>,
) -> StoreResult<Vec<EnqueuedItem>> {
    let trig = demand.trigger_type.as_str();
    let now_text = t(now);
    let mut pairs: Vec<(usize, &CardTarget, &String)> = targets
        .iter()
        .flat_map(|target| demand.task_types.iter().map(move |tt| (target, tt)))
        .enumerate()
        .map(|(n, (target, tt))| (n, target, tt))
        .collect();
    pairs.sort_by(|a, b| (&a.1.iccid, a.2).cmp(&(&b.1.iccid, b.2)));
    let mut slots: Vec<Option<EnqueuedItem>> = pairs.iter().map(|_| None).collect();
    let fact = |item_id: i64, kind: &'static str, result: &'static str| Fact {
        item_id,
        kind,
        trigger_type: Some(trig),
        source: Some(&demand.source),
        operator: demand.operator.as_deref(),
        reason: demand.reason.as_deref(),
        result: Some(result),
        now,
    };
    for (slot, target, task_type) in pairs {
        let seen = s.seen(&demand.event_id, &target.iccid, task_type).await?;
        // The item the event was applied to, when that item has ended and this manual request
        // is therefore new; with the active item the upsert must then find (`None`: none).
        let mut previous_item: Option<i64> = None;
        let mut expected_active: Option<i64> = None;
        if let Some(first_item) = seen {
            let active = s.active(&target.iccid, task_type).await?;
            // A replay only of the item the event was applied to: another item active now is
            // a later demand the event never reached (D-manual-event-id-after-item-ended).
            if active != Some(first_item) && demand.trigger_type == TriggerType::ManualTrigger {
                previous_item = Some(first_item);
                expected_active = active;
            } else {
                if let Some(active) = active {
                    s.audit(fact(active, "merge", "replayed")).await?;
                }
                slots[slot] = Some(EnqueuedItem {
                    item_id: active.unwrap_or(first_item),
                    iccid: target.iccid.clone(),
                    task_type: task_type.clone(),
                    action: EnqueueAction::Replayed,
                });
                continue;
            }
        }
        let (item_id, trigger_count) = s
            .upsert(Upsert {
                target,
                task_type,
                trigger_type: trig,
                source: &demand.source,
                now: &now_text,
                operator: demand.operator.as_deref(),
                reason: demand.reason.as_deref(),
                retriggered_from,
            })
            .await?;
        let created = trigger_count == 1;
        let as_read = match expected_active {
            None => created,
            Some(active) => !created && item_id == active,
        };
        if previous_item.is_some() && !as_read {
            // The active item is no longer the one read above (a concurrent enqueue created
            // one, or that one ended and another began): start over with what is there now.
            return Err(StoreError::Raced(
                "a concurrent enqueue changed the active item",
            ));
        }
        s.add_source(item_id, &demand.source).await?;
        // Remember the event: new, or moved from the ended item `seen` named to this one. The
        // `WHERE` only lets that exact row be moved; a row a concurrent enqueue of the same
        // event wrote since the read above changes nothing here, and this run starts over.
        let remembered = s
            .remember(
                demand,
                &target.iccid,
                task_type,
                item_id,
                &now_text,
                previous_item,
            )
            .await?;
        if remembered != 1 {
            return Err(StoreError::Raced(
                "a concurrent enqueue applied the same trigger event",
            ));
        }
        let kind = match (created, retriggered_from.is_some()) {
            (true, true) => "retrigger",
            (true, false) => "enqueue",
            (false, _) => "merge",
        };
        let result = match (created, previous_item) {
            (true, Some(prev)) => format!("created_after_end,previous_item={prev}"),
            (false, Some(prev)) => format!("merged_after_end,previous_item={prev}"),
            (true, None) => "created".to_owned(),
            (false, None) => "merged".to_owned(),
        };
        s.audit(Fact {
            result: Some(&result),
            ..fact(item_id, kind, "")
        })
        .await?;
        slots[slot] = Some(EnqueuedItem {
            item_id,
            iccid: target.iccid.clone(),
            task_type: task_type.clone(),
            action: if created {
                EnqueueAction::Created
            } else {
                EnqueueAction::Merged
            },
        });
    }
    Ok(slots.into_iter().flatten().collect())
}
