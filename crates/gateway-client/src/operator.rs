//! Operator calls: alert records, resolve and cancel of a task, the worker list and
//! retirement (reclaim is with the order calls). Each is refused with 403/1002 for a token of
//! another role; resolve and cancel with 409/6003 from a status that does not allow them.

use rakuten_types::alert::{
    AlertKind, AlertView, CancelTask, OperatorActionAck, OperatorActionView, ResolveTask,
    WorkerView,
};
use rakuten_types::order::Page;
use rakuten_types::{TaskId, WorkerId};
use reqwest::Method;

use crate::client::{Call, seg};
use crate::{Client, Error};

/// Filter and page of `GET /api/alerts`.
#[derive(Debug, Clone, Default)]
pub struct AlertQuery {
    /// Every alert (`state=all`) instead of only the open ones.
    pub all: bool,
    /// Only this kind.
    pub kind: Option<AlertKind>,
    /// Page size (gateway default 50, at most 200).
    pub limit: Option<i64>,
    /// Items to skip.
    pub offset: Option<i64>,
}

impl Client {
    /// `GET /api/alerts?state=open|all&kind&limit&offset`: newest first.
    ///
    /// # Errors
    /// [`Error`].
    pub async fn alerts(&self, q: &AlertQuery) -> Result<Page<AlertView>, Error> {
        let mut call = Call::new(self, Method::GET, "/api/alerts".into())
            .query("state", if q.all { "all" } else { "open" });
        if let Some(k) = q.kind {
            call = call.query("kind", k.as_str());
        }
        if let Some(l) = q.limit {
            call = call.query("limit", l);
        }
        if let Some(o) = q.offset {
            call = call.query("offset", o);
        }
        self.data(call, self.retry).await
    }

    /// `POST /api/orders/{id}/resolve`: a `stale` or `needs_human` task → `succeeded` or
    /// `failed`, after a person checked the site.
    ///
    /// # Errors
    /// [`Error`]; 409/6003 from any other status (an ended task only while its latest reported
    /// state contradicts its outcome), 422/1003 without a reason.
    pub async fn resolve(
        &self,
        task_id: &TaskId,
        body: &ResolveTask,
    ) -> Result<OperatorActionAck, Error> {
        let path = format!("/api/orders/{}/resolve", seg(task_id.as_str()));
        let call = Call::new(self, Method::POST, path).json(body)?;
        self.data(call, self.retry).await
    }

    /// `POST /api/orders/{id}/cancel`: a `queued` task → `failed`.
    ///
    /// # Errors
    /// [`Error`]; 409/6003 from any other status (a worker leased it first).
    pub async fn cancel(&self, task_id: &TaskId, reason: &str) -> Result<OperatorActionAck, Error> {
        let path = format!("/api/orders/{}/cancel", seg(task_id.as_str()));
        let call = Call::new(self, Method::POST, path).json(&CancelTask {
            reason: reason.to_owned(),
        })?;
        self.data(call, self.retry).await
    }

    /// `GET /api/workers?limit&offset`: one page of the known workers (retired ones included)
    /// with their `total`: those holding a task first, then serving ones, then retired ones, each
    /// most recently seen first. `limit`: gateway default 50, at most 200.
    ///
    /// # Errors
    /// [`Error`].
    pub async fn workers(
        &self,
        limit: Option<i64>,
        offset: Option<i64>,
    ) -> Result<Page<WorkerView>, Error> {
        let mut call = Call::new(self, Method::GET, "/api/workers".into());
        if let Some(l) = limit {
            call = call.query("limit", l);
        }
        if let Some(o) = offset {
            call = call.query("offset", o);
        }
        self.data(call, self.retry).await
    }

    /// `DELETE /api/workers/{id}?reason=…`: hides the worker from `/health` and
    /// `worker_offline` until it polls again.
    ///
    /// # Errors
    /// [`Error`]; 404/1005 unknown worker.
    pub async fn retire(
        &self,
        worker_id: &WorkerId,
        reason: &str,
    ) -> Result<OperatorActionView, Error> {
        let path = format!("/api/workers/{}", seg(worker_id.as_str()));
        let call = Call::new(self, Method::DELETE, path).query("reason", reason);
        self.data(call, self.retry).await
    }
}
