//! The site seam (spec §10): the steps of an order and the account's order reads, behind one
//! trait. [`rakuten::RakutenSite`] answers "not implemented" (5003) for every step the spec calls
//! unverified; [`sim::SimSite`] drives the simulated shop over HTTP; [`adapter::AdapterSite`]
//! asks a site adapter process over the adapter protocol.
//!
//! Every call returns the page it read ([`PageSnapshot`]) with its value, so the caller can store
//! evidence before it records or reports anything. The reads (`list_orders`, `order_detail`) serve
//! the recovery check (§5), post-payment monitoring and the account-query channel (§11).

pub mod adapter;
pub mod rakuten;
pub mod sim;

use async_trait::async_trait;
use rakuten_types::query::{OrderDetailResult, OrderSummary};
use rakuten_types::{ErrorCode, OrderState, Timestamp};
use serde_json::Value;

/// A page as the site served it: what evidence is made of (§6.1).
#[derive(Debug, Clone)]
pub struct PageSnapshot {
    /// Request URL.
    pub url: String,
    /// HTTP method.
    pub method: String,
    /// HTTP status (0 when no response arrived).
    pub http_status: u16,
    /// The HTML, when a page arrived.
    pub html: Option<String>,
    /// A screenshot (PNG), when the interactor can take one (a browser adapter; never `sim`).
    pub png: Option<Vec<u8>>,
}

/// A site call's value and the page it came from.
#[derive(Debug, Clone)]
pub struct Step<T> {
    /// What the page said.
    pub value: T,
    /// The page.
    pub page: PageSnapshot,
}

/// Kinds of site failure, each with a stable code (D-error-codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SiteErrorKind {
    /// 5001: the session is logged out.
    LoginLost,
    /// 5002: the page did not have the expected structure, or the site refused the action.
    UnexpectedPage,
    /// 5003: the step is not implemented for this site (unverified, §10).
    NotImplemented,
    /// 5005: a human challenge (3-D Secure, SMS).
    Challenge,
    /// 5006: no answer, a broken connection or a server error.
    Unavailable,
    /// 5007: the request timed out.
    Timeout,
}

impl SiteErrorKind {
    /// A short name for logs and messages (`login_lost`, `timeout`, …).
    pub const fn as_str(self) -> &'static str {
        match self {
            SiteErrorKind::LoginLost => "login_lost",
            SiteErrorKind::UnexpectedPage => "unexpected_page",
            SiteErrorKind::NotImplemented => "not_implemented",
            SiteErrorKind::Challenge => "challenge",
            SiteErrorKind::Unavailable => "unavailable",
            SiteErrorKind::Timeout => "timeout",
        }
    }

    /// The error code reported.
    pub const fn code(self) -> ErrorCode {
        match self {
            SiteErrorKind::LoginLost => ErrorCode::SiteLoginLost,
            SiteErrorKind::UnexpectedPage => ErrorCode::SiteUnexpectedPage,
            SiteErrorKind::NotImplemented => ErrorCode::SiteNotImplemented,
            SiteErrorKind::Challenge => ErrorCode::SiteChallenge,
            SiteErrorKind::Unavailable => ErrorCode::SiteUnavailable,
            SiteErrorKind::Timeout => ErrorCode::SiteTimeout,
        }
    }

    /// Whether repeating the call may help ([`SiteErrorClass`]): a transport failure, timeout or
    /// server error is retryable; a page the site did answer (refusal, changed page, logged out,
    /// challenge, not implemented) is fatal — the same call would get the same answer. Says
    /// nothing about whether repeating is *safe*: that is the step's business (only the steps
    /// before the submit are repeated, D-pre-submit-retries).
    pub const fn class(self) -> SiteErrorClass {
        match self {
            SiteErrorKind::Unavailable | SiteErrorKind::Timeout => SiteErrorClass::Retryable,
            SiteErrorKind::LoginLost
            | SiteErrorKind::UnexpectedPage
            | SiteErrorKind::NotImplemented
            | SiteErrorKind::Challenge => SiteErrorClass::Fatal,
        }
    }

    /// Whether the action may have happened although the call failed (no or broken answer).
    /// After an irreversible action this forces the verification branch.
    pub const fn is_ambiguous(self) -> bool {
        matches!(self, SiteErrorKind::Unavailable | SiteErrorKind::Timeout)
    }
}

/// Whether a failed site call is worth repeating ([`SiteErrorKind::class`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SiteErrorClass {
    /// Transient (no answer, broken connection, timeout, 5xx): a repeat may succeed.
    Retryable,
    /// The site answered and the answer will not change by asking again.
    Fatal,
}

/// A failed site call.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{} ({}): {message}", kind.as_str(), kind.code().as_i32())]
pub struct SiteError {
    /// What kind.
    pub kind: SiteErrorKind,
    /// Human-readable reason.
    pub message: String,
    /// The page that showed the failure, when one arrived (kept as evidence).
    pub page: Option<PageSnapshot>,
}

