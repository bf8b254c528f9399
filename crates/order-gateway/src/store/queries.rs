//! Storage of the account-query channel (spec §11): the [`QueryStore`] trait and its request
//! types. The semantics (redelivery, attempts, TTL, retention, fencing) are compared with the
//! order channel's in [`crate::query_queue`].
//!
//! Contract every driver keeps:
//! - every transition is decided by `QueryStatus::transition` and repeated as a guarded
//!   `UPDATE … WHERE status = … [AND lease_token = …] RETURNING`; a lost race is a typed error;
//! - a lapsed lease returns the query to `queued` while attempts remain, else `failed`;
//! - a query created at or before `now - query TTL` is never leased (the lease SQL itself checks
//!   it, so a late sweeper cannot let one through);
//! - only the current holder (worker and lease token, lease unexpired) records a result; an
//!   identical repeat from the lease that finished the query is acknowledged as a duplicate;
//! - writes are acknowledged only after the commit, through the same group-commit writer as the
//!   order tasks.

use std::time::Duration;

use async_trait::async_trait;
use rakuten_types::order::Page;
use rakuten_types::query::{
    QueryGrant, QueryKind, QueryResultAck, QueryStatus, QuerySummary, QueryView, SubmitQueryAck,
};
use rakuten_types::{QueryId, Timestamp, WorkerId};

use super::StoreError;

/// A query to insert, validated by the HTTP layer.
#[derive(Debug, Clone)]
pub struct NewQuery {
    /// Idempotency key.
    pub query_id: QueryId,
    /// Site (`rakuten`).
    pub site: String,
    /// Kind.
    pub kind: QueryKind,
    /// Params, serialized JSON object.
    pub params_json: String,
    /// Most leases allowed (`RAKUTEN_QUERY_MAX_ATTEMPTS` at submit time).
    pub max_attempts: i64,
}

/// Checks a resubmitted query against the stored row (site, kind, then params); 409/1006 naming
/// the first field that differs.
pub(crate) fn check_same_query(
    q: &NewQuery,
    stored_site: &str,
    stored_kind: QueryKind,
    stored_params_json: &str,
) -> Result<(), StoreError> {
    let id = q.query_id.as_str();
    if stored_site != q.site {
        return Err(super::idempotency_mismatch("query_id", id, "site"));
    }
    if stored_kind != q.kind {
        return Err(super::idempotency_mismatch("query_id", id, "kind"));
    }
    let parse = |s: &str| {
        serde_json::from_str::<serde_json::Value>(s)
            .map_err(|e| StoreError::Corrupt(format!("params_json: {e}")))
    };
    match super::json_difference(
        "params",
        &parse(stored_params_json)?,
        &parse(&q.params_json)?,
    ) {
        Some(f) => Err(super::idempotency_mismatch("query_id", id, &f)),
        None => Ok(()),
    }
}

/// One query lease attempt.
#[derive(Debug, Clone)]
pub struct QueryLeaseRequest {
    /// The polling worker (its order heartbeat is NOT refreshed, §11.2).
    pub worker_id: WorkerId,
    /// Only queries of this site.
    pub site: Option<String>,
    /// Lease length (`RAKUTEN_QUERY_LEASE_TTL_SECONDS`).
    pub ttl: Duration,
    /// Only queries created after this instant (`now - RAKUTEN_QUERY_TTL_SECONDS`).
    pub created_after: Timestamp,
}

/// What a result asks to store.
#[derive(Debug, Clone, PartialEq)]
pub enum QueryOutcome {
    /// Store the result (already within the size limit) and end `succeeded`.
    Success {
        /// The result, serialized JSON object.
        result_json: String,
        /// The raw pages were dropped to fit.
        raw_omitted: bool,
    },
    /// End `failed` with this error.
    Failure {
        /// Error code (site codes pass through unchanged).
        error_code: Option<i32>,
        /// Error text.
        error_message: String,
    },
}

