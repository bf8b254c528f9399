//! The account-query loop (spec §11): beside the order loop, with its own lease polling
//! (`GET /api/account/queries/lease`). Each leased query is read on the site under the account
//! lock — the same lock every order step takes, so reads never interleave with a write — and
//! within `RAKUTEN_ACCOUNT_QUERY_TIMEOUT_SECONDS`, the lock wait included.
//!
//! Guarantees:
//! - every leased query gets exactly one result call: a success, or a failure with a code (site
//!   codes unchanged; 5007 on timeout; 1003 for params the worker cannot use; 1500 when the
//!   read panicked). The read runs in a spawned task, so a panic is a `JoinError`, not a dead
//!   loop; a timeout aborts that task (releasing the lock) and is reported, never left to the
//!   lease expiry;
//! - the result call is retried on network faults and 5xx (the gateway acknowledges an
//!   identical repeat from the same lease); a 6006 answer drops the result without retrying
//!   (the query was redelivered or finished, §11.4); a 413 is retried once without raw pages;
//! - the loop never dies: a failed lease request backs off and polls again. Only shutdown stops
//!   it; a query in flight at that moment gets no result and is redelivered after its lease
//!   lapses (safe: it is a read).
//!
//! `order_list` pages the site's list (newest first) up to `max_pages` and back to `since`:
//! `window_fully_covered` is true only when paging saw an order older than `since` or the last
//! page. A site error on page 1 fails the query with the site's code; on a later page (login lost,
//! page changed, site unavailable) the pages read so far are returned as a success with
//! `window_fully_covered: false` and `stop_code`/`stop_reason` naming the error (D-query-partial-success).

use std::sync::Arc;

use rakuten_types::query::{
    MAX_PAGES_LIMIT, OrderListResult, QueryGrant, QueryKind, QueryResultBody, QueryStatus,
};
use rakuten_types::{ErrorCode, QueryId, SITE_RAKUTEN, Timestamp};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::ctx::WorkerCtx;
use crate::gateway_client::{GatewayError, run_turns};
use crate::site::{Site, SiteError};

/// Longest error message sent, characters (the gateway takes 4096).
const MAX_MESSAGE_CHARS: usize = 2000;

/// A read that did not produce a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryFailure {
    /// Error code sent (site codes unchanged).
    pub code: i32,
    /// Error text sent.
    pub message: String,
}

impl QueryFailure {
    fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        QueryFailure {
            code: code.as_i32(),
            message: message.into(),
        }
    }
}

impl From<SiteError> for QueryFailure {
    fn from(e: SiteError) -> Self {
        QueryFailure::new(e.kind.code(), e.message)
    }
}

/// What became of a leased query's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// The gateway stored it (or acknowledged an identical repeat); the query's status now.
    Stored(QueryStatus),
    /// 6006: the lease was gone; the result was dropped.
    Dropped,
    /// Refused otherwise, or shutdown came first; logged.
    Undelivered(String),
}

/// What one turn of the loop did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryTick {
    /// The long-poll returned nothing.
    Idle,
    /// A query was read and its result sent.
    Handled {
        /// The query.
        query_id: QueryId,
        /// What happened to the result.
        delivery: Delivery,
    },
}

/// The account-query loop.
#[derive(Debug, Clone)]
pub struct QueryLoop {
    ctx: Arc<WorkerCtx>,
}

impl QueryLoop {
    /// A loop over the shared context.
    pub fn new(ctx: Arc<WorkerCtx>) -> Self {
        QueryLoop { ctx }
    }

    /// One turn: long-poll a query lease (`RAKUTEN_LEASE_WAIT_SECONDS`), read, send the result.
    ///
    /// # Errors
    /// Only the lease request's own failure; everything after a lease is handled inside.
    pub async fn run_once(&self) -> Result<QueryTick, GatewayError> {
        let grant = self
            .ctx
            .gateway
            .query_lease(self.ctx.settings.lease_wait_seconds, Some(SITE_RAKUTEN))
            .await?;
        let Some(grant) = grant else {
            return Ok(QueryTick::Idle);
        };
        tracing::info!(query_id = %grant.query_id, kind = grant.kind.as_str(), attempt = grant.attempt, "account query leased");
        let outcome = self.execute(&grant).await;
        let delivery = self.deliver(&grant, outcome).await;
        Ok(QueryTick::Handled {
            query_id: grant.query_id,
            delivery,
        })
    }

