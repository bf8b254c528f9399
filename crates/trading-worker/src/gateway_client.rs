//! Outbound client of the order gateway (spec §4.3–§4.6): lease (long-poll), renew, report, task
//! detail. Network faults (refused, timeouts, 5xx) are retried with exponential backoff and
//! jitter: renew a few times, a report until it is acknowledged (it is idempotent per
//! `(task_id, state)`, §4.5). 6002 (lease lost) and other 4xx answers are final.

use std::time::Duration;

use rakuten_types::order::{
    LeaseGrant, RenewAck, RenewLease, ReportAck, ReportState, SubmitOrder, SubmitOrderAck,
    TaskDetail,
};
use rakuten_types::query::{QueryGrant, QueryResultAck, QueryResultBody};
use rakuten_types::{ErrorCode, QueryId, TaskId, WorkerId};
use rand::Rng;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::settings::Secret;

/// Why a gateway call did not succeed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GatewayError {
    /// 6002: not the holder, expired, superseded or terminal. Final.
    #[error("lease lost (6002): {0}")]
    LeaseLost(String),
    /// Another 4xx answer. Final: resending the same request cannot help.
    #[error("gateway refused the request: HTTP {status}, code {code}: {msg}")]
    Rejected {
        /// HTTP status.
        status: u16,
        /// Envelope code.
        code: i32,
        /// Envelope message.
        msg: String,
    },
    /// Unreachable, timed out or 5xx, after the retries this call allows.
    #[error("gateway unavailable: {0}")]
    Transient(String),
    /// The worker is shutting down.
    #[error("shutting down")]
    ShuttingDown,
}

/// First backoff step.
const BACKOFF_BASE: Duration = Duration::from_millis(200);
/// Attempts for a renewal before giving up (the lease TTL leaves room for the next period).
const RENEW_ATTEMPTS: u32 = 4;

/// The gateway client.
#[derive(Debug, Clone)]
pub struct GatewayClient {
    base: String,
    token: Secret,
    worker_id: WorkerId,
    http: reqwest::Client,
    timeout: Duration,
    retry_max: Duration,
    shutdown: CancellationToken,
}

/// `min(max, base * 2^attempt)` scaled by a random factor in [0.5, 1.0).
pub fn backoff(attempt: u32, max: Duration) -> Duration {
    let exp = BACKOFF_BASE.saturating_mul(1u32 << attempt.min(16));
    let capped = exp.min(max);
    capped.mul_f64(rand::rng().random_range(0.5..1.0))
}

