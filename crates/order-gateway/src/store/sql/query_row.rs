//! The `account_queries` row as both engines load it, its one decoder (generic over the sqlx row
//! type; sqlx reads SQLite's 0/1 integers and PostgreSQL's BOOLEAN alike as `bool`), and its
//! conversions to the wire views.

use rakuten_types::query::{
    QueryEvent, QueryKind, QueryResultAck, QueryStatus, QuerySummary, QueryView,
};
use rakuten_types::{QueryId, Timestamp};
use sqlx::{ColumnIndex, Decode, Row, Type};

use super::rows::{corrupt, decode_ts, ts};
use crate::store::StoreError;
use crate::store::queries::{QueryOutcome, QueryResultRecord};

/// Columns every full query read selects.
pub(crate) const QUERY_COLUMNS: &str = "query_id, site, kind, params_json, status, attempt, \
    max_attempts, lease_owner, lease_token, lease_expires_at, result_json, raw_omitted, \
    error_code, error_message, result_token, result_success, created_at, updated_at, finished_at";

/// Columns of a listing (no result body).
pub(crate) const QUERY_SUMMARY_COLUMNS: &str = "query_id, site, kind, params_json, status, \
    attempt, max_attempts, lease_owner, lease_token, lease_expires_at, \
    CAST(NULL AS TEXT) AS result_json, raw_omitted, error_code, error_message, result_token, \
    result_success, created_at, updated_at, finished_at";

/// One `account_queries` row.
#[derive(Debug, Clone)]
pub(crate) struct QueryRow {
    pub(crate) query_id: QueryId,
    pub(crate) site: String,
    pub(crate) kind: QueryKind,
    pub(crate) params_json: String,
    pub(crate) status: QueryStatus,
    pub(crate) attempt: i64,
    pub(crate) max_attempts: i64,
    pub(crate) lease_owner: Option<String>,
    pub(crate) lease_token: Option<String>,
    pub(crate) lease_expires_at: Option<Timestamp>,
    pub(crate) result_json: Option<String>,
    pub(crate) raw_omitted: bool,
    pub(crate) error_code: Option<i32>,
    pub(crate) error_message: Option<String>,
    pub(crate) result_token: Option<String>,
    pub(crate) result_success: Option<bool>,
    pub(crate) created_at: Timestamp,
    pub(crate) updated_at: Timestamp,
    pub(crate) finished_at: Option<Timestamp>,
}

impl QueryRow {
    /// Decodes a row selected with [`QUERY_COLUMNS`] or [`QUERY_SUMMARY_COLUMNS`] (either engine).
    pub(crate) fn decode<R>(row: &R) -> Result<Self, StoreError>
    where
        R: Row,
        for<'c> &'c str: ColumnIndex<R>,
        String: for<'r> Decode<'r, R::Database> + Type<R::Database>,
        i64: for<'r> Decode<'r, R::Database> + Type<R::Database>,
        i32: for<'r> Decode<'r, R::Database> + Type<R::Database>,
        bool: for<'r> Decode<'r, R::Database> + Type<R::Database>,
    {
        let id: String = row.try_get("query_id")?;
        let kind: String = row.try_get("kind")?;
        let status: String = row.try_get("status")?;
        Ok(QueryRow {
            query_id: QueryId::parse(&id).map_err(|e| corrupt("query_id", e))?,
            site: row.try_get("site")?,
            kind: kind.parse().map_err(|e| corrupt("kind", e))?,
            params_json: row.try_get("params_json")?,
            status: status.parse().map_err(|e| corrupt("status", e))?,
            attempt: row.try_get("attempt")?,
            max_attempts: row.try_get("max_attempts")?,
            lease_owner: row.try_get("lease_owner")?,
            lease_token: row.try_get("lease_token")?,
            lease_expires_at: decode_ts(row.try_get("lease_expires_at")?)?,
            result_json: row.try_get("result_json")?,
            raw_omitted: row.try_get("raw_omitted")?,
            error_code: row.try_get("error_code")?,
            error_message: row.try_get("error_message")?,
            result_token: row.try_get("result_token")?,
            result_success: row.try_get("result_success")?,
            created_at: ts(&row.try_get::<String, _>("created_at")?)?,
            updated_at: ts(&row.try_get::<String, _>("updated_at")?)?,
            finished_at: decode_ts(row.try_get("finished_at")?)?,
        })
    }