    /// Reads the query on the site in a spawned task, bounded by the query timeout (lock wait
    /// included). Never fails: every error, timeout and panic becomes a [`QueryFailure`].
    pub async fn execute(&self, grant: &QueryGrant) -> Result<Value, QueryFailure> {
        let ctx = self.ctx.clone();
        let g = grant.clone();
        let handle = tokio::spawn(async move { read(&ctx, &g).await });
        let abort = handle.abort_handle();
        let limit = self.ctx.settings.account_query_timeout;
        match tokio::time::timeout(limit, handle).await {
            Err(_) => {
                // Dropping the task releases the account lock if it held it.
                abort.abort();
                Err(QueryFailure::new(
                    ErrorCode::SiteTimeout,
                    format!(
                        "the read did not finish within RAKUTEN_ACCOUNT_QUERY_TIMEOUT_SECONDS \
                         ({:.1} s, account lock wait included); resubmit later",
                        limit.as_secs_f64()
                    ),
                ))
            }
            Ok(Err(join)) => {
                let what = if join.is_panic() {
                    let p = join.into_panic();
                    let msg = p
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "non-text panic".into());
                    format!("the worker panicked while reading: {msg}")
                } else {
                    "the read was cancelled".to_owned()
                };
                tracing::error!(query_id = %grant.query_id, error = %what, "account query read crashed");
                Err(QueryFailure::new(ErrorCode::Internal, what))
            }
            Ok(Ok(r)) => r,
        }
    }

    /// Sends the one result of this lease (see the module doc for retries, 6006 and 413).
    pub async fn deliver(
        &self,
        grant: &QueryGrant,
        outcome: Result<Value, QueryFailure>,
    ) -> Delivery {
        let worker_id = self.ctx.settings.worker_id.clone();
        let mut body = match outcome {
            Ok(result) => QueryResultBody {
                worker_id: Some(worker_id),
                lease_token: Some(grant.lease_token.clone()),
                success: true,
                result: Some(result),
                error_code: None,
                error_message: None,
            },
            Err(f) => QueryResultBody {
                worker_id: Some(worker_id),
                lease_token: Some(grant.lease_token.clone()),
                success: false,
                result: None,
                error_code: Some(f.code),
                error_message: Some(clean_message(&f.message)),
            },
        };
        let id = &grant.query_id;
        let mut trimmed = false;
        loop {
            match self.ctx.gateway.query_result(id, &body).await {
                Ok(ack) => {
                    if body.success && ack.status == QueryStatus::Failed {
                        tracing::warn!(query_id = %id, msg = ack.error_message.as_deref().unwrap_or(""), "result stored as a failure (too large)");
                    } else {
                        tracing::info!(query_id = %id, status = %ack.status, raw_omitted = ack.raw_omitted, duplicate = ack.duplicate, "account query result stored");
                    }
                    return Delivery::Stored(ack.status);
                }
                Err(GatewayError::Rejected { code, msg, .. })
                    if code == ErrorCode::QueryLeaseInvalid.as_i32() =>
                {
                    tracing::info!(query_id = %id, msg = %msg, "result refused with 6006 (redelivered or finished); dropped, not resent");
                    return Delivery::Dropped;
                }
                Err(GatewayError::Rejected { status: 413, .. }) if body.success && !trimmed => {
                    tracing::warn!(query_id = %id, "result over the gateway's body limit; resending without raw pages");
                    trimmed = true;
                    if let Some(Value::Object(r)) = body.result.as_mut() {
                        drop_raw(r);
                    }
                }
                Err(GatewayError::Rejected { status: 413, .. }) if body.success => {
                    body = QueryResultBody {
                        success: false,
                        result: None,
                        error_code: Some(ErrorCode::PayloadTooLarge.as_i32()),
                        error_message: Some(
                            "result too large for the gateway even without raw pages; narrow \
                             the window (since, max_pages) and resubmit"
                                .into(),
                        ),
                        ..body
                    };
                }
                Err(e) => {
                    tracing::error!(query_id = %id, error = %e, "account query result not delivered");
                    return Delivery::Undelivered(e.to_string());
                }
            }
        }
    }

    /// Runs turns until `shutdown`, backing off after a failed lease request.
    pub async fn run(self, shutdown: CancellationToken) {
        tracing::info!(worker_id = %self.ctx.settings.worker_id, site = self.ctx.site.name(), "account query loop started");
        run_turns(
            &shutdown,
            self.ctx.settings.retry_max,
            "query lease request",
            || self.run_once(),
        )
        .await;
        tracing::info!("account query loop stopped");
    }
}

