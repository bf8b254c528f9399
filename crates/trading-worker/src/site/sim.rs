//! The simulated shop (`crates/shop-sim`) over HTTP. Pages are HTML with the state embedded in
//! `<script id="__INITIAL_STATE__" type="application/json">`; the HTML is kept as evidence and the
//! state is read from the script element.

// A `SiteError` carries the page it failed on (evidence, §6.1), so it is large by design, here as
// in the `Site` trait's methods.
#![allow(clippy::result_large_err)]

use std::time::Duration;

use async_trait::async_trait;
use rakuten_types::Timestamp;
use rakuten_types::query::{OrderDetailResult, OrderItem, OrderSummary, QueryKind};
use serde_json::{Value, json};

use super::{
    CartLine, CartView, ConfirmView, OrderListPage, PageSnapshot, PayOutcome, Remark, Site,
    SiteError, SiteErrorKind, Step, stage_to_state,
};
use crate::settings::Secret;

const STATE_MARKER: &str = "<script id=\"__INITIAL_STATE__\" type=\"application/json\">";

/// Reads the embedded state of a page.
pub fn extract_state(html: &str) -> Option<Value> {
    let start = html.find(STATE_MARKER)? + STATE_MARKER.len();
    let end = start + html[start..].find("</script>")?;
    serde_json::from_str(&html[start..end]).ok()
}

/// The simulated shop seam.
#[derive(Debug, Clone)]
pub struct SimSite {
    base: String,
    session: Secret,
    http: reqwest::Client,
}

impl SimSite {
    /// A seam for the shop at `base` (no trailing slash), logged in with `session`.
    ///
    /// # Errors
    /// The HTTP client cannot be built.
    pub fn new(base: &str, session: Secret, timeout: Duration) -> Result<Self, reqwest::Error> {
        Ok(SimSite {
            base: base.trim_end_matches('/').to_owned(),
            session,
            http: reqwest::Client::builder().timeout(timeout).build()?,
        })
    }

    async fn fetch(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<(PageSnapshot, Value), SiteError> {
        let url = format!("{}{path}", self.base);
        let mut req = match method {
            "GET" => self.http.get(&url),
            _ => self.http.post(&url),
        };
        req = req.header("cookie", format!("session={}", self.session.expose()));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let mut snap = PageSnapshot {
            url: url.clone(),
            method: method.to_owned(),
            http_status: 0,
            html: None,
            png: None,
        };
        let transport = |e: reqwest::Error| {
            let kind = if e.is_timeout() {
                SiteErrorKind::Timeout
            } else {
                SiteErrorKind::Unavailable
            };
            SiteError::new(kind, format!("{method} {path}: {e}"))
        };
        let resp = req.send().await.map_err(transport)?;
        snap.http_status = resp.status().as_u16();
        let html = resp.text().await.map_err(|e| {
            let mut err = transport(e);
            err.message = format!(
                "{} (status {} arrived, body broken)",
                err.message, snap.http_status
            );
            err
        })?;
        snap.html = Some(html);
        read_page(snap)
    }
}

/// Reads the state of a page that arrived (`snap.html` set): a 5xx is 5006, a page without state
/// 5002, the login page 5001, the shop's error page 5002. Shared by every seam that works the
/// simulated shop (this one, and the browser adapter of `crates/site-adapter`).
///
/// # Errors
/// As above; the error keeps the page.
pub fn read_page(snap: PageSnapshot) -> Result<(PageSnapshot, Value), SiteError> {
    let (method, path) = (snap.method.as_str(), snap.url.as_str());
    let fail = |kind, msg: String| SiteError {
        kind,
        message: msg,
        page: Some(snap.clone()),
    };
    if snap.http_status >= 500 {
        return Err(fail(
            SiteErrorKind::Unavailable,
            format!("{method} {path}: HTTP {}", snap.http_status),
        ));
    }
    let Some(state) = snap.html.as_deref().and_then(extract_state) else {
        return Err(fail(
            SiteErrorKind::UnexpectedPage,
            format!("{method} {path}: no page state"),
        ));
    };
    if state.get("logged_in") == Some(&Value::Bool(false)) {
        return Err(fail(
            SiteErrorKind::LoginLost,
            "the site session is logged out".into(),
        ));
    }
    if state.get("page").and_then(Value::as_str) == Some("error") {
        let m = state["error"]["message"].as_str().unwrap_or("error page");
        return Err(fail(
            SiteErrorKind::UnexpectedPage,
            format!("{method} {path}: HTTP {}: {m}", snap.http_status),
        ));
    }
    Ok((snap, state))
}

fn unexpected(snap: &PageSnapshot, what: &str) -> SiteError {
    SiteError {
        kind: SiteErrorKind::UnexpectedPage,
        message: format!("{}: page lacks {what}", snap.url),
        page: Some(snap.clone()),
    }
}

fn ts(v: &Value) -> Option<Timestamp> {
    v.as_str().and_then(|s| Timestamp::parse(s).ok())
}

#[async_trait]
impl Site for SimSite {
    fn name(&self) -> &'static str {
        "sim"
    }

