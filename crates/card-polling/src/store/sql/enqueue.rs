//! Snapshot of an asset's current cards and enqueue-or-merge, always inside the caller's
//! transaction (the one that commits the business fact).

use sqlx::Row;

use rakuten_types::Timestamp;

use super::domain::asset_shop;
use super::{Conn, dialect, t};
use crate::domain::Scope;
use crate::domain::asset::{AssetRef, AssetType};
use crate::priority::item_status::ItemStatus;
use crate::priority::{MAX_ATTEMPTS, TriggerType};
use crate::store::{Demand, EnqueueAction, EnqueuedItem, StoreError, StoreResult};

/// One card frozen at trigger time.
#[derive(Debug, Clone)]
pub(crate) struct CardTarget {
    pub iccid: String,
    pub shop_id: String,
    pub device_no: Option<String>,
    pub asset: AssetRef,
}

/// The asset's current cards: a card is itself; a device is every card with an active binding.
/// The device's reported slot is never read. A missing asset has no cards.
pub(crate) async fn snapshot_asset(
    conn: &mut Conn,
    asset: &AssetRef,
) -> StoreResult<Vec<CardTarget>> {
    let sql = match asset.asset_type {
        AssetType::Card => concat!(
            "SELECT c.iccid, c.shop_id, b.device_no FROM cards c \
             LEFT JOIN bindings b ON b.iccid = c.iccid AND ",
            dialect::active_binding!(),
            " WHERE c.iccid = $1"
        ),
        AssetType::Device => concat!(
            "SELECT c.iccid, c.shop_id, b.device_no FROM bindings b \
             JOIN cards c ON c.iccid = b.iccid WHERE b.device_no = $1 AND ",
            dialect::active_binding!(),
            " ORDER BY c.iccid"
        ),
    };
    let rows = sqlx::query(sql)
        .bind(&asset.asset_id)
        .fetch_all(conn)
        .await?;
    rows.iter()
        .map(|r| {
            Ok(CardTarget {
                iccid: r.try_get("iccid")?,
                shop_id: r.try_get("shop_id")?,
                device_no: r.try_get("device_no")?,
                asset: asset.clone(),
            })
        })
        .collect()
}

/// Appends one audit fact.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn audit(
    conn: &mut Conn,
    item_id: i64,
    kind: &str,
    trigger_type: Option<&str>,
    source: Option<&str>,
    operator: Option<&str>,
    reason: Option<&str>,
    result: Option<&str>,
    now: Timestamp,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO priority_item_events (item_id, kind, trigger_type, source, operator, reason, result, at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(item_id)
    .bind(kind)
    .bind(trigger_type)
    .bind(source)
    .bind(operator)
    .bind(reason)
    .bind(result)
    .bind(t(now))
    .execute(conn)
    .await?;
    Ok(())
}

/// An audit fact of a system transition (claim, takeover, retry, failure, complete, expire,
/// set-aside): no trigger, source or operator, but the acting `instance` and the fingerprint of
/// the claim `token` involved (issue #14 item 6; never the token itself).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn audit_system(
    conn: &mut Conn,
    item_id: i64,
    kind: &str,
    instance: &str,
    token: Option<&str>,
    reason: Option<&str>,
    result: Option<&str>,
    now: Timestamp,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO priority_item_events (item_id, kind, reason, result, at, actor, claim_fingerprint) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(item_id)
    .bind(kind)
    .bind(reason)
    .bind(result)
    .bind(t(now))
    .bind(instance)
    .bind(token.map(crate::instance::claim_fingerprint))
    .execute(conn)
    .await?;
    Ok(())
}

