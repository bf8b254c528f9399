//! Cards, devices and bindings ([`AssetStore`]): the switches, the binding upsert, and the
//! asset reads and locks the package transitions start with.

use async_trait::async_trait;
use futures::FutureExt;


use super::{Conn, SqlStore, dialect, map_constraint, one_row};
use crate::domain::asset::{AssetRef, AssetType, BindingRow};
use crate::store::{AssetStore, StoreError, StoreResult};

/// Binds card `b.iccid` to device `b.device_no` (or updates whether the binding is active).
///
/// # Errors
/// `Invalid` naming the device, the card or both when they do not exist; `Conflict` naming the
/// device the card is actively bound to when this binding would be a second active one.
pub(super) async fn binding_upsert(tx: &mut Conn, b: &BindingRow) -> StoreResult<()> {
    // Read first: the insert's refusal names no key (SQLite) or ends the transaction
    // (PostgreSQL), and a unique violation would hide a missing device.
    let (device, card, bound_to): (Option<i64>, Option<i64>, Option<String>) = sqlx::query_as(
        "SELECT (SELECT CAST(1 AS BIGINT) FROM devices WHERE device_no = $1), \
                (SELECT CAST(1 AS BIGINT) FROM cards WHERE iccid = $2), \
                (SELECT device_no FROM bindings WHERE iccid = $2 AND active AND device_no <> $1)",
    )
    .bind(&b.device_no)
    .bind(&b.iccid)
    .fetch_one(&mut *tx)
    .await?;
    if let Some(why) = unknown_binding_ends(b, device.is_some(), card.is_some()) {
        return Err(StoreError::UnknownAsset(why));
    }
    if let Some(other) = bound_to.filter(|_| b.active) {
        return Err(StoreError::Conflict(format!(
            "card {} is already actively bound to device {other}",
            b.iccid
        )));
    }
    sqlx::query(
        "INSERT INTO bindings (device_no, iccid, active) VALUES ($1, $2, $3) \
         ON CONFLICT (device_no, iccid) DO UPDATE SET active = excluded.active",
    )
    .bind(&b.device_no)
    .bind(&b.iccid)
    .bind(b.active)
    .execute(&mut *tx)
    .await
    .map_err(|e| map_constraint(e, "active binding of this card"))?;
    Ok(())
}

/// The shop of an asset, `None` when the asset does not exist.
pub(super) async fn asset_shop(conn: &mut Conn, asset: &AssetRef) -> StoreResult<Option<String>> {
    let sql = match asset.asset_type {
        AssetType::Card => "SELECT shop_id FROM cards WHERE iccid = $1",
        AssetType::Device => "SELECT shop_id FROM devices WHERE device_no = $1",
    };
    Ok(sqlx::query_scalar(sql)
        .bind(&asset.asset_id)
        .fetch_optional(conn)
        .await?)
}

/// The shop of an asset, locking the asset's row (PostgreSQL) for the rest of the transaction;
/// `None` when the asset does not exist. Every transition that reads and then changes an asset's
/// packages (payment, queued activation, package poll) takes this lock first, so their reads
/// ("is a main package active?", "is one pending?") stay true until they commit: two payments for
/// one asset never both activate a main package (D-poll-postgres-concurrent-writes). Lock order: order row, asset row,
/// usage rows, items.
pub(super) async fn asset_lock(conn: &mut Conn, asset: &AssetRef) -> StoreResult<Option<String>> {
    let sql = match asset.asset_type {
        AssetType::Card => concat!(
            "SELECT shop_id FROM cards WHERE iccid = $1",
            dialect::lock_row!()
        ),
        AssetType::Device => concat!(
            "SELECT shop_id FROM devices WHERE device_no = $1",
            dialect::lock_row!()
        ),
    };
    Ok(sqlx::query_scalar(sql)
        .bind(&asset.asset_id)
        .fetch_optional(conn)
        .await?)
}

/// What a binding whose device or card (`false`: unknown) is missing is refused with.
pub(super) fn unknown_binding_ends(b: &BindingRow, device: bool, card: bool) -> Option<String> {
    match (device, card) {
        (false, false) => Some(format!(
            "device {} and card {} are unknown",
            b.device_no, b.iccid
        )),
        (false, true) => Some(format!("device {} is unknown", b.device_no)),
        (true, false) => Some(format!("card {} is unknown", b.iccid)),
        (true, true) => None,
    }
}

#[async_trait]
impl AssetStore for SqlStore {
    async fn card_set_polling(&self, iccid: &str, enabled: bool) -> StoreResult<()> {
        self.set_flag("UPDATE cards SET polling_enabled = $1 WHERE iccid = $2", iccid, enabled).await
    }

    async fn device_set_polling(&self, device_no: &str, enabled: bool) -> StoreResult<()> {
        self.set_flag("UPDATE devices SET polling_enabled = $1 WHERE device_no = $2", device_no, enabled).await
    }

    async fn card_set_stop_lock(&self, iccid: &str, locked: bool) -> StoreResult<()> {
        self.set_flag("UPDATE cards SET stop_locked = $1 WHERE iccid = $2", iccid, locked).await
    }

    async fn card_delete(&self, iccid: &str) -> StoreResult<()> {
        self.write(iccid.to_owned(), |c, iccid| {
            async move {
                sqlx::query("DELETE FROM bindings WHERE iccid = $1")
                    .bind(iccid.as_str())
                    .execute(&mut *c)
                    .await?;
                one_row(
                    sqlx::query("DELETE FROM cards WHERE iccid = $1")
                        .bind(iccid.as_str())
                        .execute(&mut *c)
                        .await?,
                )
            }
            .boxed()
        })
        .await
    }

    async fn binding_upsert(&self, b: &BindingRow) -> StoreResult<()> {
        self.write(b.clone(), |c, b| binding_upsert(c, b).boxed())
            .await
    }

    async fn device_report_slot(&self, device_no: &str, iccid: Option<&str>) -> StoreResult<()> {
        self.write(
            (device_no.to_owned(), iccid.map(str::to_owned)),
            |c, (device_no, iccid)| {
                async move {
                    one_row(
                        sqlx::query(
                            "UPDATE devices SET reported_slot_iccid = $1 WHERE device_no = $2",
                        )
                        .bind(iccid.as_deref())
                        .bind(device_no.as_str())
                        .execute(&mut *c)
                        .await?,
                    )
                }
                .boxed()
            },
        )
        .await
    }
}
