//! The account read-only query channel (spec §11): what upstream asks about the logged-in
//! account, read on the site by the worker behind NAT. **Read this table before changing either
//! channel** (§11.1 asks for it here):
//!
//! | | order tasks (`/api/orders`, `tasks`) | account queries (`/api/account/queries`, `account_queries`) |
//! |---|---|---|
//! | what it does on the site | writes: cart, submit, pay (irreversible) | reads only: order list, order detail |
//! | status vocabulary | `TaskStatus`: queued, leased, running, succeeded, failed, needs_human, stale | `QueryStatus`: queued, leased, succeeded, failed, expired |
//! | concurrency gate | one leased/running task (global or per site): partial unique index `one_active_task` | **none**: any number in flight; account-level serialisation is the worker's account lock (§11.1) |
//! | lease expiry | → `stale`, **never** redelivered automatically; only an explicit reclaim (§5) | → back to `queued` with its attempt count kept, redelivered on the next lease (`attempt + 1`) |
//! | attempts | unbounded, but every one after the first is an operator's reclaim (`lease_count`) | at most `RAKUTEN_QUERY_MAX_ATTEMPTS` (3) leases; a lapse after the last → `failed` ("attempts exhausted") |
//! | TTL | none: a task waits for a worker or a human | `RAKUTEN_QUERY_TTL_SECONDS` (900) since submit: non-terminal → `expired`; the lease SQL also refuses older ones |
//! | retention | kept forever (it is the order record) | terminal queries deleted `RAKUTEN_QUERY_RETENTION_SECONDS` (7 days) after they finished; then 6005 |
//! | lease length / renewal | `RAKUTEN_LEASE_TTL_SECONDS` (300), renewed every 60 s | `RAKUTEN_QUERY_LEASE_TTL_SECONDS` (180), no renewal: the worker bounds each read by `RAKUTEN_ACCOUNT_QUERY_TIMEOUT_SECONDS` (120) instead |
//! | worker heartbeat | every lease/renew/report refreshes `workers.last_seen_at` (offline alert) | **not** refreshed: a live query loop says nothing about the order loop (§11.2) |
//! | what the worker sends back | reports: one row per `(task_id, order state)`, many per task, also after the end (monitoring) | one result per lease: `success` + `result` object, or `error_code` + `error_message`; finishes the query |
//! | result payload | order-state mirror fields (payable, deadline, order id, evidence ref) | site raw JSON passed through plus normalized fields (§11.3); over `RAKUTEN_QUERY_RESULT_MAX_BYTES` → raw dropped (`raw_omitted`), still over → `failed` |
//! | fencing | `lease_token` per grant; stale holder → 6002 | `lease_token` per lease; stale holder, redelivered, lapsed or finished → 6006; an identical repeat from the lease that finished it → acknowledged `duplicate: true` |
//! | not found | 6001 | 6005 (also after retention purged it) |
//! | long-poll wake-up | `LeaseNotifier` (new task, gate freed) + 1 s DB fallback | its own notifier (new query, redelivery) + 1 s DB fallback; never blocks or is blocked by order leases |
//!
//! This module holds the query-specific logic between HTTP and storage: submit validation
//! ([`validate_submit`]), result preparation with the size limit ([`prepare_result`]) and the
//! long-poll ([`lease_with_wait`]). Storage is [`crate::store::QueryStore`]; the sweeper is
//! [`crate::jobs::query_sweeper`]; routes are [`crate::http::routes::queries`].

use std::time::Duration;

use rakuten_types::query::{MAX_PAGES_LIMIT, MAX_PARAMS_BYTES, QueryGrant, QueryKind};
use rakuten_types::{Clock, ErrorCode, Timestamp};
use serde_json::{Map, Value};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::lease::long_poll::FALLBACK_CHECK;
use crate::lease::notify::LeaseNotifier;
use crate::store::StoreError;
use crate::store::queries::{QueryLeaseRequest, QueryOutcome, QueryStore};

/// Longest `order_number`, characters.
pub const MAX_ORDER_NUMBER_CHARS: usize = 64;
/// Longest `error_message` of a result, characters.
pub const MAX_ERROR_MESSAGE_CHARS: usize = 4096;

/// Why a submit or a result was refused (mapped to 422 or 413 by the HTTP layer).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// Invalid (422).
    #[error("{0}")]
    Invalid(String),
    /// Too large (413).
    #[error("{0}")]
    TooLarge(String),
}

fn invalid(msg: impl Into<String>) -> InputError {
    InputError::Invalid(msg.into())
}

