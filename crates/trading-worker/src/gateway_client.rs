//! The worker's view of the order gateway (spec §4.3–§4.6, §11): the shared `gateway-client`
//! crate with this worker's id bound. Network faults (refused, timeouts, 5xx) are retried with
//! exponential backoff and jitter: renew a few times, a report or query result until it is
//! acknowledged (both idempotent on the gateway). 6002 (lease lost) and other 4xx answers are
//! final.

use std::time::Duration;

pub use gateway_client::{Error as GatewayError, backoff, run_turns};
use rakuten_types::order::{
    LeaseGrant, RenewAck, RenewLease, ReportAck, ReportState, SubmitOrder, SubmitOrderAck,
    TaskDetail,
};
use rakuten_types::query::{QueryGrant, QueryResultAck, QueryResultBody};
use rakuten_types::{QueryId, TaskId, WorkerId};
use tokio_util::sync::CancellationToken;

use crate::settings::Secret;

/// The gateway client of one worker.
#[derive(Debug, Clone)]
pub struct GatewayClient {
    inner: gateway_client::Client,
    worker_id: WorkerId,
}

impl GatewayClient {
    /// A client of the gateway at `base`; `timeout` per request (added to a long-poll's wait),
    /// `retry_max` the longest backoff, `shutdown` ends waits and retries.
    ///
    /// # Errors
    /// The HTTP client cannot be built.
    pub fn new(
        base: &str,
        token: Secret,
        worker_id: WorkerId,
        timeout: Duration,
        retry_max: Duration,
        shutdown: CancellationToken,
        ca: Option<reqwest::Certificate>,
    ) -> Result<Self, reqwest::Error> {
        let builder = gateway_client::Client::builder(base, token.expose())
            .timeout(timeout)
            .retry_max(retry_max)
            .shutdown(shutdown);
        // The server certificate is verified: system roots plus `RAKUTEN_GATEWAY_CA_FILE`.
        let inner = ca
            .into_iter()
            .fold(builder, gateway_client::Builder::root_certificate)
            .build()?;
        Ok(GatewayClient { inner, worker_id })
    }

    /// This worker's id.
    pub fn worker_id(&self) -> &WorkerId {
        &self.worker_id
    }

    /// `GET /api/orders/lease` once (long-poll up to `wait_seconds`). `None`: nothing to do.
    ///
    /// # Errors
    /// [`GatewayError`].
    pub async fn lease(
        &self,
        wait_seconds: u64,
        site: Option<&str>,
    ) -> Result<Option<LeaseGrant>, GatewayError> {
        self.inner.lease(&self.worker_id, wait_seconds, site).await
    }

    /// `POST /api/orders/{id}/renew`, retried a few times on network faults.
    ///
    /// # Errors
    /// [`GatewayError::LeaseLost`] is final; `Transient` after the attempts.
    pub async fn renew(
        &self,
        task_id: &TaskId,
        lease_token: &str,
    ) -> Result<RenewAck, GatewayError> {
        let body = RenewLease {
            worker_id: self.worker_id.clone(),
            lease_token: Some(lease_token.to_owned()),
        };
        self.inner.renew(task_id, &body).await
    }

    /// `POST /api/orders/{id}/report`, retried until acknowledged, a final answer, or shutdown.
    ///
    /// # Errors
    /// [`GatewayError::LeaseLost`], [`GatewayError::Rejected`], [`GatewayError::ShuttingDown`].
    pub async fn report(
        &self,
        task_id: &TaskId,
        body: &ReportState,
    ) -> Result<ReportAck, GatewayError> {
        self.inner.report(task_id, body).await
    }

    /// `GET /api/account/queries/lease` once (long-poll up to `wait_seconds`, §11.2).
    ///
    /// # Errors
    /// [`GatewayError`].
    pub async fn query_lease(
        &self,
        wait_seconds: u64,
        site: Option<&str>,
    ) -> Result<Option<QueryGrant>, GatewayError> {
        self.inner
            .query_lease(&self.worker_id, wait_seconds, site)
            .await
    }

    /// `POST /api/account/queries/{id}/result`, retried until acknowledged (6006 = the lease is
    /// gone: drop the result, never resend; 413 = body too large).
    ///
    /// # Errors
    /// [`GatewayError::Rejected`], [`GatewayError::ShuttingDown`].
    pub async fn query_result(
        &self,
        query_id: &QueryId,
        body: &QueryResultBody,
    ) -> Result<QueryResultAck, GatewayError> {
        self.inner.query_result(query_id, body).await
    }

    /// `GET /api/orders/{id}` once.
    ///
    /// # Errors
    /// [`GatewayError`].
    pub async fn task(&self, task_id: &TaskId) -> Result<TaskDetail, GatewayError> {
        self.inner.task(task_id).await
    }

    /// `POST /api/orders` once (for tools and the demo; the worker never submits).
    ///
    /// # Errors
    /// [`GatewayError`].
    pub async fn submit(&self, body: &SubmitOrder) -> Result<SubmitOrderAck, GatewayError> {
        self.inner.submit(body).await
    }
}