    pub(crate) fn params(&self) -> Result<serde_json::Value, StoreError> {
        serde_json::from_str(&self.params_json).map_err(|e| corrupt("params_json", e))
    }

    pub(crate) fn into_view(self) -> Result<QueryView, StoreError> {
        let params = self.params()?;
        let result = self
            .result_json
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(|e| corrupt("result_json", e))?;
        Ok(QueryView {
            query_id: self.query_id,
            site: self.site,
            kind: self.kind,
            params,
            status: self.status,
            attempt: self.attempt,
            max_attempts: self.max_attempts,
            lease_owner: self.lease_owner,
            lease_expires_at: self.lease_expires_at,
            result,
            raw_omitted: self.raw_omitted,
            error_code: self.error_code,
            error_message: self.error_message,
            created_at: self.created_at,
            updated_at: self.updated_at,
            finished_at: self.finished_at,
        })
    }

    pub(crate) fn into_summary(self) -> Result<QuerySummary, StoreError> {
        let params = self.params()?;
        Ok(QuerySummary {
            query_id: self.query_id,
            site: self.site,
            kind: self.kind,
            params,
            status: self.status,
            attempt: self.attempt,
            max_attempts: self.max_attempts,
            lease_owner: self.lease_owner,
            lease_expires_at: self.lease_expires_at,
            raw_omitted: self.raw_omitted,
            error_code: self.error_code,
            error_message: self.error_message,
            created_at: self.created_at,
            updated_at: self.updated_at,
            finished_at: self.finished_at,
        })
    }

    /// Checks a reported result against this (loaded) row, §11.2. `Ok(Some(ack))`: an identical
    /// repeat (same holder, same token, same success flag) of the result that finished the
    /// query — a retry after a lost answer; acknowledged, nothing changes. `Ok(None)`: the
    /// current holder's live lease may record it. Else [`StoreError::QueryLeaseInvalid`].
    pub(crate) fn check_result(
        &self,
        rec: &QueryResultRecord,
        now: Timestamp,
    ) -> Result<Option<QueryResultAck>, StoreError> {
        let row = self;
        let token = rec.lease_token.as_deref();
        if row.status.is_terminal()
            && token.is_some()
            && row.result_token.as_deref() == token
            && row.lease_owner.as_deref() == Some(rec.worker_id.as_str())
            && row.result_success == Some(rec.reported_success)
        {
            return Ok(Some(QueryResultAck {
                query_id: row.query_id.clone(),
                status: row.status,
                raw_omitted: row.raw_omitted,
                duplicate: true,
                error_code: row.error_code,
                error_message: row.error_message.clone(),
            }));
        }
        let refuse = |why: String| Err(StoreError::QueryLeaseInvalid(why));
        if row.status != QueryStatus::Leased {
            return refuse(format!(
                "query {} is {}; results are accepted only from the current lease holder",
                row.query_id, row.status
            ));
        }
        if row.lease_owner.as_deref() != Some(rec.worker_id.as_str()) {
            return refuse(format!(
                "worker {} does not hold the lease of query {} (it was redelivered)",
                rec.worker_id, row.query_id
            ));
        }
        if token.is_some() && row.lease_token.as_deref() != token {
            return refuse("lease_token belongs to an earlier lease of this query".into());
        }
        if row.lease_expires_at.is_none_or(|e| e <= now) {
            return refuse(format!("the lease of query {} has expired", row.query_id));
        }
        Ok(None)
    }
}

/// The columns a reported outcome writes: `(event, result_json, raw_omitted, error_code,
/// error_message)`.
pub(crate) fn result_columns(
    outcome: QueryOutcome,
) -> (
    QueryEvent,
    Option<String>,
    bool,
    Option<i32>,
    Option<String>,
) {
    match outcome {
        QueryOutcome::Success {
            result_json,
            raw_omitted,
        } => (
            QueryEvent::Succeed,
            Some(result_json),
            raw_omitted,
            None,
            None,
        ),
        QueryOutcome::Failure {
            error_code,
            error_message,
        } => (
            QueryEvent::Fail,
            None,
            false,
            error_code,
            Some(error_message),
        ),
    }
}