/// A result from a worker (§11.2), prepared by [`crate::query_queue::prepare_result`].
#[derive(Debug, Clone)]
pub struct QueryResultRecord {
    /// The query.
    pub query_id: QueryId,
    /// The claimed holder.
    pub worker_id: WorkerId,
    /// The lease's fencing token, when sent.
    pub lease_token: Option<String>,
    /// The worker's `success` flag (what an identical repeat is compared with).
    pub reported_success: bool,
    /// What to store.
    pub outcome: QueryOutcome,
}

/// A query whose lease lapsed, as the sweeper left it.
#[derive(Debug, Clone, PartialEq)]
pub struct LapsedQuery {
    /// The query.
    pub query_id: QueryId,
    /// `queued` (redelivered next) or `failed` (attempts exhausted).
    pub status: QueryStatus,
    /// Leases so far.
    pub attempt: i64,
    /// The holder whose lease lapsed.
    pub lease_owner: Option<String>,
}

/// Filter and page of `GET /api/account/queries`.
#[derive(Debug, Clone, Default)]
pub struct QueryFilter {
    /// Only this status.
    pub status: Option<QueryStatus>,
    /// Only this kind.
    pub kind: Option<QueryKind>,
    /// Page size (already clamped to 1..=200).
    pub limit: i64,
    /// Offset (≥ 0).
    pub offset: i64,
}

/// The account-query store. Every write method is one durable transition.
#[async_trait]
pub trait QueryStore: Send + Sync + std::fmt::Debug + 'static {
    /// Inserts a queued query, or returns the existing one with `created: false`.
    async fn query_insert(
        &self,
        query: NewQuery,
        now: Timestamp,
    ) -> Result<SubmitQueryAck, StoreError>;

    /// Leases the oldest leasable queued query (created after `req.created_after`): `attempt + 1`,
    /// a fresh `lease_token`. `None` when there is none. No concurrency gate.
    async fn query_lease_next(
        &self,
        req: QueryLeaseRequest,
        now: Timestamp,
    ) -> Result<Option<QueryGrant>, StoreError>;

    /// Whether [`query_lease_next`](Self::query_lease_next) could grant something now (a cheap
    /// read for the long-poll's periodic fallback).
    async fn query_leasable_exists(
        &self,
        site: Option<&str>,
        created_after: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Records a result from the current holder; 6005 when unknown, 6006 when the caller does not
    /// hold the current, unexpired lease (an identical repeat from the lease that finished the
    /// query is answered with `duplicate: true` instead).
    async fn query_record_result(
        &self,
        rec: QueryResultRecord,
        now: Timestamp,
    ) -> Result<QueryResultAck, StoreError>;

    /// Every leased query whose lease lapsed at or before `now`: back to `queued` while attempts
    /// remain, else `failed` ("attempts exhausted").
    async fn query_requeue_expired_leases(
        &self,
        now: Timestamp,
    ) -> Result<Vec<LapsedQuery>, StoreError>;

    /// Every queued or leased query created at or before `created_before` → `expired`.
    async fn query_mark_expired(
        &self,
        created_before: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<QueryId>, StoreError>;

    /// Deletes terminal queries finished before `finished_before` (at most 1000 per call);
    /// returns how many. Queued and leased queries are never touched.
    async fn query_delete_terminal_before(
        &self,
        finished_before: Timestamp,
    ) -> Result<u64, StoreError>;

    /// One query with its result.
    async fn query_get(&self, query_id: &QueryId) -> Result<Option<QueryView>, StoreError>;

    /// A filtered page of queries, oldest first, without result bodies.
    async fn query_list(&self, filter: QueryFilter) -> Result<Page<QuerySummary>, StoreError>;

    /// The console's account-query list: a filtered keyset page (at most `limit` rows) with a
    /// capped total.
    async fn query_seek(
        &self,
        status: Option<QueryStatus>,
        kind: Option<QueryKind>,
        seek: super::Seek,
        limit: i64,
    ) -> Result<super::SeekPage<QuerySummary>, StoreError>;
}