/// Checks a submit's `kind` and `params` (§11.2) and returns the kind and the params to store.
/// `params` absent or `null` counts as `{}`.
///
/// - `order_list`: `{since?: RFC 3339 string, max_pages?: integer 1..=20}`;
/// - `order_detail`: `{order_number: 1..=64 of [0-9A-Za-z-]}` (no path-like values);
/// - any other key, or any other kind, is refused (422) here rather than failing after a lease.
///
/// # Errors
/// [`InputError::Invalid`] for the above; [`InputError::TooLarge`] when params exceed
/// [`MAX_PARAMS_BYTES`] serialized.
pub fn validate_submit(kind: &str, params: &Value) -> Result<(QueryKind, String), InputError> {
    let kind: QueryKind = kind.parse().map_err(InputError::Invalid)?;
    let empty = Map::new();
    let obj = match params {
        Value::Null => &empty,
        Value::Object(m) => m,
        _ => return Err(invalid("params must be a JSON object")),
    };
    let mut normalized = None;
    let allowed: &[&str] = match kind {
        QueryKind::OrderList => &["since", "max_pages"],
        QueryKind::OrderDetail => &["order_number"],
    };
    if let Some(k) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(invalid(format!(
            "unknown params key {:?} for kind {}; allowed: {}",
            k.chars().take(64).collect::<String>(),
            kind.as_str(),
            allowed.join(", ")
        )));
    }
    match kind {
        QueryKind::OrderList => {
            if let Some(since) = obj.get("since") {
                let ok = since.as_str().is_some_and(|s| Timestamp::parse(s).is_ok());
                if !ok {
                    return Err(invalid(
                        "params.since must be an RFC 3339 timestamp string, e.g. 2026-08-01T00:00:00Z",
                    ));
                }
            }
            if let Some(mp) = obj.get("max_pages") {
                let Some(n) = rakuten_types::whole::value_as_i64(mp)
                    .filter(|n| (1..=i64::from(MAX_PAGES_LIMIT)).contains(n))
                else {
                    return Err(invalid(format!(
                        "params.max_pages must be an integer from 1 to {MAX_PAGES_LIMIT}"
                    )));
                };
                // Stored as an integer whatever its spelling (`11.0`, D-json-whole-numbers): the
                // worker reads an integer, and `11` and `11.0` are the same request for the
                // idempotency comparison.
                normalized = Some(n);
            }
        }
        QueryKind::OrderDetail => {
            let n = obj.get("order_number").and_then(Value::as_str);
            match n {
                Some(n)
                    if !n.is_empty()
                        && n.len() <= MAX_ORDER_NUMBER_CHARS
                        && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') => {}
                _ => {
                    return Err(invalid(format!(
                        "order_detail needs params.order_number: 1 to {MAX_ORDER_NUMBER_CHARS} \
                         characters of [0-9A-Za-z-]"
                    )));
                }
            }
        }
    }
    let json = match normalized {
        Some(n) => {
            let mut obj = obj.clone();
            obj.insert("max_pages".into(), Value::from(n));
            serde_json::to_string(&obj)
        }
        None => serde_json::to_string(obj),
    }
    .map_err(|e| invalid(e.to_string()))?;
    if json.len() > MAX_PARAMS_BYTES {
        return Err(InputError::TooLarge(format!(
            "params are {} bytes serialized; the limit is {MAX_PARAMS_BYTES}",
            json.len()
        )));
    }
    Ok((kind, json))
}

/// The result must be one of the §11.3 shapes, named by its `kind`: a result without `orders` or
/// `window_fully_covered` would tell upstream nothing while looking like a success.
/// Checked, not rewritten: the result is stored as the worker sent it.
fn check_result_shape(obj: &serde_json::Map<String, Value>) -> Result<(), InputError> {
    use rakuten_types::query::{OrderDetailResult, OrderListResult};
    let value = Value::Object(obj.clone());
    let checked = match obj.get("kind").and_then(Value::as_str) {
        Some("order_list") => serde_json::from_value::<OrderListResult>(value).map(drop),
        Some("order_detail") => serde_json::from_value::<OrderDetailResult>(value).map(drop),
        _ => {
            return Err(invalid(
                "result.kind must be order_list or order_detail (§11.3)",
            ));
        }
    };
    checked.map_err(|e| invalid(format!("result does not have the §11.3 shape: {e}")))
}