/// Enqueue-or-merge of one demand for every target card and task type.
///
/// - A trigger event already applied to this card and task type is a replay: it changes nothing
///   and only leaves a `merge` audit fact with result `replayed` on the active item. Except a
///   manual enqueue whose event id's item has since ended (no active item): that is a new
///   request, it creates an item whose `enqueue` fact says `created_after_end,previous_item=N`
///   (issue #14 item 6, D-scale2-2; every manual enqueue is recorded, suppression is the active
///   item's merge).
/// - Otherwise `INSERT … ON CONFLICT` on the partial unique index: a new pending item, or a
///   merge (trigger count + 1, last trigger time and type, source added to the set).
///
/// Several writers at once (PostgreSQL, D-pg-9): the partial unique index decides create or
/// merge (a concurrent creator of the same card and task type waits on the index, then merges);
/// the upsert locks the active item, so everything after it about this card and task type is
/// serialized. Pairs are upserted in (ICCID, task type) order, whatever order the demand lists
/// them in, so two enqueues never lock two items in opposite orders; the answer keeps the
/// demand's order. The replay check is a read before the upsert: if the trigger event row it
/// found missing (or found pointing at an ended item) has changed by the time this transaction
/// writes it, a concurrent enqueue of the same event won, and the transition is run again
/// ([`StoreError::Raced`]), which then sees the replay.
pub(crate) async fn enqueue(
    tx: &mut Conn,
    targets: &[CardTarget],
    demand: &Demand,
    now: Timestamp,
    retriggered_from: Option<i64>,
) -> StoreResult<Vec<EnqueuedItem>> {
    let trig = demand.trigger_type.as_str();
    let mut pairs: Vec<(usize, &CardTarget, &String)> = targets
        .iter()
        .flat_map(|target| demand.task_types.iter().map(move |tt| (target, tt)))
        .enumerate()
        .map(|(n, (target, tt))| (n, target, tt))
        .collect();
    pairs.sort_by(|a, b| (&a.1.iccid, a.2).cmp(&(&b.1.iccid, b.2)));
    let mut slots: Vec<Option<EnqueuedItem>> = pairs.iter().map(|_| None).collect();
    for (slot, target, task_type) in pairs {
        let out = &mut slots[slot];
        {
            let seen: Option<i64> = sqlx::query_scalar(
                "SELECT item_id FROM priority_trigger_events WHERE event_id = $1 AND iccid = $2 AND task_type = $3",
            )
            .bind(&demand.event_id)
            .bind(&target.iccid)
            .bind(task_type)
            .fetch_optional(&mut *tx)
            .await?;
            let mut previous_item: Option<i64> = None;
            let mut replay: Option<(i64, Option<i64>)> = None;
            if let Some(first_item) = seen {
                let active: Option<i64> = sqlx::query_scalar(
                    "SELECT id FROM priority_items WHERE iccid = $1 AND task_type = $2 \
                     AND status IN ('pending', 'running')",
                )
                .bind(&target.iccid)
                .bind(task_type)
                .fetch_optional(&mut *tx)
                .await?;
                if active.is_none() && demand.trigger_type == TriggerType::ManualTrigger {
                    previous_item = Some(first_item);
                } else {
                    replay = Some((first_item, active));
                }
            }
            if let Some((first_item, active)) = replay {
                if let Some(active) = active {
                    audit(
                        tx,
                        active,
                        "merge",
                        Some(trig),
                        Some(&demand.source),
                        demand.operator.as_deref(),
                        demand.reason.as_deref(),
                        Some("replayed"),
                        now,
                    )
                    .await?;
                }
                *out = Some(EnqueuedItem {
                    item_id: active.unwrap_or(first_item),
                    iccid: target.iccid.clone(),
                    task_type: task_type.clone(),
                    action: EnqueueAction::Replayed,
                });
                continue;
            }
            let row = sqlx::query(
                "INSERT INTO priority_items (iccid, task_type, asset_type, asset_id, device_no, shop_id, \
                   status, trigger_type, last_trigger_type, trigger_count, enqueued_at, last_triggered_at, \
                   attempts, max_attempts, next_run_at, operator, reason, retriggered_from) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, 1, $9, $9, 0, $10, $9, $11, $12, $13) \
                 ON CONFLICT (iccid, task_type) WHERE status IN ('pending', 'running') DO UPDATE SET \
                   trigger_count = priority_items.trigger_count + 1, \
                   last_triggered_at = excluded.last_triggered_at, \
                   last_trigger_type = excluded.last_trigger_type \
                 RETURNING id, trigger_count",
            )
            .bind(&target.iccid)
            .bind(task_type)
            .bind(target.asset.asset_type.as_str())
            .bind(&target.asset.asset_id)
            .bind(&target.device_no)
            .bind(&target.shop_id)
            .bind(ItemStatus::Pending.as_str())
            .bind(trig)
            .bind(t(now))
            .bind(MAX_ATTEMPTS)
            .bind(&demand.operator)
            .bind(&demand.reason)
            .bind(retriggered_from)
            .fetch_one(&mut *tx)
            .await?;
            let item_id: i64 = row.try_get("id")?;
            let created = row.try_get::<i64, _>("trigger_count")? == 1;
            if previous_item.is_some() && !created {
                // The read above found no active item, but a concurrent enqueue created one since:
                // in either order this event would have been that item's replay, so start over.
                return Err(StoreError::Raced(
                    "a concurrent enqueue created the active item",
                ));
            }
            sqlx::query(
                "INSERT INTO priority_item_sources (item_id, source) VALUES ($1, $2) \
                 ON CONFLICT (item_id, source) DO NOTHING",
            )
            .bind(item_id)
            .bind(&demand.source)
            .execute(&mut *tx)
            .await?;
            // Remember the event: new, or moved from the ended item `seen` named to this one. The
            // `WHERE` only lets that exact row be moved; a row a concurrent enqueue of the same
            // event wrote since the read above changes nothing here, and this run starts over.
            let remembered = sqlx::query(
                "INSERT INTO priority_trigger_events (event_id, iccid, task_type, item_id, at) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (event_id, iccid, task_type) DO UPDATE SET item_id = excluded.item_id, at = excluded.at \
                 WHERE priority_trigger_events.item_id = $6",
            )
            .bind(&demand.event_id)
            .bind(&target.iccid)
            .bind(task_type)
            .bind(item_id)
            .bind(t(now))
            .bind(previous_item)
            .execute(&mut *tx)
            .await?;
            if remembered.rows_affected() != 1 {
                return Err(StoreError::Raced(
                    "a concurrent enqueue applied the same trigger event",
                ));
            }
            let kind = match (created, retriggered_from.is_some()) {
                (true, true) => "retrigger",
                (true, false) => "enqueue",
                (false, _) => "merge",
            };
            audit(
                tx,
                item_id,
                kind,
                Some(trig),
                Some(&demand.source),
                demand.operator.as_deref(),
                demand.reason.as_deref(),
                Some(&match (created, previous_item) {
                    (true, Some(prev)) => format!("created_after_end,previous_item={prev}"),
                    (true, None) => "created".to_owned(),
                    (false, _) => "merged".to_owned(),
                }),
                now,
            )
            .await?;
            *out = Some(EnqueuedItem {
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
    }
    Ok(slots.into_iter().flatten().collect())
}

/// Whether `shop_id` lies in `scope`.
pub(crate) async fn shop_in_scope(
    conn: &mut Conn,
    scope: &Scope,
    shop_id: &str,
) -> StoreResult<bool> {
    match scope {
        Scope::All => Ok(true),
        Scope::ShopTree(root) => Ok(sqlx::query_scalar::<_, i64>(
            "SELECT CAST(1 AS BIGINT) FROM shop_closure WHERE ancestor_id = $1 AND descendant_id = $2",
        )
        .bind(root)
        .bind(shop_id)
        .fetch_optional(conn)
        .await?
        .is_some()),
    }
}

pub(crate) async fn manual(
    tx: &mut Conn,
    scope: &Scope,
    asset: &AssetRef,
    demand: &Demand,
    now: Timestamp,
) -> StoreResult<Vec<EnqueuedItem>> {
    // A card's snapshot is its own row, shop included: one statement fewer on the hot path of
    // a manual poll (D-scale8-1); a device has a shop of its own, read first.
    let targets = match asset.asset_type {
        AssetType::Card => {
            let targets = snapshot_asset(tx, asset).await?;
            let shop = targets.first().ok_or(StoreError::NotFound)?;
            if !shop_in_scope(tx, scope, &shop.shop_id).await? {
                return Err(StoreError::NotFound);
            }
            targets
        }
        AssetType::Device => {
            let shop = asset_shop(tx, asset).await?.ok_or(StoreError::NotFound)?;
            if !shop_in_scope(tx, scope, &shop).await? {
                return Err(StoreError::NotFound);
            }
            snapshot_asset(tx, asset).await?
        }
    };
    if targets.is_empty() {
        return Err(StoreError::Conflict(
            "the asset has no card with an active binding".into(),
        ));
    }
    enqueue(tx, &targets, demand, now, None).await
}

pub(crate) async fn retrigger(
    tx: &mut Conn,
    scope: &Scope,
    item_id: i64,
    operator: &str,
    reason: &str,
    now: Timestamp,
) -> StoreResult<EnqueuedItem> {
    // Locked (PostgreSQL): the retention job skips an item being retriggered, and a retrigger
    // waiting on an item the job is deleting finds it gone (404), rather than meeting the foreign
    // key of `retriggered_from` at its insert (D-scale8-3).
    let row = sqlx::query(concat!(
        "SELECT iccid, task_type, asset_type, asset_id, shop_id, status FROM priority_items WHERE id = $1",
        dialect::lock_row!()
    ))
    .bind(item_id)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(StoreError::NotFound)?;
    let shop_id: String = row.try_get("shop_id")?;
    if !shop_in_scope(tx, scope, &shop_id).await? {
        return Err(StoreError::NotFound);
    }
    let status: String = row.try_get("status")?;
    if !matches!(
        ItemStatus::parse(&status),
        Some(ItemStatus::Failed | ItemStatus::Expired)
    ) {
        return Err(StoreError::Conflict(format!(
            "only failed or expired items can be retriggered (item is {status})"
        )));
    }
    let iccid: String = row.try_get("iccid")?;
    let asset_type: String = row.try_get("asset_type")?;
    let card = sqlx::query(concat!(
        "SELECT c.shop_id, b.device_no FROM cards c \
         LEFT JOIN bindings b ON b.iccid = c.iccid AND ",
        dialect::active_binding!(),
        " WHERE c.iccid = $1"
    ))
    .bind(&iccid)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or_else(|| StoreError::Conflict("the card no longer exists".into()))?;
    let target = CardTarget {
        iccid: iccid.clone(),
        shop_id: card.try_get("shop_id")?,
        device_no: card.try_get("device_no")?,
        asset: AssetRef {
            asset_type: AssetType::parse(&asset_type).unwrap_or(AssetType::Card),
            asset_id: row.try_get("asset_id")?,
        },
    };
    let demand = Demand {
        trigger_type: TriggerType::ManualTrigger,
        source: format!("retrigger:{item_id}"),
        event_id: format!("retrigger:{}", uuid::Uuid::now_v7()),
        operator: Some(operator.to_owned()),
        reason: Some(reason.to_owned()),
        task_types: vec![row.try_get("task_type")?],
    };
    let mut out = enqueue(tx, &[target], &demand, now, Some(item_id)).await?;
    out.pop()
        .ok_or_else(|| StoreError::Conflict("nothing enqueued".into()))
}