    fn account(&self) -> &str {
        &self.base
    }

    async fn cart_add(&self, line: &CartLine) -> Result<Step<()>, SiteError> {
        // The account is dedicated to the worker: start from an empty cart so that leftovers of
        // an earlier, interrupted task are never ordered along.
        self.fetch("POST", "/cart/clear", None).await?;
        let body = json!({"item_id": line.item_id, "variant_id": line.variant_id, "quantity": line.quantity});
        let (page, _) = self.fetch("POST", "/cart/add", Some(body)).await?;
        Ok(Step { value: (), page })
    }

    async fn cart_check(&self) -> Result<Step<CartView>, SiteError> {
        let (page, st) = self.fetch("GET", "/cart", None).await?;
        cart_view(page, &st)
    }

    async fn order_confirm(&self) -> Result<Step<ConfirmView>, SiteError> {
        let (page, st) = self.fetch("GET", "/order/confirm", None).await?;
        confirm_view(page, &st)
    }

    async fn order_submit(
        &self,
        confirm: &ConfirmView,
        note: &str,
    ) -> Result<Step<String>, SiteError> {
        let body = json!({"expected_payable_yen": confirm.payable_yen, "note": note});
        let (page, st) = self.fetch("POST", "/order/submit", Some(body)).await?;
        submitted_order(page, &st)
    }

    async fn pay(
        &self,
        site_order_id: &str,
        _task_id: &str,
    ) -> Result<Step<PayOutcome>, SiteError> {
        let path = format!("/orders/{}/pay", urlencode(site_order_id));
        let (page, st) = self.fetch("POST", &path, None).await?;
        pay_outcome(page, &st)
    }

    async fn list_orders(&self, page_no: u32) -> Result<Step<OrderListPage>, SiteError> {
        let (page, st) = self
            .fetch("GET", &format!("/orders?page={page_no}"), None)
            .await?;
        order_list_page(page, &st)
    }

    async fn order_detail(&self, order_number: &str) -> Result<Step<OrderDetailResult>, SiteError> {
        let (page, st) = self
            .fetch("GET", &format!("/orders/{}", urlencode(order_number)), None)
            .await?;
        order_detail_of(order_number, page, &st)
    }
}

