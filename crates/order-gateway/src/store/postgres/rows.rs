//! Decoding PostgreSQL rows into the driver-neutral row types. Timestamps are the same
//! fixed-width UTC text as on SQLite; integers are BIGINT (i64).

use sqlx::Row;
use sqlx::postgres::PgRow;

use crate::store::StoreError;
use crate::store::sqlite::rows::{TaskRow, decode_ts, order_state, ts};
use rakuten_types::TaskId;
use rakuten_types::order::ReportView;

/// The columns of `tasks` every task query selects, plus `latest_state`.
pub(crate) const TASK_COLUMNS: &str = "t.task_id, t.site, t.intent_json, t.status, t.lease_owner, \
    t.lease_expires_at, t.lease_count, t.created_at, t.updated_at, t.outcome, t.lease_token, \
    (SELECT r.state FROM task_reports r WHERE r.task_id = t.task_id ORDER BY r.seq DESC LIMIT 1) \
    AS latest_state";

fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {e}"))
}

/// Decodes a row selected with [`TASK_COLUMNS`].
pub(crate) fn task_row(row: &PgRow) -> Result<TaskRow, StoreError> {
    let task_id: String = row.try_get("task_id")?;
    let status: String = row.try_get("status")?;
    let outcome: Option<String> = row.try_get("outcome")?;
    let latest: Option<String> = row.try_get("latest_state")?;
    Ok(TaskRow {
        task_id: TaskId::parse(&task_id).map_err(|e| corrupt("task_id", e))?,
        site: row.try_get("site")?,
        intent_json: row.try_get("intent_json")?,
        status: status.parse().map_err(|e| corrupt("status", e))?,
        lease_owner: row.try_get("lease_owner")?,
        lease_expires_at: decode_ts(row.try_get("lease_expires_at")?)?,
        lease_count: row.try_get("lease_count")?,
        created_at: ts(&row.try_get::<String, _>("created_at")?)?,
        updated_at: ts(&row.try_get::<String, _>("updated_at")?)?,
        outcome: outcome
            .map(|o| o.parse().map_err(|e| corrupt("outcome", e)))
            .transpose()?,
        lease_token: row.try_get("lease_token")?,
        latest_state: latest.as_deref().map(order_state).transpose()?,
    })
}

/// Decodes a `task_reports` row.
pub(crate) fn report(row: &PgRow) -> Result<ReportView, StoreError> {
    Ok(ReportView {
        state: order_state(&row.try_get::<String, _>("state")?)?,
        payable_yen: row.try_get("payable_yen")?,
        pay_deadline: decode_ts(row.try_get("pay_deadline")?)?,
        site_order_id: row.try_get("site_order_id")?,
        evidence_ref: row.try_get("evidence_ref")?,
        detail: row.try_get("detail")?,
        error_code: row.try_get("error_code")?,
        worker_id: row.try_get("worker_id")?,
        reported_at: ts(&row.try_get::<String, _>("reported_at")?)?,
    })
}