/// Turns a worker's result into what is stored (§11.3): a success result must be a JSON object;
/// over `max_bytes` serialized → `raw_pages` (order_list) emptied and `raw` (order_detail) nulled,
/// `raw_omitted: true` set in it; still over → a failure ("result too large", code 1004) so
/// upstream narrows the window and resubmits. A failure keeps its code unchanged.
///
/// # Errors
/// [`InputError::Invalid`] for a malformed result (missing object, not a §11.3 shape, fields on the wrong side,
/// over-long message).
pub fn prepare_result(
    success: bool,
    result: Option<Value>,
    error_code: Option<i32>,
    error_message: Option<String>,
    max_bytes: usize,
) -> Result<QueryOutcome, InputError> {
    if let Some(m) = &error_message {
        if m.chars().count() > MAX_ERROR_MESSAGE_CHARS {
            return Err(invalid(format!(
                "error_message is longer than {MAX_ERROR_MESSAGE_CHARS} characters"
            )));
        }
        if m.chars()
            .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
        {
            return Err(invalid("error_message contains control characters"));
        }
    }
    if !success {
        if result.as_ref().is_some_and(|r| !r.is_null()) {
            return Err(invalid("result is only allowed with success=true"));
        }
        return Ok(QueryOutcome::Failure {
            error_code,
            error_message: error_message
                .filter(|m| !m.trim().is_empty())
                .unwrap_or_else(|| "the worker reported a failure without a message".into()),
        });
    }
    if error_code.is_some() || error_message.is_some() {
        return Err(invalid(
            "error_code and error_message are only allowed with success=false",
        ));
    }
    let Some(Value::Object(mut obj)) = result else {
        return Err(invalid("success=true needs a result object"));
    };
    check_result_shape(&obj)?;
    let full = serde_json::to_string(&obj).map_err(|e| invalid(e.to_string()))?;
    if full.len() <= max_bytes {
        return Ok(QueryOutcome::Success {
            result_json: full,
            raw_omitted: false,
        });
    }
    if obj.contains_key("raw_pages") {
        obj.insert("raw_pages".into(), Value::Array(Vec::new()));
    }
    if obj.contains_key("raw") {
        obj.insert("raw".into(), Value::Null);
    }
    obj.insert("raw_omitted".into(), Value::Bool(true));
    let slim = serde_json::to_string(&obj).map_err(|e| invalid(e.to_string()))?;
    if slim.len() <= max_bytes {
        return Ok(QueryOutcome::Success {
            result_json: slim,
            raw_omitted: true,
        });
    }
    Ok(QueryOutcome::Failure {
        error_code: Some(ErrorCode::PayloadTooLarge.as_i32()),
        error_message: format!(
            "result too large: {} bytes with raw pages, {} bytes without; the limit \
             (RAKUTEN_QUERY_RESULT_MAX_BYTES) is {max_bytes}. Narrow the window (since, \
             max_pages) and submit again",
            full.len(),
            slim.len()
        ),
    })
}

