//! Snapshot of an asset's current cards and enqueue-or-merge through sqlx, always inside the
//! caller's transaction (the one that commits the business fact); the decisions are
//! `store::hot`'s, written once for this and for SQLite's synchronous path (D-writer-sync-transitions).

use sqlx::Row;

use rakuten_types::Timestamp;

use super::{Conn, dialect, t};
use crate::domain::Scope;
use crate::domain::asset::{AssetRef, AssetType};
use crate::priority::item_status::ItemStatus;
use crate::priority::{MAX_ATTEMPTS, TriggerType};
use crate::store::hot::{self, CardTarget, Fact, SystemFact};
use crate::store::{Demand, EnqueuedItem, StoreError, StoreResult};

/// The hot transitions' statements (`store::hot`) through sqlx on this engine: PostgreSQL runs
/// every claim and enqueue through these; SQLite runs them here only inside its other
/// transitions (trigger-driven enqueues, retrigger), its manual enqueues and claims run on its
/// writer's thread (`store::sqlite_sync`, D-writer-sync-transitions).
pub(crate) struct Sqlx<'c>(pub &'c mut Conn);

impl hot::EnqueueStatements for Sqlx<'_> {
    async fn snapshot(&mut self, asset: &AssetRef) -> StoreResult<Vec<CardTarget>> {
        snapshot_asset(self.0, asset).await
    }

    async fn device_shop(&mut self, device_no: &str) -> StoreResult<Option<String>> {
        Ok(sqlx::query_scalar(hot::sql::DEVICE_SHOP)
            .bind(device_no)
            .fetch_optional(&mut *self.0)
            .await?)
    }

    async fn shop_in_tree(&mut self, root: &str, shop_id: &str) -> StoreResult<bool> {
        Ok(sqlx::query_scalar::<_, i64>(hot::sql::SHOP_IN_TREE)
            .bind(root)
            .bind(shop_id)
            .fetch_optional(&mut *self.0)
            .await?
            .is_some())
    }

    async fn seen(
        &mut self,
        event_id: &str,
        iccid: &str,
        task_type: &str,
    ) -> StoreResult<Option<i64>> {
        Ok(sqlx::query_scalar(hot::sql::SEEN)
            .bind(event_id)
            .bind(iccid)
            .bind(task_type)
            .fetch_optional(&mut *self.0)
            .await?)
    }

    async fn active(&mut self, iccid: &str, task_type: &str) -> StoreResult<Option<i64>> {
        Ok(sqlx::query_scalar(hot::sql::ACTIVE)
            .bind(iccid)
            .bind(task_type)
            .fetch_optional(&mut *self.0)
            .await?)
    }

    async fn upsert(&mut self, u: hot::Upsert<'_>) -> StoreResult<(i64, i64)> {
        Ok(sqlx::query_as(hot::sql::UPSERT)
            .bind(&u.target.iccid)
            .bind(u.task_type)
            .bind(u.target.asset.asset_type.as_str())
            .bind(&u.target.asset.asset_id)
            .bind(&u.target.device_no)
            .bind(&u.target.shop_id)
            .bind(ItemStatus::Pending.as_str())
            .bind(u.trigger_type)
            .bind(u.now)
            .bind(MAX_ATTEMPTS)
            .bind(u.operator)
            .bind(u.reason)
            .bind(u.retriggered_from)
            .bind(u.source)
            .fetch_one(&mut *self.0)
            .await?)
    }

    async fn add_source(&mut self, item_id: i64, source: &str) -> StoreResult<()> {
        sqlx::query(hot::sql::ADD_SOURCE)
            .bind(item_id)
            .bind(source)
            .execute(&mut *self.0)
            .await?;
        Ok(())
    }

    async fn remember(
        &mut self,
        demand: &Demand,
        iccid: &str,
        task_type: &str,
        item_id: i64,
        now: &str,
        previous_item: Option<i64>,
    ) -> StoreResult<u64> {
        Ok(sqlx::query(hot::sql::REMEMBER)
            .bind(&demand.event_id)
            .bind(iccid)
            .bind(task_type)
            .bind(item_id)
            .bind(now)
            .bind(previous_item)
            .execute(&mut *self.0)
            .await?
            .rows_affected())
    }

    async fn audit(&mut self, fact: Fact<'_>) -> StoreResult<()> {
        audit_fact(self.0, fact).await
    }
}

/// Appends one audit fact of a trigger or an operator.
pub(crate) async fn audit_fact(conn: &mut Conn, f: Fact<'_>) -> StoreResult<()> {
    sqlx::query(hot::sql::AUDIT)
        .bind(f.item_id)
        .bind(f.kind)
        .bind(f.trigger_type)
        .bind(f.source)
        .bind(f.operator)
        .bind(f.reason)
        .bind(f.result)
        .bind(t(f.now))
        .execute(conn)
        .await?;
    Ok(())
}

/// Appends one audit fact of a system transition (`hot::SystemFact`).
pub(crate) async fn system_fact(conn: &mut Conn, f: SystemFact<'_>) -> StoreResult<()> {
    sqlx::query(hot::sql::AUDIT_SYSTEM)
        .bind(f.item_id)
        .bind(f.kind)
        .bind(f.reason)
        .bind(f.result)
        .bind(t(f.now))
        .bind(f.instance)
        .bind(f.token.map(crate::instance::claim_fingerprint))
        .execute(conn)
        .await?;
    Ok(())
}

/// The asset's current cards: a card is itself; a device is every card with an active binding.
/// The device's reported slot is never read. A missing asset has no cards.
pub(crate) async fn snapshot_asset(
    conn: &mut Conn,
    asset: &AssetRef,
) -> StoreResult<Vec<CardTarget>> {
    let sql = match asset.asset_type {
        AssetType::Card => hot::sql::snapshot_card!(dialect::active_binding!()),
        AssetType::Device => hot::sql::snapshot_device!(dialect::active_binding!()),
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

/// Appends one audit fact of a trigger or an operator (positional form of [`audit_fact`]).
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
    audit_fact(
        conn,
        Fact {
            item_id,
            kind,
            trigger_type,
            source,
            operator,
            reason,
            result,
            now,
        },
    )
    .await
}

/// Appends one audit fact of a system transition (positional form of [`system_fact`]).
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
    system_fact(
        conn,
        SystemFact {
            item_id,
            kind,
            instance,
            token,
            reason,
            result,
            now,
        },
    )
    .await
}

/// Enqueue-or-merge through sqlx (`hot::enqueue`).
pub(crate) async fn enqueue(
    tx: &mut Conn,
    targets: &[CardTarget],
    demand: &Demand,
    now: Timestamp,
    retriggered_from: Option<i64>,
) -> StoreResult<Vec<EnqueuedItem>> {
    hot::enqueue(&mut Sqlx(tx), targets, demand, now, retriggered_from).await
}

/// A manual enqueue through sqlx (`hot::manual`).
pub(crate) async fn manual(
    tx: &mut Conn,
    scope: &Scope,
    asset: &AssetRef,
    demand: &Demand,
    now: Timestamp,
) -> StoreResult<Vec<EnqueuedItem>> {
    hot::manual(&mut Sqlx(tx), scope, asset, demand, now).await
}

/// Whether `shop_id` lies in `scope`.
pub(crate) async fn shop_in_scope(
    conn: &mut Conn,
    scope: &Scope,
    shop_id: &str,
) -> StoreResult<bool> {
    hot::shop_in_scope(&mut Sqlx(conn), scope, shop_id).await
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
    // key of `retriggered_from` at its insert (D-retrigger-predecessor-kept).
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
