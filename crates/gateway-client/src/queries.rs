//! Account-query calls (§11.2), grouped by the role that makes them.

use rakuten_types::query::{
    QueryGrant, QueryResultAck, QueryResultBody, QueryView, SubmitQuery, SubmitQueryAck,
};
use rakuten_types::{QueryId, WorkerId};
use reqwest::Method;

use crate::client::{Call, seg};
use crate::{Client, Error, Retry};

/// Upstream: submit and read.
impl Client {
    /// `POST /api/account/queries` (idempotent on `query_id`).
    ///
    /// # Errors
    /// [`Error`]; 422/1003 bad kind or params.
    pub async fn submit_query(&self, body: &SubmitQuery) -> Result<SubmitQueryAck, Error> {
        let call = Call::new(self, Method::POST, "/api/account/queries".into()).json(body)?;
        self.data(call, self.retry).await
    }

    /// `GET /api/account/queries/{id}`.
    ///
    /// # Errors
    /// [`Error`]; 404/6005 unknown or purged.
    pub async fn query(&self, query_id: &QueryId) -> Result<QueryView, Error> {
        let path = format!("/api/account/queries/{}", seg(query_id.as_str()));
        self.data(Call::new(self, Method::GET, path), self.retry)
            .await
    }
}

/// Worker: lease and result.
impl Client {
    /// `GET /api/account/queries/lease` once (long-poll up to `wait_seconds`). `None`: nothing
    /// queued. Does not count as an order heartbeat on the gateway.
    ///
    /// # Errors
    /// [`Error`].
    pub async fn query_lease(
        &self,
        worker_id: &WorkerId,
        wait_seconds: u64,
        site: Option<&str>,
    ) -> Result<Option<QueryGrant>, Error> {
        let call = self.long_poll("/api/account/queries/lease", worker_id, wait_seconds, site);
        self.maybe(call, Retry::Never).await
    }

    /// `POST /api/account/queries/{id}/result`, retried on transient faults until acknowledged,
    /// a final answer, or shutdown. A retry after a lost answer is safe: the gateway
    /// acknowledges an identical repeat from the same lease as `duplicate: true`.
    ///
    /// # Errors
    /// [`Error::Rejected`] (6006 = the lease is gone: drop the result, never resend; 413 = body
    /// too large), [`Error::ShuttingDown`].
    pub async fn query_result(
        &self,
        query_id: &QueryId,
        body: &QueryResultBody,
    ) -> Result<QueryResultAck, Error> {
        let path = format!("/api/account/queries/{}/result", seg(query_id.as_str()));
        let call = Call::new(self, Method::POST, path).json(body)?;
        self.data(call, Retry::UntilFinal).await
    }
}