/// The query long-poll: try to lease; if nothing is leasable, wait for the query notifier or the
/// periodic DB check, try again, until `wait` elapses or shutdown. Independent of the order
/// long-poll: it never touches the order gate or the worker heartbeat.
///
/// `query_ttl` bounds which queries may be leased (created after `now - query_ttl`, recomputed
/// at every attempt).
///
/// # Errors
/// [`StoreError`] from the store.
// The order long-poll's six arguments (`lease::long_poll::lease_with_wait`) plus `query_ttl`,
// which moves `req.created_after` forward at each attempt. Four are the shared services the
// route holds (store, notifier, clock, shutdown) and the rest say what to lease and for how
// long; both long-polls take the same services the same way, so a struct for this one alone
// would only rename them.
#[allow(clippy::too_many_arguments)]
pub async fn lease_with_wait(
    store: &dyn QueryStore,
    notifier: &LeaseNotifier,
    clock: &dyn Clock,
    mut req: QueryLeaseRequest,
    query_ttl: Duration,
    wait: Duration,
    shutdown: &CancellationToken,
) -> Result<Option<QueryGrant>, StoreError> {
    let deadline = Instant::now() + wait;
    loop {
        let notified = notifier.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();

        let now = clock.now();
        req.created_after = now.minus(query_ttl);
        if let Some(g) = store.query_lease_next(req.clone(), now).await? {
            return Ok(Some(g));
        }
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let tick = (now + FALLBACK_CHECK).min(deadline);
            tokio::select! {
                _ = &mut notified => break,
                _ = shutdown.cancelled() => return Ok(None),
                _ = tokio::time::sleep_until(tick) => {
                    if tick >= deadline {
                        return Ok(None);
                    }
                    let after = clock.now().minus(query_ttl);
                    if store.query_leasable_exists(req.site.as_deref(), after).await? {
                        break;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn submit_validation_follows_the_kind() {
        assert!(validate_submit("order_list", &Value::Null).is_ok());
        assert!(
            validate_submit(
                "order_list",
                &json!({"since": "2026-08-01T00:00:00Z", "max_pages": 20})
            )
            .is_ok()
        );
        for bad in [
            json!({"max_pages": 0}),
            json!({"max_pages": 11.5}),
            json!({"max_pages": 21.0}),
            json!({"max_pages": 21}),
            json!({"max_pages": "3"}),
            json!({"since": "yesterday"}),
            json!({"since": 5}),
            json!({"pages": 2}),
            json!([1]),
        ] {
            assert!(
                matches!(
                    validate_submit("order_list", &bad),
                    Err(InputError::Invalid(_))
                ),
                "{bad}"
            );
        }
        assert!(validate_submit("order_detail", &json!({"order_number": "1-2-3"})).is_ok());
        for bad in [
            json!({}),
            json!({"order_number": ""}),
            json!({"order_number": 5}),
            json!({"order_number": "../etc/passwd"}),
            json!({"order_number": "a/b"}),
            json!({"order_number": "1 2"}),
            json!({"order_number": "x".repeat(65)}),
        ] {
            assert!(validate_submit("order_detail", &bad).is_err(), "{bad}");
        }
        assert!(validate_submit("order_cancel", &json!({})).is_err());
    }

    #[test]
    fn max_pages_written_with_a_fraction_is_stored_as_an_integer() {
        let (_, stored) = validate_submit(
            "order_list",
            &json!({"since": "0074-09-19T06:45:39Z", "max_pages": 11.0}),
        )
        .unwrap();
        let (_, plain) = validate_submit(
            "order_list",
            &json!({"since": "0074-09-19T06:45:39Z", "max_pages": 11}),
        )
        .unwrap();
        assert_eq!(stored, plain);
        assert!(stored.contains(r#""max_pages":11"#), "{stored}");
        assert!(!stored.contains("11.0"), "{stored}");
    }

    #[test]
    fn result_ids_written_with_a_fraction_are_accepted_and_stored_as_sent() {
        let sent = json!({"kind": "order_list", "since": null, "max_pages": 3.0,
            "window_fully_covered": true, "stop_code": 5002.0,
            "orders": [{"order_number": "1-2-3", "order_date": "2026-08-01T00:00:00Z",
                        "shop_id": -194848.0, "shop_name": "s",
                        "items": [{"item_id": 776.0, "item_name": "i", "item_url": "u"}]}],
            "raw_pages": [{"price": 1.0, "n": 12.50}]});
        match prepare_result(true, Some(sent.clone()), None, None, 1 << 20).unwrap() {
            QueryOutcome::Success { result_json, .. } => {
                let stored: Value = serde_json::from_str(&result_json).unwrap();
                assert_eq!(stored, sent);
                assert!(
                    result_json.contains(r#""shop_id":-194848.0"#),
                    "{result_json}"
                );
            }
            o => panic!("{o:?}"),
        }
        let fraction = json!({"kind": "order_list", "since": null, "max_pages": 1,
            "window_fully_covered": true, "raw_pages": [],
            "orders": [{"order_number": "1", "order_date": "x", "shop_id": 1.5,
                        "shop_name": "s", "items": []}]});
        let e = prepare_result(true, Some(fraction), None, None, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("expected i64"), "{e}");
    }

    #[test]
    fn oversized_results_lose_raw_first_then_fail() {
        let big = "x".repeat(5000);
        let list = |orders: Value, raw_pages: Value| {
            json!({"kind": "order_list", "since": null, "max_pages": 1,
                   "window_fully_covered": true, "orders": orders, "raw_pages": raw_pages})
        };
        let r = list(json!([]), json!([big]));
        match prepare_result(true, Some(r.clone()), None, None, 1024).unwrap() {
            QueryOutcome::Success {
                result_json,
                raw_omitted,
            } => {
                assert!(raw_omitted);
                let v: Value = serde_json::from_str(&result_json).unwrap();
                assert_eq!(v["raw_pages"], json!([]));
                assert_eq!(v["raw_omitted"], true);
            }
            o => panic!("{o:?}"),
        }
        let order = json!({"order_number": "1-2-3", "order_date": "2026-08-01T00:00:00Z",
                           "shop_id": 1, "shop_name": big, "items": []});
        let r = list(json!([order]), json!([]));
        assert!(matches!(
            prepare_result(true, Some(r), None, None, 1024).unwrap(),
            QueryOutcome::Failure {
                error_code: Some(1004),
                ..
            }
        ));
    }
}
