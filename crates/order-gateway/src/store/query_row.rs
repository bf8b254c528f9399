//! The `account_queries` row as both drivers load it, and its conversions to the wire views.
//! Decoding stays in each driver (SQLite stores booleans as integers).

use rakuten_types::query::{QueryKind, QueryStatus, QuerySummary, QueryView};
use rakuten_types::{QueryId, Timestamp};

use crate::store::StoreError;

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
}
