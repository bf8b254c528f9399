//! The order task rows and their decoders, one set for both engines: generic over the sqlx row
//! type (the columns have the same names and Rust types on both: fixed-width UTC text
//! timestamps, SQLite INTEGER / PostgreSQL BIGINT as `i64`).

use rakuten_types::order::{ReportView, TaskSummary};
use rakuten_types::{OrderState, Outcome, TaskId, TaskStatus, Timestamp};
use sqlx::{ColumnIndex, Decode, Row, Type};

use crate::store::StoreError;

/// The columns of `tasks` every task query selects, in this order, plus `latest_state`.
pub(crate) const TASK_COLUMNS: &str = "t.task_id, t.site, t.intent_json, t.status, t.lease_owner, \
    t.lease_expires_at, t.lease_count, t.created_at, t.updated_at, t.outcome, t.lease_token, \
    (SELECT r.state FROM task_reports r WHERE r.task_id = t.task_id ORDER BY r.seq DESC LIMIT 1) \
    AS latest_state";

/// One `tasks` row.
#[derive(Debug, Clone)]
pub(crate) struct TaskRow {
    pub task_id: TaskId,
    pub site: String,
    pub intent_json: String,
    pub status: TaskStatus,
    pub lease_owner: Option<String>,
    pub lease_expires_at: Option<Timestamp>,
    pub lease_count: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub outcome: Option<Outcome>,
    pub lease_token: Option<String>,
    pub latest_state: Option<OrderState>,
}

/// A stored value that does not parse back into its Rust type.
pub(crate) fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {e}"))
}

pub(crate) fn ts(s: &str) -> Result<Timestamp, StoreError> {
    Timestamp::parse(s).map_err(|e| corrupt("timestamp", e))
}

pub(crate) fn decode_ts(s: Option<String>) -> Result<Option<Timestamp>, StoreError> {
    s.as_deref().map(ts).transpose()
}

pub(crate) fn order_state(s: &str) -> Result<OrderState, StoreError> {
    s.parse().map_err(|e| corrupt("state", e))
}

impl TaskRow {
    /// Decodes a row selected with [`TASK_COLUMNS`] (either engine).
    pub fn decode<R>(row: &R) -> Result<Self, StoreError>
    where
        R: Row,
        for<'c> &'c str: ColumnIndex<R>,
        String: for<'r> Decode<'r, R::Database> + Type<R::Database>,
        i64: for<'r> Decode<'r, R::Database> + Type<R::Database>,
    {
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

    /// The intent as JSON.
    pub fn intent(&self) -> Result<serde_json::Value, StoreError> {
        serde_json::from_str(&self.intent_json).map_err(|e| corrupt("intent_json", e))
    }

    /// The wire summary.
    pub fn into_summary(self) -> Result<TaskSummary, StoreError> {
        let intent = self.intent()?;
        Ok(TaskSummary {
            task_id: self.task_id,
            site: self.site,
            intent,
            status: self.status,
            lease_owner: self.lease_owner,
            lease_expires_at: self.lease_expires_at,
            lease_count: self.lease_count,
            outcome: self.outcome,
            latest_state: self.latest_state,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

/// Decodes a `task_reports` row (either engine).
pub(crate) fn decode_report<R>(row: &R) -> Result<ReportView, StoreError>
where
    R: Row,
    for<'c> &'c str: ColumnIndex<R>,
    String: for<'r> Decode<'r, R::Database> + Type<R::Database>,
    i64: for<'r> Decode<'r, R::Database> + Type<R::Database>,
    i32: for<'r> Decode<'r, R::Database> + Type<R::Database>,
{
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
