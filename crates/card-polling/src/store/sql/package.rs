//! Package orders, payments, usage activation and the package poll ([`PackageStore`]).

use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use sqlx::Row;

use rakuten_types::Timestamp;

use super::{Conn, DbRow, SqlStore, dialect, map_constraint, t};
use crate::domain::asset::{AssetRef, AssetType};
use crate::domain::package::{OrderStatus, PACKAGE_PERIOD_DAYS, PackageKind, PaymentStatus};
use crate::priority::TriggerType;
use crate::store::{Demand, EnqueuedItem, OrderView, PackagePollOutcome, PackageState, PackageStore, PaymentCallback, PaymentOutcome, StoreError, StoreResult};
use super::assets::{asset_lock, asset_shop};
use super::enqueue::{self, snapshot_asset};

const PACKAGE_PERIOD: Duration = Duration::from_secs(PACKAGE_PERIOD_DAYS * 86_400);

fn order_from_row(row: &DbRow) -> StoreResult<OrderView> {
    let asset_type: String = row.try_get("asset_type")?;
    let kind: String = row.try_get("kind")?;
    let status: String = row.try_get("status")?;
    Ok(OrderView {
        id: row.try_get("id")?,
        asset: AssetRef {
            asset_type: AssetType::parse(&asset_type).unwrap_or(AssetType::Card),
            asset_id: row.try_get("asset_id")?,
        },
        kind: if kind == "addon" {
            PackageKind::Addon
        } else {
            PackageKind::Main
        },
        status: OrderStatus::parse(&status).unwrap_or(OrderStatus::Unpaid),
        payment_id: row.try_get("payment_id")?,
        created_at: super::rows::ts(row, "created_at")?,
    })
}

pub(crate) async fn order_create(
    tx: &mut Conn,
    id: &str,
    asset: &AssetRef,
    kind: PackageKind,
    now: Timestamp,
) -> StoreResult<OrderView> {
    if asset_shop(tx, asset).await?.is_none() {
        return Err(StoreError::UnknownAsset(format!(
            "unknown {} {}",
            asset.asset_type.as_str(),
            asset.asset_id
        )));
    }
    let row = sqlx::query(
        "INSERT INTO package_orders (id, asset_type, asset_id, kind, status, created_at) \
         VALUES ($1, $2, $3, $4, 'unpaid', $5) RETURNING *",
    )
    .bind(id)
    .bind(asset.asset_type.as_str())
    .bind(&asset.asset_id)
    .bind(kind.as_str())
    .bind(t(now))
    .fetch_one(&mut *tx)
    .await
    .map_err(|e| map_constraint(e, "order"))?;
    order_from_row(&row)
}