/// Runs `turn` (one lease long-poll and its work) until `shutdown` or
/// [`GatewayError::ShuttingDown`], backing off (jittered, up to `retry_max`) after each failed
/// turn in a row; `what` names the request in the log. The body of both workers' `run`.
pub async fn run_turns<T, F, Fut>(
    shutdown: &CancellationToken,
    retry_max: Duration,
    what: &str,
    mut turn: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, GatewayError>>,
{
    let mut failures: u32 = 0;
    loop {
        let r = tokio::select! {
            r = turn() => r,
            () = shutdown.cancelled() => break,
        };
        match r {
            Ok(_) => failures = 0,
            Err(GatewayError::ShuttingDown) => break,
            Err(e) => {
                tracing::warn!(error = %e, "{what} failed; backing off");
                tokio::select! {
                    () = tokio::time::sleep(backoff(failures, retry_max)) => {}
                    () = shutdown.cancelled() => break,
                }
                failures = failures.saturating_add(1);
            }
        }
    }
}

impl GatewayClient {
    /// A client of the gateway at `base`.
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
        Ok(GatewayClient {
            base: base.trim_end_matches('/').to_owned(),
            token,
            worker_id,
            // No client-wide timeout: each request sets its own (the long-poll needs longer).
            // The server certificate is verified: system roots plus `RAKUTEN_GATEWAY_CA_FILE`.
            http: (ca.into_iter())
                .fold(reqwest::Client::builder(), |b, c| b.add_root_certificate(c))
                .build()?,
            timeout,
            retry_max,
            shutdown,
        })
    }

    /// This worker's id.
    pub fn worker_id(&self) -> &WorkerId {
        &self.worker_id
    }

    async fn once<T: DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
        timeout: Duration,
    ) -> Result<Option<T>, GatewayError> {
        let req = req.bearer_auth(self.token.expose()).timeout(timeout);
        let resp = tokio::select! {
            r = req.send() => r.map_err(|e| GatewayError::Transient(e.to_string()))?,
            () = self.shutdown.cancelled() => return Err(GatewayError::ShuttingDown),
        };
        let status = resp.status().as_u16();
        let body = resp
            .bytes()
            .await
            .map_err(|e| GatewayError::Transient(e.to_string()))?;
        if status >= 500 {
            return Err(GatewayError::Transient(format!("HTTP {status}")));
        }
        let env: Value = serde_json::from_slice(&body).map_err(|e| {
            if status < 300 {
                GatewayError::Transient(format!("HTTP {status}: not JSON: {e}"))
            } else {
                GatewayError::Rejected {
                    status,
                    code: 0,
                    msg: format!("not an envelope: {e}"),
                }
            }
        })?;
        let code = env["code"].as_i64().unwrap_or(0) as i32;
        let msg = env["msg"].as_str().unwrap_or("").to_owned();
        if code == ErrorCode::LeaseInvalid.as_i32() {
            return Err(GatewayError::LeaseLost(msg));
        }
        if !(200..300).contains(&status) || env["success"] != Value::Bool(true) {
            return Err(GatewayError::Rejected { status, code, msg });
        }
        match env.get("data") {
            None | Some(Value::Null) => Ok(None),
            Some(d) => serde_json::from_value(d.clone())
                .map(Some)
                .map_err(|e| GatewayError::Transient(format!("unexpected data shape: {e}"))),
        }
    }

    async fn pause(&self, attempt: u32) -> Result<(), GatewayError> {
        tokio::select! {
            () = tokio::time::sleep(backoff(attempt, self.retry_max)) => Ok(()),
            () = self.shutdown.cancelled() => Err(GatewayError::ShuttingDown),
        }
    }

    /// POSTs `body` to `url` until acknowledged (the endpoint takes an identical repeat), a
    /// final answer, or shutdown; `on_retry(attempt, error)` logs each retry (`None`: the answer
    /// had no data).
    async fn post_until_acked<A: DeserializeOwned, B: serde::Serialize + ?Sized>(
        &self,
        url: String,
        body: &B,
        on_retry: impl Fn(u32, Option<&str>),
    ) -> Result<A, GatewayError> {
        let mut attempt = 0;
        loop {
            let req = self.http.post(&url).json(body);
            match self.once::<A>(req, self.timeout).await {
                Ok(Some(a)) => return Ok(a),
                Ok(None) => on_retry(attempt, None),
                Err(GatewayError::Transient(e)) => on_retry(attempt, Some(&e)),
                Err(e) => return Err(e),
            }
            self.pause(attempt).await?;
            attempt = attempt.saturating_add(1);
        }
    }

    /// `GET {path}?worker_id&wait[&site]` once, waiting up to `wait_seconds` plus the request
    /// timeout: a lease long-poll.
    async fn long_poll<T: DeserializeOwned>(
        &self,
        path: &str,
        wait_seconds: u64,
        site: Option<&str>,
    ) -> Result<Option<T>, GatewayError> {
        let mut q = vec![
            ("worker_id", self.worker_id.as_str().to_owned()),
            ("wait", wait_seconds.to_string()),
        ];
        if let Some(s) = site {
            q.push(("site", s.to_owned()));
        }
        let req = self.http.get(format!("{}{path}", self.base)).query(&q);
        self.once(req, Duration::from_secs(wait_seconds) + self.timeout)
            .await
    }

    /// `GET /api/orders/lease` once (long-poll up to `wait_seconds`). `None`: nothing to do.
    /// The caller's loop backs off after a transient error.
    ///
    /// # Errors
    /// [`GatewayError`].
    pub async fn lease(
        &self,
        wait_seconds: u64,
        site: Option<&str>,
    ) -> Result<Option<LeaseGrant>, GatewayError> {
        self.long_poll("/api/orders/lease", wait_seconds, site)
            .await
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
            worker_id: Some(self.worker_id.clone()),
            lease_token: Some(lease_token.to_owned()),
        };
        let mut attempt = 0;
        loop {
            let req = self
                .http
                .post(format!(
                    "{}/api/orders/{}/renew",
                    self.base,
                    seg(task_id.as_str())
                ))
                .json(&body);
            match self.once::<RenewAck>(req, self.timeout).await {
                Ok(Some(a)) => return Ok(a),
                Ok(None) => return Err(GatewayError::Transient("renew answered no data".into())),
                Err(GatewayError::Transient(e)) if attempt + 1 < RENEW_ATTEMPTS => {
                    tracing::warn!(task_id = %task_id, attempt, error = %e, "renew failed, retrying");
                    self.pause(attempt).await?;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// `POST /api/orders/{id}/report`, retried until acknowledged (idempotent), a final answer,
    /// or shutdown.
    ///
    /// # Errors
    /// [`GatewayError::LeaseLost`], [`GatewayError::Rejected`], [`GatewayError::ShuttingDown`].
    pub async fn report(
        &self,
        task_id: &TaskId,
        body: &ReportState,
    ) -> Result<ReportAck, GatewayError> {
        let url = format!("{}/api/orders/{}/report", self.base, seg(task_id.as_str()));
        self.post_until_acked(url, body, |attempt, err| match err {
            None => tracing::warn!(task_id = %task_id, "report answered without data; retrying"),
            Some(e) => {
                tracing::warn!(task_id = %task_id, state = %body.state, attempt, error = %e, "report not delivered, retrying")
            }
        })
        .await
    }

    /// `GET /api/account/queries/lease` once (long-poll up to `wait_seconds`, §11.2). `None`:
    /// nothing queued. Does not count as an order heartbeat on the gateway.
    ///
    /// # Errors
    /// [`GatewayError`].
    pub async fn query_lease(
        &self,
        wait_seconds: u64,
        site: Option<&str>,
    ) -> Result<Option<QueryGrant>, GatewayError> {
        self.long_poll("/api/account/queries/lease", wait_seconds, site)
            .await
    }

    /// `POST /api/account/queries/{id}/result`, retried on network faults and 5xx until
    /// acknowledged, a final answer, or shutdown. A retry after a lost answer is safe: the
    /// gateway acknowledges an identical repeat from the same lease as `duplicate: true`.
    ///
    /// # Errors
    /// [`GatewayError::Rejected`] (6006 = the lease is gone: drop the result, never resend;
    /// 413 = body too large), [`GatewayError::ShuttingDown`].
    pub async fn query_result(
        &self,
        query_id: &QueryId,
        body: &QueryResultBody,
    ) -> Result<QueryResultAck, GatewayError> {
        let url = format!(
            "{}/api/account/queries/{}/result",
            self.base,
            seg(query_id.as_str())
        );
        self.post_until_acked(url, body, |attempt, err| match err {
            None => tracing::warn!(query_id = %query_id, "result answered without data; retrying"),
            Some(e) => {
                tracing::warn!(query_id = %query_id, attempt, error = %e, "query result not delivered, retrying")
            }
        })
        .await
    }

    /// `GET /api/orders/{id}` once.
    ///
    /// # Errors
    /// [`GatewayError`].
    pub async fn task(&self, task_id: &TaskId) -> Result<TaskDetail, GatewayError> {
        let req = self.http.get(format!(
            "{}/api/orders/{}",
            self.base,
            seg(task_id.as_str())
        ));
        self.once(req, self.timeout)
            .await?
            .ok_or_else(|| GatewayError::Transient("task answered no data".into()))
    }

    /// `POST /api/orders` once (for tools and the demo; the worker never submits).
    ///
    /// # Errors
    /// [`GatewayError`].
    pub async fn submit(&self, body: &SubmitOrder) -> Result<SubmitOrderAck, GatewayError> {
        let req = self
            .http
            .post(format!("{}/api/orders", self.base))
            .json(body);
        self.once(req, self.timeout)
            .await?
            .ok_or_else(|| GatewayError::Transient("submit answered no data".into()))
    }
}

/// Percent-encodes a path segment.
fn seg(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_with_jitter_and_stays_under_the_cap() {
        let max = Duration::from_secs(2);
        for attempt in 0..40 {
            let d = backoff(attempt, max);
            assert!(d <= max, "{attempt}: {d:?}");
            let nominal = BACKOFF_BASE
                .saturating_mul(1u32 << attempt.min(16))
                .min(max);
            assert!(d >= nominal / 2, "{attempt}: {d:?}");
        }
    }
}