impl SiteError {
    /// See [`SiteErrorKind::class`].
    pub const fn class(&self) -> SiteErrorClass {
        self.kind.class()
    }

    /// A failure without a page.
    pub fn new(kind: SiteErrorKind, message: impl Into<String>) -> Self {
        SiteError {
            kind,
            message: message.into(),
            page: None,
        }
    }

    /// "Not implemented" for an unverified step (§10).
    pub fn not_implemented(step: &str) -> Self {
        SiteError::new(
            SiteErrorKind::NotImplemented,
            format!(
                "rakuten: step {step} is not implemented: the real site interaction has not been verified (spec §10); nothing was sent to the site"
            ),
        )
    }
}

/// The item's purchase block from the scraper's `POST /api/item_detail`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Purchase {
    /// Item id.
    pub item_id: i64,
    /// Shop id.
    #[serde(default)]
    pub shop_id: i64,
    /// Shop name.
    #[serde(default)]
    pub shop_name: String,
    /// Unit price, yen.
    #[serde(default)]
    pub price_yen: i64,
    /// Variant ids (empty: the item has none).
    #[serde(default)]
    pub variant_ids: Vec<String>,
}

/// What to put in the cart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CartLine {
    /// Item id.
    pub item_id: i64,
    /// Variant.
    pub variant_id: Option<String>,
    /// Units.
    pub quantity: u32,
}

/// `item 1002, variant blue-m` (or `item 1002, no variant`): an item and variant as people read
/// them in evidence, reports and logs.
pub fn item_text(item_id: i64, variant_id: Option<&str>) -> String {
    match variant_id {
        Some(v) => format!("item {item_id}, variant {v}"),
        None => format!("item {item_id}, no variant"),
    }
}

/// The cart as the cart page shows it.
#[derive(Debug, Clone)]
pub struct CartView {
    /// Lines: (item id, variant, quantity, unit price yen).
    pub lines: Vec<(i64, Option<String>, u32, i64)>,
    /// Subtotal, yen.
    pub subtotal_yen: i64,
}

/// The order confirm page (§10 item 2: payable, payment method, deadline).
#[derive(Debug, Clone)]
pub struct ConfirmView {
    /// Items subtotal, yen.
    pub subtotal_yen: i64,
    /// Shipping, yen.
    pub shipping_yen: i64,
    /// What will be charged, yen: the amount guard's input.
    pub payable_yen: i64,
    /// Payment method as the site names it.
    pub payment_method: String,
    /// Payment deadline, for deferred methods.
    pub pay_deadline: Option<Timestamp>,
}

/// What paying did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PayOutcome {
    /// Paid.
    Paid,
    /// A human challenge (3-D Secure / SMS) stands in the way; nothing is bypassed.
    ChallengeRequired(String),
    /// Deferred payment (convenience store): pay before the deadline.
    AwaitingPayment {
        /// Deadline.
        pay_deadline: Option<Timestamp>,
        /// What the site said (slip number etc.).
        detail: String,
    },
}

/// The buyer's remark (備考欄) of a listed order, where the worker writes the task id at submit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Remark {
    /// The page does not show remarks: no evidence either way.
    NotShown,
    /// Shown, and empty.
    Empty,
    /// Shown, with this text (trimmed). A seam reports `Text` only when the site shows the
    /// remark exactly as submitted: an order whose text differs from the task id is taken as
    /// another's (D-recovery-verdicts), so a site that rewrites remarks must report
    /// [`Remark::NotShown`] instead.
    Text(String),
}

impl Remark {
    /// Reads a page's remark value: absent → [`Remark::NotShown`], `null` or blank →
    /// [`Remark::Empty`], a string → [`Remark::Text`]. Any other shape is `None` (page changed).
    pub fn from_json(v: Option<&Value>) -> Option<Remark> {
        match v {
            None => Some(Remark::NotShown),
            Some(Value::Null) => Some(Remark::Empty),
            Some(Value::String(s)) if s.trim().is_empty() => Some(Remark::Empty),
            Some(Value::String(s)) => Some(Remark::Text(s.trim().to_owned())),
            Some(_) => None,
        }
    }
}

/// One page of the account's order list.
#[derive(Debug, Clone)]
pub struct OrderListPage {
    /// Orders on this page, newest first, normalized (§11.3).
    pub orders: Vec<OrderSummary>,
    /// Each order's remark, same order and length as `orders` (the recovery check's attribution,
    /// D-recovery-verdicts). A missing entry counts as [`Remark::NotShown`].
    pub remarks: Vec<Remark>,
    /// Whether a further page exists.
    pub has_next: bool,
    /// The page's raw state (kept for the query channel).
    pub raw: Value,
}

impl OrderListPage {
    /// The remark of `orders[i]`.
    pub fn remark(&self, i: usize) -> &Remark {
        self.remarks.get(i).unwrap_or(&Remark::NotShown)
    }
}

