//! Decoding PostgreSQL rows into the driver-neutral row types. Timestamps are the same
//! fixed-width UTC text as on SQLite; integers are BIGINT (i64). The decoders are the generic
//! ones of [`crate::store::sqlite::rows`].

use sqlx::postgres::PgRow;

use crate::store::StoreError;
use crate::store::sqlite::rows::{TaskRow, decode_report};
use rakuten_types::order::ReportView;

/// The columns of `tasks` every task query selects, plus `latest_state`.
pub(crate) const TASK_COLUMNS: &str = "t.task_id, t.site, t.intent_json, t.status, t.lease_owner, \
    t.lease_expires_at, t.lease_count, t.created_at, t.updated_at, t.outcome, t.lease_token, \
    (SELECT r.state FROM task_reports r WHERE r.task_id = t.task_id ORDER BY r.seq DESC LIMIT 1) \
    AS latest_state";

/// Decodes a row selected with [`TASK_COLUMNS`] (the shared decoder, [`TaskRow::decode`]).
pub(crate) fn task_row(row: &PgRow) -> Result<TaskRow, StoreError> {
    TaskRow::decode(row)
}

/// Decodes a `task_reports` row (the shared decoder, [`decode_report`]).
pub(crate) fn report(row: &PgRow) -> Result<ReportView, StoreError> {
    decode_report(row)
}
