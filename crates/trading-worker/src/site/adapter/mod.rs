//! `RAKUTEN_SITE=adapter`: the site seam over the site adapter protocol: an adapter
//! process on loopback works the site (a browser script for the real site, or one of the
//! simulated shop's adapters in `crates/site-adapter`) and answers each step with its value and
//! evidence ([`wire`]). Every journal, renewal and recovery rule of the worker is unchanged: this
//! is one more [`Site`].
//!
//! Failure mapping: the adapter's own codes 5001–5007 pass through (5004, the worker's amount
//! guard, counts as 5002: an adapter has no business deciding it). No answer → 5006, a timeout →
//! 5007. A non-200 status or a body that is not a v1 answer ("garbage") → 5006 too, not 5002:
//! a broken adapter cannot tell whether it acted, so after the submit the worker must verify on
//! the order list instead of taking the failure for a refusal (D-broken-adapter-answer-5006).
//!
//! - [`wire`]: the request and answer shapes.
//! - [`server`]: serves any [`Site`] over the protocol (the simulated shop's adapters use it).
//! - [`check`]: the conformance kit (`trading-worker adapter-check`).

pub mod check;
pub mod server;
pub mod wire;

use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use rakuten_types::query::{OrderDetailResult, QueryKind};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::{
    CartLine, CartView, ConfirmView, OrderListPage, PageSnapshot, PayOutcome, Remark, Site,
    SiteError, SiteErrorKind, Step, stage_to_state,
};
use wire::{Answer, PROTOCOL_VERSION, path};

/// Largest adapter answer read, bytes (HTML plus a base64 screenshot).
pub const MAX_ANSWER_BYTES: usize = 32 * 1024 * 1024;

/// Why an adapter URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdapterUrlError {
    /// Not an http(s) URL.
    #[error("not an http(s) URL: {0}")]
    Invalid(String),
    /// Host is not loopback and remote adapters are not allowed.
    #[error(
        "host {0:?} is not a loopback address (127.0.0.0/8, ::1, localhost); the adapter sees the account's session and pages, so a remote one needs RAKUTEN_SITE_ADAPTER_ALLOW_REMOTE=true"
    )]
    NotLoopback(String),
}

/// Checks an adapter base URL: http(s), and on loopback unless `allow_remote`. Returns it
/// without a trailing `/`.
///
/// # Errors
/// [`AdapterUrlError`].
pub fn check_adapter_url(url: &str, allow_remote: bool) -> Result<String, AdapterUrlError> {
    let s = url.trim().trim_end_matches('/');
    let u = reqwest::Url::parse(s).map_err(|e| AdapterUrlError::Invalid(e.to_string()))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(AdapterUrlError::Invalid(s.to_owned()));
    }
    let loopback = match u.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => return Err(AdapterUrlError::Invalid(s.to_owned())),
    };
    if !loopback && !allow_remote {
        return Err(AdapterUrlError::NotLoopback(
            u.host_str().unwrap_or_default().to_owned(),
        ));
    }
    Ok(s.to_owned())
}

/// The adapter seam: a client of one adapter.
#[derive(Debug, Clone)]
pub struct AdapterSite {
    base: String,
    http: reqwest::Client,
}

impl AdapterSite {
    /// A client for the adapter at `base` (checked by [`check_adapter_url`]), each call bounded
    /// by `timeout`.
    ///
    /// # Errors
    /// The HTTP client cannot be built.
    pub fn new(base: &str, timeout: Duration) -> Result<Self, reqwest::Error> {
        Ok(AdapterSite {
            base: base.trim_end_matches('/').to_owned(),
            http: reqwest::Client::builder().timeout(timeout).build()?,
        })
    }

    /// The adapter's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `GET /v1/info`.
    ///
    /// # Errors
    /// 5006/5007 as for every call; a version other than [`PROTOCOL_VERSION`] is 5006.
    pub async fn info(&self) -> Result<wire::Info, SiteError> {
        let url = format!("{}{}", self.base, path::INFO);
        let resp = self.http.get(&url).send().await.map_err(transport)?;
        let (status, bytes) = read_bounded(resp).await?;
        let info: wire::Info = serde_json::from_slice(&bytes)
            .ok()
            .filter(|_| status == 200)
            .ok_or_else(|| garbage(path::INFO, status, &bytes))?;
        if info.protocol != PROTOCOL_VERSION {
            return Err(garbage(path::INFO, status, b"protocol version mismatch"));
        }
        Ok(info)
    }