pub(crate) async fn payment_apply(
    tx: &mut Conn,
    cb: &PaymentCallback,
    task_types: &[String],
    now: Timestamp,
) -> StoreResult<PaymentOutcome> {
    // The order's row first (PostgreSQL, D-poll-postgres-concurrent-writes): a second callback for this order waits here
    // until the first commits, then sees it below as a replay or a settled order.
    let locked = sqlx::query(concat!(
        "SELECT * FROM package_orders WHERE id = $1",
        dialect::lock_row!()
    ))
    .bind(&cb.order_id)
    .fetch_optional(&mut *tx)
    .await?;
    // Idempotency by payment id: a repeated callback changes nothing and enqueues nothing. A
    // "replay" that says something else is not a replay: 409 naming both values.
    let seen = sqlx::query("SELECT * FROM package_orders WHERE payment_id = $1")
        .bind(&cb.payment_id)
        .fetch_optional(&mut *tx)
        .await?;
    if let Some(row) = seen {
        let order = order_from_row(&row)?;
        if order.id != cb.order_id {
            return Err(StoreError::Conflict(format!(
                "payment {} was already applied to order {}, not order {}",
                cb.payment_id, order.id, cb.order_id
            )));
        }
        let settled_as = cb.status.order_status();
        if order.status != settled_as {
            return Err(StoreError::Conflict(format!(
                "payment {} was already applied with status {}, not {}",
                cb.payment_id,
                order.status.as_str(),
                settled_as.as_str()
            )));
        }
        let usage: Option<(String, String)> =
            sqlx::query_as("SELECT id, status FROM package_usages WHERE order_id = $1")
                .bind(&order.id)
                .fetch_optional(&mut *tx)
                .await?;
        return Ok(PaymentOutcome {
            order_id: order.id,
            status: order.status,
            replayed: true,
            usage_active: usage.as_ref().is_some_and(|u| u.1 != "pending"),
            usage_id: usage.map(|u| u.0),
            trigger_type: None,
            items: vec![],
        });
    }
    let order = locked.ok_or(StoreError::NotFound)?;
    let order = order_from_row(&order)?;
    let settled = sqlx::query(
        "UPDATE package_orders SET status = $1, payment_id = $2, settled_at = $3 \
         WHERE id = $4 AND status = 'unpaid'",
    )
    .bind(cb.status.order_status().as_str())
    .bind(&cb.payment_id)
    .bind(t(now))
    .bind(&order.id)
    .execute(&mut *tx)
    .await
    .map_err(|e| match e.as_database_error() {
        // The same payment id applied to another order by a concurrent callback since the read
        // above: run again, which answers the replay's 409 naming both orders.
        Some(db) if db.is_unique_violation() => {
            StoreError::Raced("a concurrent callback applied the same payment id")
        }
        _ => StoreError::from(e),
    })?;
    if settled.rows_affected() != 1 {
        return Err(StoreError::Conflict(format!(
            "order is already {}",
            order.status.as_str()
        )));
    }
    let mut out = PaymentOutcome {
        order_id: order.id.clone(),
        status: cb.status.order_status(),
        replayed: false,
        usage_id: None,
        usage_active: false,
        trigger_type: None,
        items: vec![],
    };
    if cb.status != PaymentStatus::Paid {
        // Failed or cancelled payments never enqueue.
        return Ok(out);
    }
    let asset = &order.asset;
    asset_lock(tx, asset).await?;
    let had_earlier: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM package_usages WHERE asset_type = $1 AND asset_id = $2)",
    )
    .bind(asset.asset_type.as_str())
    .bind(&asset.asset_id)
    .fetch_one(&mut *tx)
    .await?;
    let trigger = match order.kind {
        PackageKind::Main => {
            let has_active_main: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM package_usages WHERE asset_type = $1 AND asset_id = $2 \
                 AND kind = 'main' AND status = 'active')",
            )
            .bind(asset.asset_type.as_str())
            .bind(&asset.asset_id)
            .fetch_one(&mut *tx)
            .await?;
            (!has_active_main).then(|| TriggerType::for_main_activation(had_earlier))
        }
        PackageKind::Addon => Some(TriggerType::AddonActivated),
    };
    let usage_id = uuid::Uuid::now_v7().to_string();
    let active = trigger.is_some();
    sqlx::query(
        "INSERT INTO package_usages (id, order_id, asset_type, asset_id, kind, status, created_at, activated_at, ends_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(&usage_id)
    .bind(&order.id)
    .bind(asset.asset_type.as_str())
    .bind(&asset.asset_id)
    .bind(order.kind.as_str())
    .bind(if active { "active" } else { "pending" })
    .bind(t(now))
    .bind(active.then(|| t(now)))
    .bind(active.then(|| t(now.plus(PACKAGE_PERIOD))))
    .execute(&mut *tx)
    .await?;
    out.usage_id = Some(usage_id);
    out.usage_active = active;
    if let Some(trigger) = trigger {
        let targets = snapshot_asset(tx, asset).await?;
        let demand = Demand {
            trigger_type: trigger,
            source: format!("order:{}", order.id),
            event_id: format!("payment:{}", cb.payment_id),
            operator: None,
            reason: None,
            task_types: task_types.to_vec(),
        };
        out.items = enqueue::enqueue(tx, &targets, &demand, now, None).await?;
        out.trigger_type = Some(trigger);
    }
    Ok(out)
}

