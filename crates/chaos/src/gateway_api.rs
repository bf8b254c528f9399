//! The harness's own gateway client (upstream, operator, checks): direct to the gateway(s), not
//! through the proxy, retrying transport errors and 5xx while a gateway is being restarted. Only
//! the HTTP API is used, so the checks work unchanged on any gateway storage backend.

use std::time::Duration;

use anyhow::{Context, bail};
use rakuten_types::Envelope;
use rakuten_types::order::{Page, SubmitOrderAck, TaskDetail, TaskSummary};
use serde::de::DeserializeOwned;

use crate::procs::API_TOKEN;

/// What one call answered.
#[derive(Debug)]
pub enum Answer<T> {
    /// `success: true`.
    Ok(T),
    /// A 4xx envelope: `(http status, code, msg)`.
    Refused(u16, i32, String),
}

/// A client over one or more gateway base URLs (tried in turn).
#[derive(Debug, Clone)]
pub struct GatewayApi {
    urls: Vec<String>,
    http: reqwest::Client,
    /// How long one call keeps retrying.
    pub patience: Duration,
}

impl GatewayApi {
    /// A client.
    pub fn new(urls: Vec<String>) -> Self {
        GatewayApi {
            urls,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap_or_default(),
            patience: Duration::from_secs(60),
        }
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> anyhow::Result<Answer<T>> {
        let until = tokio::time::Instant::now() + self.patience;
        let mut attempt = 0usize;
        loop {
            let url = format!("{}{path}", self.urls[attempt % self.urls.len()]);
            attempt += 1;
            let mut rb = self
                .http
                .request(method.clone(), &url)
                .bearer_auth(API_TOKEN);
            if let Some(b) = body {
                rb = rb.json(b);
            }
            let last_err = match rb.send().await {
                Ok(r) => {
                    let status = r.status().as_u16();
                    let text = r.text().await.unwrap_or_default();
                    if status < 500 {
                        match serde_json::from_str::<Envelope<T>>(&text) {
                            Ok(env) if env.success => match env.data {
                                Some(d) => return Ok(Answer::Ok(d)),
                                None => bail!("{method} {path}: success without data"),
                            },
                            Ok(env) => return Ok(Answer::Refused(status, env.code, env.msg)),
                            Err(e) => {
                                return Err(e).with_context(|| {
                                    format!("{method} {path}: unreadable answer {status}: {text}")
                                });
                            }
                        }
                    }
                    format!("HTTP {status}: {text}")
                }
                Err(e) => e.to_string(),
            };
            if tokio::time::Instant::now() >= until {
                bail!("{method} {path}: gave up: {last_err}");
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    }

    /// `POST /api/orders`.
    ///
    /// # Errors
    /// No gateway answered within the patience.
    pub async fn submit(
        &self,
        task_id: &str,
        intent: &serde_json::Value,
    ) -> anyhow::Result<Answer<SubmitOrderAck>> {
        let body = serde_json::json!({"task_id": task_id, "site": "rakuten", "intent": intent});
        self.call(reqwest::Method::POST, "/api/orders", Some(&body))
            .await
    }

    /// `POST /api/orders/{id}/reclaim?worker_id=…`.
    ///
    /// # Errors
    /// No gateway answered within the patience.
    pub async fn reclaim(
        &self,
        task_id: &str,
        worker_id: &str,
    ) -> anyhow::Result<Answer<serde_json::Value>> {
        self.call(
            reqwest::Method::POST,
            &format!("/api/orders/{task_id}/reclaim?worker_id={worker_id}"),
            None,
        )
        .await
    }

    /// Every task (all pages), optionally of one status.
    ///
    /// # Errors
    /// No gateway answered, or a page was refused.
    pub async fn list_all(&self, status: Option<&str>) -> anyhow::Result<Vec<TaskSummary>> {
        let mut out = Vec::new();
        let mut offset = 0i64;
        loop {
            let mut path = format!("/api/orders?limit=200&offset={offset}");
            if let Some(s) = status {
                path.push_str(&format!("&status={s}"));
            }
            match self
                .call::<Page<TaskSummary>>(reqwest::Method::GET, &path, None)
                .await?
            {
                Answer::Ok(p) => {
                    let n = p.items.len() as i64;
                    out.extend(p.items);
                    offset += n;
                    if n == 0 || offset >= p.total {
                        return Ok(out);
                    }
                }
                Answer::Refused(s, c, m) => bail!("list refused: {s} {c} {m}"),
            }
        }
    }

    /// `GET /api/orders/{id}`; `None` when the gateway does not know the task (6001).
    ///
    /// # Errors
    /// No gateway answered, or another refusal.
    pub async fn detail(&self, task_id: &str) -> anyhow::Result<Option<TaskDetail>> {
        match self
            .call::<TaskDetail>(
                reqwest::Method::GET,
                &format!("/api/orders/{task_id}"),
                None,
            )
            .await?
        {
            Answer::Ok(d) => Ok(Some(d)),
            Answer::Refused(404, _, _) => Ok(None),
            Answer::Refused(s, c, m) => bail!("detail of {task_id} refused: {s} {c} {m}"),
        }
    }
}