    /// `POST /v1/session/check`.
    ///
    /// # Errors
    /// As every call.
    pub async fn session_check(&self) -> Result<Step<bool>, SiteError> {
        let s: Step<wire::SessionValue> = self.call(path::SESSION_CHECK, &json!({})).await?;
        Ok(Step {
            value: s.value.logged_in,
            page: s.page,
        })
    }

    /// One protocol call: the value and its page, or the mapped failure.
    async fn call<Q: Serialize + Sync, T: DeserializeOwned>(
        &self,
        op: &'static str,
        body: &Q,
    ) -> Result<Step<T>, SiteError> {
        let url = format!("{}{op}", self.base);
        let resp = self
            .http
            .post(&url)
            .json(body)
            .send()
            .await
            .map_err(transport)?;
        let (status, bytes) = read_bounded(resp).await?;
        if status != 200 {
            return Err(garbage(op, status, &bytes));
        }
        let answer: Answer<serde_json::Value> =
            serde_json::from_slice(&bytes).map_err(|_| garbage(op, status, &bytes))?;
        if answer.protocol != PROTOCOL_VERSION {
            return Err(garbage(op, status, b"protocol version mismatch"));
        }
        let page = match answer.evidence {
            Some(e) => Some(snapshot(e).ok_or_else(|| garbage(op, status, b"bad png_base64"))?),
            None => None,
        };
        match (answer.ok, answer.value, answer.error) {
            (true, value, _) => Ok(Step {
                // `null` (or no value) is the value of an operation that returns none.
                value: serde_json::from_value(value.unwrap_or_default())
                    .map_err(|e| garbage(op, status, format!("value: {e}").as_bytes()))?,
                page: page.unwrap_or_else(|| PageSnapshot {
                    url: url.clone(),
                    method: "POST".into(),
                    http_status: 0,
                    html: None,
                    png: None,
                }),
            }),
            (false, _, Some(e)) => {
                let kind = kind_of(e.code).ok_or_else(|| {
                    garbage(op, status, format!("unknown code {}", e.code).as_bytes())
                })?;
                Err(SiteError {
                    kind,
                    message: format!("adapter {op}: {} ({})", e.message, e.code),
                    page,
                })
            }
            (false, _, None) => Err(garbage(op, status, b"ok: false without an error")),
        }
    }
}

/// A protocol code → the seam's kind (`None`: not a site code).
pub fn kind_of(code: i32) -> Option<SiteErrorKind> {
    Some(match code {
        5001 => SiteErrorKind::LoginLost,
        // 5004 is the worker's own amount guard: from an adapter it is a refusal.
        5002 | 5004 => SiteErrorKind::UnexpectedPage,
        5003 => SiteErrorKind::NotImplemented,
        5005 => SiteErrorKind::Challenge,
        5006 => SiteErrorKind::Unavailable,
        5007 => SiteErrorKind::Timeout,
        _ => return None,
    })
}

fn transport(e: reqwest::Error) -> SiteError {
    let kind = if e.is_timeout() {
        SiteErrorKind::Timeout
    } else {
        SiteErrorKind::Unavailable
    };
    SiteError::new(kind, format!("site adapter: {e}"))
}

fn garbage(op: &str, status: u16, body: &[u8]) -> SiteError {
    let head: String = String::from_utf8_lossy(&body[..body.len().min(200)])
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    SiteError::new(
        SiteErrorKind::Unavailable,
        format!(
            "site adapter {op}: not a protocol v{PROTOCOL_VERSION} answer (HTTP {status}): {head:?}; whether it acted is unknown"
        ),
    )
}