pub(crate) async fn usage_activate_queued(
    tx: &mut Conn,
    usage_id: &str,
    task_types: &[String],
    now: Timestamp,
) -> StoreResult<Vec<EnqueuedItem>> {
    // The asset's row first, as every package transition does (D-poll-postgres-concurrent-writes lock order).
    let owner: Option<(String, String)> =
        sqlx::query_as("SELECT asset_type, asset_id FROM package_usages WHERE id = $1")
            .bind(usage_id)
            .fetch_optional(&mut *tx)
            .await?;
    if let Some((asset_type, asset_id)) = &owner {
        let asset = AssetRef {
            asset_type: AssetType::parse(asset_type).unwrap_or(AssetType::Card),
            asset_id: asset_id.clone(),
        };
        asset_lock(tx, &asset).await?;
    }
    let hit: Option<(String, String)> = sqlx::query_as(
        "UPDATE package_usages SET status = 'active', activated_at = $1, ends_at = $2 \
         WHERE id = $3 AND status = 'pending' AND kind = 'main' RETURNING asset_type, asset_id",
    )
    .bind(t(now))
    .bind(t(now.plus(PACKAGE_PERIOD)))
    .bind(usage_id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((asset_type, asset_id)) = hit else {
        let exists: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM package_usages WHERE id = $1)")
                .bind(usage_id)
                .fetch_one(&mut *tx)
                .await?;
        return Err(if exists {
            StoreError::Conflict("usage record is not a pending main package".into())
        } else {
            StoreError::NotFound
        });
    };
    // The queued package takes over: the previous active main package ends now.
    sqlx::query(
        "UPDATE package_usages SET status = 'expired', ends_at = $1 WHERE asset_type = $2 AND asset_id = $3 \
         AND kind = 'main' AND status = 'active' AND id <> $4",
    )
    .bind(t(now))
    .bind(&asset_type)
    .bind(&asset_id)
    .bind(usage_id)
    .execute(&mut *tx)
    .await?;
    let asset = AssetRef {
        asset_type: AssetType::parse(&asset_type).unwrap_or(AssetType::Card),
        asset_id,
    };
    let targets = snapshot_asset(tx, &asset).await?;
    let demand = Demand {
        trigger_type: TriggerType::QueueActivated,
        source: format!("usage:{usage_id}"),
        event_id: format!("usage-activated:{usage_id}"),
        operator: None,
        reason: None,
        task_types: task_types.to_vec(),
    };
    enqueue::enqueue(tx, &targets, &demand, now, None).await
}

pub(crate) async fn package_poll_asset(
    tx: &mut Conn,
    asset: &AssetRef,
    task_types: &[String],
    now: Timestamp,
) -> StoreResult<PackagePollOutcome> {
    if asset_lock(tx, asset).await?.is_none() {
        return Err(StoreError::NotFound);
    }
    let expired = sqlx::query(
        "UPDATE package_usages SET status = 'expired' WHERE asset_type = $1 AND asset_id = $2 \
         AND status = 'active' AND ends_at <= $3",
    )
    .bind(asset.asset_type.as_str())
    .bind(&asset.asset_id)
    .bind(t(now))
    .execute(&mut *tx)
    .await?
    .rows_affected();
    let has_active_main: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM package_usages WHERE asset_type = $1 AND asset_id = $2 \
         AND kind = 'main' AND status = 'active')",
    )
    .bind(asset.asset_type.as_str())
    .bind(&asset.asset_id)
    .fetch_one(&mut *tx)
    .await?;
    let pending: Option<String> = sqlx::query_scalar(
        "SELECT id FROM package_usages WHERE asset_type = $1 AND asset_id = $2 AND status = 'pending' \
         ORDER BY created_at, id LIMIT 1",
    )
    .bind(asset.asset_type.as_str())
    .bind(&asset.asset_id)
    .fetch_optional(&mut *tx)
    .await?;
    let mut out = PackagePollOutcome {
        usages_expired: expired,
        no_valid_package: !has_active_main,
        pending_usage: pending.is_some(),
        items: vec![],
    };
    if let (false, Some(pending)) = (has_active_main, pending) {
        let targets = snapshot_asset(tx, asset).await?;
        let demand = Demand {
            trigger_type: TriggerType::NoValidPackage,
            source: format!(
                "package_poll:{}:{}",
                asset.asset_type.as_str(),
                asset.asset_id
            ),
            // Keyed by the waiting usage record: polling the same state again is a replay.
            event_id: format!("no-valid-package:{pending}"),
            operator: None,
            reason: None,
            task_types: task_types.to_vec(),
        };
        out.items = enqueue::enqueue(tx, &targets, &demand, now, None).await?;
    }
    Ok(out)
}

