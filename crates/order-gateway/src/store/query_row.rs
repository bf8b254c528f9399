//! The `account_queries` row as both drivers load it, and its conversions to the wire views.
//! Decoding stays in each driver (SQLite stores booleans as integers).

use rakuten_types::query::{
    QueryEvent, QueryKind, QueryResultAck, QueryStatus, QuerySummary, QueryView,
};
use rakuten_types::{QueryId, Timestamp};

use crate::store::StoreError;
use crate::store::queries::{QueryOutcome, QueryResultRecord};

/// A stored value that does not parse back into its Rust type.
pub(crate) fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {e}"))
}

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