async fn read_bounded(mut resp: reqwest::Response) -> Result<(u16, Vec<u8>), SiteError> {
    let status = resp.status().as_u16();
    let mut bytes = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(transport)? {
        if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(SiteError::new(
                SiteErrorKind::Unavailable,
                format!("site adapter: answer over {MAX_ANSWER_BYTES} bytes"),
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok((status, bytes))
}

fn snapshot(e: wire::Evidence) -> Option<PageSnapshot> {
    let png = match e.png_base64 {
        Some(b) => Some(base64::engine::general_purpose::STANDARD.decode(b).ok()?),
        None => None,
    };
    Some(PageSnapshot {
        url: e.url,
        method: e.method,
        http_status: e.http_status,
        html: e.html,
        png,
    })
}

/// A page → its wire evidence.
pub fn evidence_of(p: &PageSnapshot) -> wire::Evidence {
    wire::Evidence {
        url: p.url.clone(),
        method: p.method.clone(),
        http_status: p.http_status,
        html: p.html.clone(),
        png_base64: p
            .png
            .as_ref()
            .map(|b| base64::engine::general_purpose::STANDARD.encode(b)),
    }
}

impl From<&ConfirmView> for wire::ConfirmValue {
    fn from(c: &ConfirmView) -> Self {
        wire::ConfirmValue {
            subtotal_yen: c.subtotal_yen,
            shipping_yen: c.shipping_yen,
            payable_yen: c.payable_yen,
            payment_method: c.payment_method.clone(),
            pay_deadline: c.pay_deadline,
        }
    }
}

impl From<wire::ConfirmValue> for ConfirmView {
    fn from(c: wire::ConfirmValue) -> Self {
        ConfirmView {
            subtotal_yen: c.subtotal_yen,
            shipping_yen: c.shipping_yen,
            payable_yen: c.payable_yen,
            payment_method: c.payment_method,
            pay_deadline: c.pay_deadline,
        }
    }
}

impl From<&Remark> for wire::RemarkValue {
    fn from(r: &Remark) -> Self {
        match r {
            Remark::NotShown => wire::RemarkValue::NotShown,
            Remark::Empty => wire::RemarkValue::Empty,
            Remark::Text(t) => wire::RemarkValue::Text(t.clone()),
        }
    }
}

impl From<wire::RemarkValue> for Remark {
    fn from(r: wire::RemarkValue) -> Self {
        match r {
            wire::RemarkValue::NotShown => Remark::NotShown,
            wire::RemarkValue::Empty => Remark::Empty,
            wire::RemarkValue::Text(t) if t.trim().is_empty() => Remark::Empty,
            wire::RemarkValue::Text(t) => Remark::Text(t.trim().to_owned()),
        }
    }
}

impl From<&PayOutcome> for wire::PayValue {
    fn from(p: &PayOutcome) -> Self {
        match p {
            PayOutcome::Paid => wire::PayValue::Paid,
            PayOutcome::ChallengeRequired(c) => wire::PayValue::ChallengeRequired {
                challenge: c.clone(),
            },
            PayOutcome::AwaitingPayment {
                pay_deadline,
                detail,
            } => wire::PayValue::AwaitingPayment {
                pay_deadline: *pay_deadline,
                detail: detail.clone(),
            },
        }
    }
}

impl From<wire::PayValue> for PayOutcome {
    fn from(p: wire::PayValue) -> Self {
        match p {
            wire::PayValue::Paid => PayOutcome::Paid,
            wire::PayValue::ChallengeRequired { challenge } => {
                PayOutcome::ChallengeRequired(challenge)
            }
            wire::PayValue::AwaitingPayment {
                pay_deadline,
                detail,
            } => PayOutcome::AwaitingPayment {
                pay_deadline,
                detail,
            },
        }
    }
}

fn map<T, U>(s: Step<T>, f: impl FnOnce(T) -> U) -> Step<U> {
    Step {
        value: f(s.value),
        page: s.page,
    }
}

#[async_trait]
impl Site for AdapterSite {
    fn name(&self) -> &'static str {
        "adapter"
    }

    fn account(&self) -> &str {
        &self.base
    }

    async fn cart_add(&self, line: &CartLine) -> Result<Step<()>, SiteError> {
        let req = wire::CartAddReq {
            item_id: line.item_id,
            variant_id: line.variant_id.clone(),
            quantity: line.quantity,
        };
        let s: Step<serde_json::Value> = self.call(path::CART_ADD, &req).await?;
        Ok(map(s, |_| ()))
    }

    async fn cart_check(&self) -> Result<Step<CartView>, SiteError> {
        let s: Step<wire::CartValue> = self.call(path::CART_CHECK, &json!({})).await?;
        Ok(map(s, |c| CartView {
            lines: c
                .lines
                .into_iter()
                .map(|l| (l.item_id, l.variant_id, l.quantity, l.unit_price_yen))
                .collect(),
            subtotal_yen: c.subtotal_yen,
        }))
    }

    async fn order_confirm(&self) -> Result<Step<ConfirmView>, SiteError> {
        let s: Step<wire::ConfirmValue> = self.call(path::ORDER_CONFIRM, &json!({})).await?;
        Ok(map(s, ConfirmView::from))
    }

    async fn order_submit(
        &self,
        confirm: &ConfirmView,
        note: &str,
    ) -> Result<Step<String>, SiteError> {
        // The worker writes the task id into the remark (execute/submit.rs): it is the key.
        let req = wire::SubmitReq {
            idempotency_key: note.to_owned(),
            note: note.to_owned(),
            confirm: confirm.into(),
        };
        let s: Step<wire::SubmitValue> = self.call(path::ORDER_SUBMIT, &req).await?;
        Ok(map(s, |v| v.site_order_id))
    }

    async fn pay(&self, site_order_id: &str, task_id: &str) -> Result<Step<PayOutcome>, SiteError> {
        let req = wire::PayReq {
            idempotency_key: task_id.to_owned(),
            site_order_id: site_order_id.to_owned(),
        };
        let s: Step<wire::PayValue> = self.call(path::ORDER_PAY, &req).await?;
        Ok(map(s, PayOutcome::from))
    }

    async fn list_orders(&self, page: u32) -> Result<Step<OrderListPage>, SiteError> {
        let s: Step<wire::ListValue> = self
            .call(path::ORDERS_LIST, &wire::ListReq { page })
            .await?;
        Ok(map(s, |v| {
            let (orders, remarks) = v
                .orders
                .into_iter()
                .map(|o| (o.order, Remark::from(o.remark)))
                .unzip();
            OrderListPage {
                orders,
                remarks,
                has_next: v.has_next,
                raw: v.raw,
            }
        }))
    }

    async fn order_detail(&self, order_number: &str) -> Result<Step<OrderDetailResult>, SiteError> {
        let req = wire::DetailReq {
            order_number: order_number.to_owned(),
        };
        let s: Step<wire::DetailValue> = self.call(path::ORDERS_DETAIL, &req).await?;
        Ok(map(s, |d| OrderDetailResult {
            kind: QueryKind::OrderDetail,
            order_number: order_number.to_owned(),
            found: d.found,
            order_state: d.stage_label.as_deref().and_then(stage_to_state),
            stage_label: d.stage_label,
            raw_available: d.raw.is_some(),
            raw: d.raw,
            raw_omitted: false,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_adapter_urls_pass_unless_remote_is_allowed() {
        for ok in [
            "http://127.0.0.1:31111",
            "http://127.3.4.5/",
            "http://[::1]:8080",
            "http://localhost:9",
        ] {
            assert!(check_adapter_url(ok, false).is_ok(), "{ok}");
        }
        for remote in [
            "http://10.0.0.2:31111",
            "https://adapter.example",
            "http://[2001:db8::1]",
        ] {
            assert!(
                matches!(
                    check_adapter_url(remote, false),
                    Err(AdapterUrlError::NotLoopback(_))
                ),
                "{remote}"
            );
            assert!(check_adapter_url(remote, true).is_ok(), "{remote}");
        }
        assert!(matches!(
            check_adapter_url("ftp://127.0.0.1", true),
            Err(AdapterUrlError::Invalid(_))
        ));
    }

    #[test]
    fn every_site_code_maps_and_others_do_not() {
        for c in 5001..=5007 {
            assert!(kind_of(c).is_some(), "{c}");
            assert_eq!(
                kind_of(c).unwrap().code().as_i32(),
                if c == 5004 { 5002 } else { c }
            );
        }
        assert!(kind_of(5000).is_none());
        assert!(kind_of(200).is_none());
    }
}