/// The package verdict without a write transaction when nothing can change: no pending usage
/// record and no active one past its end. `None` means the full transaction is needed.
/// (The ordinary package poll runs for every card; most of them have nothing to do.)
pub(crate) async fn package_poll_quiet(
    conn: &mut Conn,
    asset: &AssetRef,
    now: Timestamp,
) -> StoreResult<Option<PackagePollOutcome>> {
    if asset_shop(conn, asset).await?.is_none() {
        return Err(StoreError::NotFound);
    }
    let row: (bool, bool) = sqlx::query_as(
        "SELECT EXISTS (SELECT 1 FROM package_usages WHERE asset_type = $1 AND asset_id = $2            AND (status = 'pending' OR (status = 'active' AND ends_at <= $3))),          EXISTS (SELECT 1 FROM package_usages WHERE asset_type = $1 AND asset_id = $2            AND kind = 'main' AND status = 'active')",
    )
    .bind(asset.asset_type.as_str())
    .bind(&asset.asset_id)
    .bind(t(now))
    .fetch_one(&mut *conn)
    .await?;
    let (busy, has_active_main) = row;
    if busy {
        return Ok(None);
    }
    Ok(Some(PackagePollOutcome {
        usages_expired: 0,
        no_valid_package: !has_active_main,
        pending_usage: false,
        items: vec![],
    }))
}

#[async_trait]
impl PackageStore for SqlStore {
    async fn order_create(
        &self,
        id: &str,
        asset: &AssetRef,
        kind: PackageKind,
        now: Timestamp,
    ) -> StoreResult<OrderView> {
        self.write(
            (id.to_owned(), asset.clone(), kind, now),
            |c, (id, asset, kind, now)| order_create(c, id, asset, *kind, *now).boxed(),
        )
        .await
    }

    async fn payment_apply(
        &self,
        cb: &PaymentCallback,
        task_types: &[String],
        now: Timestamp,
    ) -> StoreResult<PaymentOutcome> {
        self.write(
            (cb.clone(), task_types.to_vec(), now),
            |c, (cb, task_types, now)| payment_apply(c, cb, task_types, *now).boxed(),
        )
        .await
    }

    async fn usage_activate_queued(
        &self,
        usage_id: &str,
        task_types: &[String],
        now: Timestamp,
    ) -> StoreResult<Vec<EnqueuedItem>> {
        self.write(
            (usage_id.to_owned(), task_types.to_vec(), now),
            |c, (usage_id, task_types, now)| {
                usage_activate_queued(c, usage_id, task_types, *now).boxed()
            },
        )
        .await
    }

    async fn package_poll_asset(
        &self,
        asset: &AssetRef,
        task_types: &[String],
        now: Timestamp,
    ) -> StoreResult<PackagePollOutcome> {
        {
            // Most cards have nothing to change: decided on a read connection, no write at all.
            let mut conn = self.pool.acquire().await?;
            if let Some(out) = package_poll_quiet(&mut conn, asset, now).await? {
                return Ok(out);
            }
        }
        self.write(
            (asset.clone(), task_types.to_vec(), now),
            |c, (asset, task_types, now)| {
                package_poll_asset(c, asset, task_types, *now).boxed()
            },
        )
        .await
    }

    async fn card_package_state(
        &self,
        iccid: &str,
        now: Timestamp,
    ) -> StoreResult<Option<PackageState>> {
        super::schedule::card_package_state(&self.pool, iccid, now).await
    }
}