/// Bounded and free of control characters other than line breaks and tabs, so the gateway never
/// refuses a failure for its text (a refused result would leave the query to its lease expiry).
fn clean_message(m: &str) -> String {
    m.chars()
        .take(MAX_MESSAGE_CHARS)
        .map(|c| {
            if c.is_control() && !matches!(c, '\n' | '\r' | '\t') {
                ' '
            } else {
                c
            }
        })
        .collect()
}

fn drop_raw(r: &mut serde_json::Map<String, Value>) {
    if r.contains_key("raw_pages") {
        r.insert("raw_pages".into(), Value::Array(Vec::new()));
    }
    if r.contains_key("raw") {
        r.insert("raw".into(), Value::Null);
    }
    r.insert("raw_omitted".into(), Value::Bool(true));
}

fn bad_params(msg: impl Into<String>) -> QueryFailure {
    QueryFailure::new(ErrorCode::Validation, msg)
}

/// The read itself, under the account lock.
async fn read(ctx: &WorkerCtx, grant: &QueryGrant) -> Result<Value, QueryFailure> {
    let p = &grant.params;
    let to_value = |v: Result<Value, serde_json::Error>| {
        v.map_err(|e| QueryFailure::new(ErrorCode::Internal, format!("serializing: {e}")))
    };
    match grant.kind {
        QueryKind::OrderList => {
            let since = match p.get("since") {
                None | Some(Value::Null) => None,
                Some(v) => Some(
                    v.as_str()
                        .and_then(|s| Timestamp::parse(s).ok())
                        .ok_or_else(|| bad_params("params.since is not an RFC 3339 timestamp"))?,
                ),
            };
            let max_pages = match p.get("max_pages") {
                None | Some(Value::Null) => ctx.settings.account_query_default_max_pages,
                Some(v) => v
                    .as_u64()
                    .filter(|n| (1..=u64::from(MAX_PAGES_LIMIT)).contains(n))
                    .ok_or_else(|| bad_params("params.max_pages must be 1..=20"))?
                    as u32,
            };
            let _lock = ctx.locks.lock(ctx.site.account()).await;
            let r = read_order_list(ctx.site.as_ref(), since, max_pages).await?;
            to_value(serde_json::to_value(r))
        }
        QueryKind::OrderDetail => {
            let n = p
                .get("order_number")
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .ok_or_else(|| bad_params("params.order_number is required"))?;
            let _lock = ctx.locks.lock(ctx.site.account()).await;
            let d = ctx.site.order_detail(n).await?;
            to_value(serde_json::to_value(d.value))
        }
    }
}

/// Pages the order list (newest first) up to `max_pages` and back to `since` (inclusive).
/// The caller holds the account lock.
///
/// # Errors
/// The site's error when page 1 cannot be read; later pages' errors end paging instead (see the
/// module doc).
pub async fn read_order_list(
    site: &dyn Site,
    since: Option<Timestamp>,
    max_pages: u32,
) -> Result<OrderListResult, SiteError> {
    let mut orders = Vec::new();
    let mut raw_pages = Vec::new();
    let mut covered = false;
    let mut stop: Option<SiteError> = None;
    for page in 1..=max_pages {
        let step = match site.list_orders(page).await {
            Ok(s) => s,
            Err(e) if page == 1 => return Err(e),
            Err(e) => {
                stop = Some(e);
                break;
            }
        };
        let listed = step.value;
        raw_pages.push(listed.raw);
        let mut reached_since = false;
        for o in listed.orders {
            // An unparseable date cannot prove the window's end: keep the order, read on.
            let older = match (since, Timestamp::parse(&o.order_date)) {
                (Some(s), Ok(d)) => d < s,
                _ => false,
            };
            if older {
                reached_since = true;
            } else {
                orders.push(o);
            }
        }
        if reached_since || !listed.has_next {
            covered = true;
            break;
        }
    }
    Ok(OrderListResult {
        kind: QueryKind::OrderList,
        since,
        max_pages,
        window_fully_covered: covered,
        orders,
        raw_pages,
        stop_code: stop.as_ref().map(|e| e.kind.code().as_i32()),
        stop_reason: stop.map(|e| e.message),
        raw_omitted: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_messages_are_bounded_and_clean() {
        let m = clean_message(&format!("a\u{0}b\nc{}", "x".repeat(5000)));
        assert!(m.starts_with("a b\nc"));
        assert_eq!(m.chars().count(), MAX_MESSAGE_CHARS);
    }
}
