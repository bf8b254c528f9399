//! Order task calls (§4.2–§4.6, §5), grouped by the role that makes them.

use rakuten_types::order::{
    LeaseGrant, Page, ReclaimTask, RenewAck, RenewLease, ReportAck, ReportState, SubmitOrder,
    SubmitOrderAck, TaskDetail, TaskSummary,
};
use rakuten_types::{ErrorCode, TaskId, TaskStatus, WorkerId};
use reqwest::Method;

use crate::client::{Call, seg};
use crate::{Client, Error, Retry};

/// Attempts of a renewal before giving up (the lease TTL leaves room for the next period).
pub const RENEW_ATTEMPTS: u32 = 4;
/// Page size [`Client::tasks_all`] asks for (the gateway's largest).
pub const MAX_PAGE: i64 = 200;

/// Filter and page of `GET /api/orders`.
#[derive(Debug, Clone, Default)]
pub struct TaskQuery {
    /// Only this status.
    pub status: Option<TaskStatus>,
    /// Page size (gateway default 50, at most 200).
    pub limit: Option<i64>,
    /// Items to skip.
    pub offset: Option<i64>,
}

/// Upstream: submit and read.
impl Client {
    /// `POST /api/orders` (idempotent on `task_id`).
    ///
    /// # Errors
    /// [`Error`]; 422/1003 bad intent, 409/1006 the id with another body.
    pub async fn submit(&self, body: &SubmitOrder) -> Result<SubmitOrderAck, Error> {
        let call = Call::new(self, Method::POST, "/api/orders".into()).json(body)?;
        self.data(call, self.retry).await
    }

    /// `GET /api/orders/{id}`: the task, its history and (as the gateway adds them) its
    /// operator actions and evidence queries.
    ///
    /// # Errors
    /// [`Error`]; 404/6001 unknown task.
    pub async fn task(&self, task_id: &TaskId) -> Result<TaskDetail, Error> {
        let path = format!("/api/orders/{}", seg(task_id.as_str()));
        self.data(Call::new(self, Method::GET, path), self.retry)
            .await
    }

    /// [`Client::task`], with `None` for a task the gateway does not know (6001).
    ///
    /// # Errors
    /// [`Error`] other than 6001.
    pub async fn task_if_known(&self, task_id: &TaskId) -> Result<Option<TaskDetail>, Error> {
        match self.task(task_id).await {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.code() == Some(ErrorCode::TaskNotFound.as_i32()) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `GET /api/orders?status&limit&offset`: one page, oldest first.
    ///
    /// # Errors
    /// [`Error`].
    pub async fn tasks(&self, q: &TaskQuery) -> Result<Page<TaskSummary>, Error> {
        let mut call = Call::new(self, Method::GET, "/api/orders".into());
        if let Some(s) = q.status {
            call = call.query("status", s.as_str());
        }
        if let Some(l) = q.limit {
            call = call.query("limit", l);
        }
        if let Some(o) = q.offset {
            call = call.query("offset", o);
        }
        self.data(call, self.retry).await
    }

    /// Every task (all pages), optionally of one status.
    ///
    /// # Errors
    /// [`Error`] of any page.
    pub async fn tasks_all(&self, status: Option<TaskStatus>) -> Result<Vec<TaskSummary>, Error> {
        let mut out = Vec::new();
        loop {
            let page = self
                .tasks(&TaskQuery {
                    status,
                    limit: Some(MAX_PAGE),
                    offset: Some(i64::try_from(out.len()).unwrap_or(i64::MAX)),
                })
                .await?;
            let n = page.items.len();
            out.extend(page.items);
            if n == 0 || i64::try_from(out.len()).unwrap_or(i64::MAX) >= page.total {
                return Ok(out);
            }
        }
    }
}

/// Worker: lease, renew, report.
impl Client {
    /// `GET {path}?worker_id&wait[&site]` once, waiting up to `wait_seconds` plus the request
    /// timeout.
    pub(crate) fn long_poll(
        &self,
        path: &str,
        worker_id: &WorkerId,
        wait_seconds: u64,
        site: Option<&str>,
    ) -> Call {
        let mut call = Call::new(self, Method::GET, path.into())
            .query("worker_id", worker_id.as_str())
            .query("wait", wait_seconds);
        if let Some(s) = site {
            call = call.query("site", s);
        }
        call.timeout += std::time::Duration::from_secs(wait_seconds);
        call
    }

    /// `GET /api/orders/lease` once (long-poll up to `wait_seconds`). `None`: nothing to do
    /// (including 6004, another task active). The caller's loop backs off after an error.
    ///
    /// # Errors
    /// [`Error`].
    pub async fn lease(
        &self,
        worker_id: &WorkerId,
        wait_seconds: u64,
        site: Option<&str>,
    ) -> Result<Option<LeaseGrant>, Error> {
        let call = self.long_poll("/api/orders/lease", worker_id, wait_seconds, site);
        self.maybe(call, Retry::Never).await
    }

    /// `POST /api/orders/{id}/renew`, up to [`RENEW_ATTEMPTS`] attempts on transient faults.
    ///
    /// # Errors
    /// [`Error::LeaseLost`] is final; `Transient` after the attempts.
    pub async fn renew(&self, task_id: &TaskId, body: &RenewLease) -> Result<RenewAck, Error> {
        let path = format!("/api/orders/{}/renew", seg(task_id.as_str()));
        let call = Call::new(self, Method::POST, path).json(body)?;
        self.data(call, Retry::Attempts(RENEW_ATTEMPTS)).await
    }

    /// `POST /api/orders/{id}/report`, retried until acknowledged (the gateway takes an
    /// identical repeat, §4.5), a final answer, or shutdown.
    ///
    /// # Errors
    /// [`Error::LeaseLost`], [`Error::Rejected`], [`Error::ShuttingDown`].
    pub async fn report(&self, task_id: &TaskId, body: &ReportState) -> Result<ReportAck, Error> {
        let path = format!("/api/orders/{}/report", seg(task_id.as_str()));
        let call = Call::new(self, Method::POST, path).json(body)?;
        self.data(call, Retry::UntilFinal).await
    }
}

/// Operator actions.
impl Client {
    /// `POST /api/orders/{id}/reclaim` with `{worker_id, reason}` as the body
    /// (D-holder-fields-in-body): hands a stale task to `worker_id`, which receives the grant on
    /// its next lease poll (§5).
    ///
    /// # Errors
    /// [`Error`]; 409/6003 when the task is not stale.
    pub async fn reclaim(
        &self,
        task_id: &TaskId,
        worker_id: &WorkerId,
        reason: Option<&str>,
    ) -> Result<LeaseGrant, Error> {
        let path = format!("/api/orders/{}/reclaim", seg(task_id.as_str()));
        let body = ReclaimTask {
            worker_id: worker_id.clone(),
            reason: reason.map(str::to_owned),
        };
        let call = Call::new(self, Method::POST, path).json(&body)?;
        self.data(call, self.retry).await
    }
}