/// The cart page's [`CartView`].
///
/// # Errors
/// 5002 when the page lacks the cart.
pub fn cart_view(page: PageSnapshot, st: &Value) -> Result<Step<CartView>, SiteError> {
    let cart = &st["cart"];
    let lines = cart["lines"]
        .as_array()
        .ok_or_else(|| unexpected(&page, "cart.lines"))?;
    let lines = lines
        .iter()
        .map(|l| {
            (
                l["item_id"].as_i64().unwrap_or(0),
                l["variant_id"].as_str().map(str::to_owned),
                l["quantity"].as_u64().unwrap_or(0) as u32,
                l["unit_price_yen"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    let subtotal_yen = cart["subtotal_yen"]
        .as_i64()
        .ok_or_else(|| unexpected(&page, "cart.subtotal_yen"))?;
    Ok(Step {
        value: CartView {
            lines,
            subtotal_yen,
        },
        page,
    })
}

/// The confirm page's [`ConfirmView`].
///
/// # Errors
/// 5002 when the page lacks the payable amount.
pub fn confirm_view(page: PageSnapshot, st: &Value) -> Result<Step<ConfirmView>, SiteError> {
    let c = &st["confirm"];
    let payable_yen = c["payable_yen"]
        .as_i64()
        .ok_or_else(|| unexpected(&page, "confirm.payable_yen"))?;
    let value = ConfirmView {
        subtotal_yen: c["subtotal_yen"].as_i64().unwrap_or(payable_yen),
        shipping_yen: c["shipping_yen"].as_i64().unwrap_or(0),
        payable_yen,
        payment_method: c["payment_method"].as_str().unwrap_or("unknown").to_owned(),
        pay_deadline: ts(&c["pay_deadline"]),
    };
    Ok(Step { value, page })
}

/// The order-complete page's order number.
///
/// # Errors
/// 5002 when the page lacks it.
pub fn submitted_order(page: PageSnapshot, st: &Value) -> Result<Step<String>, SiteError> {
    let n = st["order"]["order_number"]
        .as_str()
        .ok_or_else(|| unexpected(&page, "order.order_number"))?;
    Ok(Step {
        value: n.to_owned(),
        page,
    })
}

/// The payment page's [`PayOutcome`].
///
/// # Errors
/// 5002 when the page lacks a known payment status.
pub fn pay_outcome(page: PageSnapshot, st: &Value) -> Result<Step<PayOutcome>, SiteError> {
    let p = &st["payment"];
    let value = match p["status"].as_str() {
        Some("paid") => PayOutcome::Paid,
        Some("challenge_required") => {
            PayOutcome::ChallengeRequired(p["challenge"].as_str().unwrap_or("challenge").to_owned())
        }
        Some("awaiting_payment") => PayOutcome::AwaitingPayment {
            pay_deadline: ts(&p["pay_deadline"]),
            detail: format!(
                "コンビニ払い: 払込票番号 {}",
                p["slip_number"].as_str().unwrap_or("?")
            ),
        },
        _ => return Err(unexpected(&page, "payment.status")),
    };
    Ok(Step { value, page })
}

/// The order-list page's [`OrderListPage`].
///
/// # Errors
/// 5002 when the list has another shape (the page changed).
pub fn order_list_page(page: PageSnapshot, st: &Value) -> Result<Step<OrderListPage>, SiteError> {
    let data = st
        .get("orderListData")
        .ok_or_else(|| unexpected(&page, "orderListData (page changed?)"))?;
    let list = data["orders"]
        .as_array()
        .ok_or_else(|| unexpected(&page, "orderListData.orders"))?;
    let mut orders = Vec::with_capacity(list.len());
    let mut remarks = Vec::with_capacity(list.len());
    for o in list {
        let (Some(n), Some(d)) = (o["order_number"].as_str(), o["order_date"].as_str()) else {
            return Err(unexpected(&page, "order_number/order_date"));
        };
        let remark =
            Remark::from_json(o.get("note")).ok_or_else(|| unexpected(&page, "a text note"))?;
        remarks.push(remark);
        orders.push(OrderSummary {
            order_number: n.to_owned(),
            order_date: d.to_owned(),
            shop_id: o["shop_id"].as_i64().unwrap_or(0),
            shop_name: o["shop_name"].as_str().unwrap_or("").to_owned(),
            items: o["items"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|i| OrderItem {
                            item_id: i["item_id"].as_i64().unwrap_or(0),
                            item_name: i["item_name"].as_str().unwrap_or("").to_owned(),
                            item_url: i["item_url"].as_str().unwrap_or("").to_owned(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
        });
    }
    let has_next = data["page"].as_u64().unwrap_or(1) < data["total_pages"].as_u64().unwrap_or(1);
    Ok(Step {
        value: OrderListPage {
            orders,
            remarks,
            has_next,
            raw: data.clone(),
        },
        page,
    })
}

/// The order-detail page of `order_number`.
///
/// # Errors
/// 5002 when the page lacks the detail.
pub fn order_detail_of(
    order_number: &str,
    page: PageSnapshot,
    st: &Value,
) -> Result<Step<OrderDetailResult>, SiteError> {
    let d = st
        .get("orderDetail")
        .ok_or_else(|| unexpected(&page, "orderDetail"))?;
    let found = d["found"]
        .as_bool()
        .ok_or_else(|| unexpected(&page, "orderDetail.found"))?;
    let stage_label = d["order"]["stage_label"].as_str().map(str::to_owned);
    let value = OrderDetailResult {
        kind: QueryKind::OrderDetail,
        order_number: order_number.to_owned(),
        found,
        order_state: stage_label.as_deref().and_then(stage_to_state),
        stage_label,
        raw: Some(d.clone()),
        raw_available: true,
        raw_omitted: false,
    };
    Ok(Step { value, page })
}

/// Percent-encodes a path segment (order numbers are `[0-9-]`, but never trust a page).
pub fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
