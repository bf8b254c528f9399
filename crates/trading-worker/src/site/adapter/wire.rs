//! The site adapter protocol's wire shapes, version 1 (`docs/site-adapter.openapi.yaml`).
//!
//! Every operation is `POST {adapter}/v1/{op}` with a JSON body and answers HTTP 200 with an
//! [`Answer`]: `ok` with a `value`, or an `error` with a site code 5001–5007; either way the
//! `evidence` of the page the adapter last saw. A non-200 status or a body that is not an
//! [`Answer`] is a broken adapter, never a value.

use rakuten_types::Timestamp;
use rakuten_types::query::OrderSummary;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The protocol version this worker speaks; an answer with another `protocol` is refused.
pub const PROTOCOL_VERSION: u32 = 1;

/// Path of each operation, relative to the adapter's base URL.
pub mod path {
    /// `GET`: [`super::Info`].
    pub const INFO: &str = "/v1/info";
    /// Step 01: [`super::CartAddReq`] → `null`.
    pub const CART_ADD: &str = "/v1/cart/add";
    /// Step 02: `{}` → [`super::CartValue`].
    pub const CART_CHECK: &str = "/v1/cart/check";
    /// Step 03: `{}` → [`super::ConfirmValue`].
    pub const ORDER_CONFIRM: &str = "/v1/order/confirm";
    /// Step 04 (irreversible): [`super::SubmitReq`] → [`super::SubmitValue`].
    pub const ORDER_SUBMIT: &str = "/v1/order/submit";
    /// Step 05 (irreversible): [`super::PayReq`] → [`super::PayValue`].
    pub const ORDER_PAY: &str = "/v1/order/pay";
    /// [`super::ListReq`] → [`super::ListValue`].
    pub const ORDERS_LIST: &str = "/v1/orders/list";
    /// [`super::DetailReq`] → [`super::DetailValue`].
    pub const ORDERS_DETAIL: &str = "/v1/orders/detail";
    /// `{}` → [`super::SessionValue`].
    pub const SESSION_CHECK: &str = "/v1/session/check";
}

/// `GET /v1/info`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Info {
    /// [`PROTOCOL_VERSION`].
    pub protocol: u32,
    /// The adapter's name (`shop-sim-http`, `shop-sim-browser`, …).
    pub name: String,
    /// The account it acts for (the worker's account-lock key).
    pub account: String,
}

/// The page an answer came from (§6.1).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Evidence {
    /// The page's URL.
    pub url: String,
    /// The HTTP method that loaded it.
    pub method: String,
    /// The HTTP status (0: no response arrived).
    pub http_status: u16,
    /// The page's HTML.
    #[serde(default)]
    pub html: Option<String>,
    /// A PNG screenshot, standard base64.
    #[serde(default)]
    pub png_base64: Option<String>,
}

/// A failure, with one of the site codes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireError {
    /// 5001 logged out, 5002 unexpected page or refusal, 5003 step not verified, 5005 human
    /// challenge, 5006 unavailable (the action may have happened), 5007 timeout (likewise).
    pub code: i32,
    /// Why, for people.
    pub message: String,
}

/// Every answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Answer<T> {
    /// [`PROTOCOL_VERSION`].
    pub protocol: u32,
    /// Whether `value` is set (else `error`).
    pub ok: bool,
    /// The operation's value.
    #[serde(default = "Option::default")]
    pub value: Option<T>,
    /// The failure.
    #[serde(default)]
    pub error: Option<WireError>,
    /// The page the adapter last saw for this operation.
    #[serde(default)]
    pub evidence: Option<Evidence>,
}

/// Step 01.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CartAddReq {
    /// Item id.
    pub item_id: i64,
    /// Variant.
    #[serde(default)]
    pub variant_id: Option<String>,
    /// Units: the cart holds exactly this line afterwards.
    pub quantity: u32,
}

/// One cart line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CartLineValue {
    /// Item id.
    pub item_id: i64,
    /// Variant.
    #[serde(default)]
    pub variant_id: Option<String>,
    /// Units.
    pub quantity: u32,
    /// Unit price, yen.
    pub unit_price_yen: i64,
}

/// Step 02's value.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CartValue {
    /// The lines.
    pub lines: Vec<CartLineValue>,
    /// Subtotal, yen.
    pub subtotal_yen: i64,
}

/// Step 03's value (also sent back with the submit).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConfirmValue {
    /// Items subtotal, yen.
    pub subtotal_yen: i64,
    /// Shipping, yen.
    pub shipping_yen: i64,
    /// What will be charged, yen (the worker's amount guard compares it with the limit).
    pub payable_yen: i64,
    /// Payment method as the site names it.
    pub payment_method: String,
    /// Payment deadline of deferred methods (RFC 3339).
    #[serde(default)]
    pub pay_deadline: Option<Timestamp>,
}

/// Step 04: place the order, only when the confirm page still shows `confirm.payable_yen`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SubmitReq {
    /// The task id: an adapter refuses a second submit under a key it has seen.
    pub idempotency_key: String,
    /// Goes into the order's remark (備考欄); the worker sends the task id.
    pub note: String,
    /// The confirm page the worker's amount guard accepted.
    pub confirm: ConfirmValue,
}

/// Step 04's value.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SubmitValue {
    /// The site's order number.
    pub site_order_id: String,
}

/// Step 05: pay an order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PayReq {
    /// The task id: an adapter refuses a second payment under a key it has seen.
    pub idempotency_key: String,
    /// The order.
    pub site_order_id: String,
}

/// Step 05's value.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum PayValue {
    /// Paid.
    Paid,
    /// A 3-D Secure / SMS challenge: nothing bypassed.
    ChallengeRequired {
        /// The challenge's kind.
        challenge: String,
    },
    /// Deferred payment.
    AwaitingPayment {
        /// Deadline.
        #[serde(default)]
        pay_deadline: Option<Timestamp>,
        /// What the site said (slip number …).
        detail: String,
    },
}

/// An order's remark as the list shows it (D-recovery-verdicts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "text", rename_all = "snake_case")]
pub enum RemarkValue {
    /// The page shows no remarks.
    NotShown,
    /// Shown and empty.
    Empty,
    /// Shown, exactly as submitted.
    Text(String),
}

/// A listed order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ListedOrder {
    /// The normalized order (§11.3).
    #[serde(flatten)]
    pub order: OrderSummary,
    /// Its remark.
    pub remark: RemarkValue,
}

/// One page (1-based) of the order list, newest first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ListReq {
    /// Page number, ≥ 1.
    pub page: u32,
}

/// The order-list page.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ListValue {
    /// Orders, newest first.
    pub orders: Vec<ListedOrder>,
    /// Whether another page follows.
    pub has_next: bool,
    /// The page's raw state (kept for the account-query channel).
    #[serde(default)]
    pub raw: Value,
}

/// One order's detail.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DetailReq {
    /// The site's order number.
    pub order_number: String,
}

/// The order detail.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DetailValue {
    /// Whether the site shows the order (new orders may take minutes to appear).
    pub found: bool,
    /// The delivery stage's label as the page shows it (the worker maps it).
    #[serde(default)]
    pub stage_label: Option<String>,
    /// The page's raw state.
    #[serde(default)]
    pub raw: Option<Value>,
}

/// Whether the account's session is logged in.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionValue {
    /// `false`: a person must log in again.
    pub logged_in: bool,
}
