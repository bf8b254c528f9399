//! Row decoding helpers shared by the driver's files.

use sqlx::postgres::PgRow;
use sqlx::{PgExecutor, Row};

use rakuten_types::Timestamp;

use crate::priority::TriggerType;
use crate::priority::item_status::ItemStatus;
use crate::store::{ItemView, StoreError, StoreResult};

fn corrupt(what: &str) -> StoreError {
    StoreError::Db(sqlx::Error::Decode(
        format!("stored value of {what} is invalid").into(),
    ))
}

/// A required timestamp column.
pub(crate) fn ts(row: &PgRow, col: &str) -> StoreResult<Timestamp> {
    let s: String = row.try_get(col)?;
    Timestamp::parse(&s).map_err(|_| corrupt(col))
}

/// An optional timestamp column.
pub(crate) fn ts_opt(row: &PgRow, col: &str) -> StoreResult<Option<Timestamp>> {
    let s: Option<String> = row.try_get(col)?;
    s.map(|s| Timestamp::parse(&s).map_err(|_| corrupt(col)))
        .transpose()
}

/// The stored go-live instant of the priority feature.
pub(crate) async fn feature_enabled_at<'e>(ex: impl PgExecutor<'e>) -> StoreResult<Timestamp> {
    let v: Option<String> =
        sqlx::query_scalar("SELECT value FROM meta WHERE key = 'feature_enabled_at'")
            .fetch_optional(ex)
            .await?;
    let v = v.ok_or_else(|| corrupt("meta.feature_enabled_at"))?;
    Timestamp::parse(&v).map_err(|_| corrupt("meta.feature_enabled_at"))
}

/// Splits a `char(31)`-separated aggregate.
fn split(s: Option<String>) -> Vec<String> {
    s.map(|s| {
        s.split('\u{1f}')
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect()
    })
    .unwrap_or_default()
}

/// The select list for [`item_view`] (table alias `i`).
pub(crate) const ITEM_COLUMNS: &str = "i.*, \
    (SELECT string_agg(s.source, chr(31) ORDER BY s.source COLLATE \"C\") FROM priority_item_sources s WHERE s.item_id = i.id) AS sources, \
    (SELECT string_agg(c.ancestor_id, chr(31) ORDER BY c.depth DESC) FROM shop_closure c WHERE c.descendant_id = i.shop_id) AS chain";

/// Decodes an item row selected with [`ITEM_COLUMNS`].
pub(crate) fn item_view(
    row: &PgRow,
    feature_enabled_at: Timestamp,
    validity: std::time::Duration,
) -> StoreResult<ItemView> {
    let status: String = row.try_get("status")?;
    let status = ItemStatus::parse(&status).ok_or_else(|| corrupt("status"))?;
    let trig = |col: &str| -> StoreResult<TriggerType> {
        let s: String = row.try_get(col)?;
        TriggerType::parse(&s).ok_or_else(|| corrupt(col))
    };
    let enqueued_at = ts(row, "enqueued_at")?;
    Ok(ItemView {
        id: row.try_get("id")?,
        asset_type: row.try_get("asset_type")?,
        asset_id: row.try_get("asset_id")?,
        device_no: row.try_get("device_no")?,
        iccid: row.try_get("iccid")?,
        shop_id: row.try_get("shop_id")?,
        agent_chain: split(row.try_get("chain")?),
        task_type: row.try_get("task_type")?,
        status,
        trigger_type: trig("trigger_type")?,
        last_trigger_type: trig("last_trigger_type")?,
        trigger_sources: split(row.try_get("sources")?),
        trigger_count: row.try_get("trigger_count")?,
        last_triggered_at: ts(row, "last_triggered_at")?,
        attempts: row.try_get("attempts")?,
        max_attempts: row.try_get("max_attempts")?,
        started_at: ts_opt(row, "started_at")?,
        finished_at: ts_opt(row, "finished_at")?,
        duration_ms: row.try_get("duration_ms")?,
        next_run_at: if status.is_active() {
            Some(ts(row, "next_run_at")?)
        } else {
            None
        },
        claim_expires_at: ts_opt(row, "claim_expires_at")?,
        enqueued_at,
        dequeued_at: ts_opt(row, "dequeued_at")?,
        valid_until: enqueued_at.max(feature_enabled_at).plus(validity),
        result: row.try_get("result")?,
        failure_reason: row.try_get("failure_reason")?,
        last_log_id: row.try_get("last_log_id")?,
        operator: row.try_get("operator")?,
        reason: row.try_get("reason")?,
        retriggered_from: row.try_get("retriggered_from")?,
        closed_by: row.try_get("closed_by")?,
        close_reason: row.try_get("close_reason")?,
    })
}