/// The site steps and reads. Implementations do not lock: callers hold the account lock
/// ([`crate::account_lock`]) around every call.
#[async_trait]
pub trait Site: Send + Sync + std::fmt::Debug {
    /// `rakuten`, `sim` or `adapter`.
    fn name(&self) -> &'static str;
    /// The account this site instance acts for (the account lock's key).
    fn account(&self) -> &str;
    /// Puts `line` in the cart (step 01) so that the cart then holds exactly `line`: the call
    /// must be safe to repeat (a transient failure retries it, D-pre-submit-retries), so a seam sets the
    /// cart rather than adding to it (the sim clears the cart first, and its add sets the
    /// quantity).
    async fn cart_add(&self, line: &CartLine) -> Result<Step<()>, SiteError>;
    /// Reads the cart back (step 02).
    async fn cart_check(&self) -> Result<Step<CartView>, SiteError>;
    /// Opens the confirm page (step 03).
    async fn order_confirm(&self) -> Result<Step<ConfirmView>, SiteError>;
    /// Submits the order (step 04, irreversible) → the site order id. `note` goes to the order's
    /// remarks field.
    async fn order_submit(
        &self,
        confirm: &ConfirmView,
        note: &str,
    ) -> Result<Step<String>, SiteError>;
    /// Pays the order (step 05, irreversible). `task_id` is the idempotency key an adapter
    /// refuses a repeat under.
    async fn pay(&self, site_order_id: &str, task_id: &str) -> Result<Step<PayOutcome>, SiteError>;
    /// One page (1-based) of the account's order list, newest first.
    async fn list_orders(&self, page: u32) -> Result<Step<OrderListPage>, SiteError>;
    /// One order's detail with its delivery stage.
    async fn order_detail(&self, order_number: &str) -> Result<Step<OrderDetailResult>, SiteError>;

    /// Where an order stands (post-payment monitoring, payment checks): its detail page read as
    /// an [`OrderState`]. `None` when the order is not (yet) shown or its stage is unknown.
    async fn order_status(&self, site_order_id: &str) -> Result<Step<OrderStatus>, SiteError> {
        let d = self.order_detail(site_order_id).await?;
        Ok(Step {
            value: OrderStatus {
                found: d.value.found,
                state: d.value.order_state,
                stage_label: d.value.stage_label,
            },
            page: d.page,
        })
    }
}

/// An order's status as its detail page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderStatus {
    /// Whether the site shows the order.
    pub found: bool,
    /// Mapped state (`None`: not found or an unknown stage label).
    pub state: Option<OrderState>,
    /// The site's stage label.
    pub stage_label: Option<String>,
}

/// Maps a delivery-stage label (the progress bar's text) to an order state.
pub fn stage_to_state(label: &str) -> Option<OrderState> {
    Some(match label.trim() {
        "注文確認" | "注文受付" => OrderState::Ordered,
        "お支払い待ち" | "入金待ち" => OrderState::AwaitingPayment,
        "発送準備中" | "入金確認" => OrderState::Paid,
        "出荷" | "発送済み" => OrderState::Shipped,
        "配達完了" | "お届け済み" => OrderState::Delivered,
        "キャンセル" => OrderState::Cancelled,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_labels_map_to_order_states() {
        assert_eq!(stage_to_state("注文確認"), Some(OrderState::Ordered));
        assert_eq!(stage_to_state(" 出荷 "), Some(OrderState::Shipped));
        assert_eq!(stage_to_state("配達完了"), Some(OrderState::Delivered));
        assert_eq!(stage_to_state("キャンセル"), Some(OrderState::Cancelled));
        assert_eq!(stage_to_state("謎"), None);
    }

    #[test]
    fn remarks_distinguish_not_shown_from_empty() {
        use serde_json::json;
        assert_eq!(Remark::from_json(None), Some(Remark::NotShown));
        assert_eq!(Remark::from_json(Some(&json!(null))), Some(Remark::Empty));
        assert_eq!(Remark::from_json(Some(&json!("  "))), Some(Remark::Empty));
        assert_eq!(
            Remark::from_json(Some(&json!(" t-1 "))),
            Some(Remark::Text("t-1".into()))
        );
        assert_eq!(Remark::from_json(Some(&json!(7))), None);
    }

    #[test]
    fn only_transport_failures_are_ambiguous_and_retryable() {
        for k in [SiteErrorKind::Unavailable, SiteErrorKind::Timeout] {
            assert_eq!(k.class(), SiteErrorClass::Retryable);
        }
        for k in [
            SiteErrorKind::LoginLost,
            SiteErrorKind::UnexpectedPage,
            SiteErrorKind::NotImplemented,
            SiteErrorKind::Challenge,
        ] {
            assert_eq!(k.class(), SiteErrorClass::Fatal);
            assert!(!k.is_ambiguous());
        }
        assert!(SiteErrorKind::Unavailable.is_ambiguous());
        assert!(SiteErrorKind::Timeout.is_ambiguous());
        assert!(!SiteErrorKind::UnexpectedPage.is_ambiguous());
        assert_eq!(SiteError::not_implemented("x").kind.code().as_i32(), 5003);
    }
}
