//! Rakuten Ichiba. The spec (§10) has no verified forms or endpoints for cart, confirm, submit and
//! pay, and the order-list lookup by item and time window was never verified either, so every such
//! call returns [`SiteError::not_implemented`] (5003): a task on this site ends `failed` with that
//! reason and nothing is sent to the site. Fill these in only from recorded real pages.

use async_trait::async_trait;
use rakuten_types::query::OrderDetailResult;

use super::{CartLine, CartView, ConfirmView, OrderListPage, PayOutcome, Site, SiteError, Step};

/// The Rakuten site seam (every step unverified → not implemented).
#[derive(Debug, Clone)]
pub struct RakutenSite {
    account: String,
}

impl RakutenSite {
    /// A seam for `account`.
    pub fn new(account: impl Into<String>) -> Self {
        RakutenSite {
            account: account.into(),
        }
    }
}

#[async_trait]
impl Site for RakutenSite {
    fn name(&self) -> &'static str {
        "rakuten"
    }
    fn account(&self) -> &str {
        &self.account
    }
    async fn cart_add(&self, _line: &CartLine) -> Result<Step<()>, SiteError> {
        Err(SiteError::not_implemented("cart-add"))
    }
    async fn cart_check(&self) -> Result<Step<CartView>, SiteError> {
        Err(SiteError::not_implemented("cart-check"))
    }
    async fn order_confirm(&self) -> Result<Step<ConfirmView>, SiteError> {
        Err(SiteError::not_implemented("order-confirm"))
    }
    async fn order_submit(&self, _c: &ConfirmView, _note: &str) -> Result<Step<String>, SiteError> {
        Err(SiteError::not_implemented("order-submit"))
    }
    async fn pay(&self, _id: &str, _task_id: &str) -> Result<Step<PayOutcome>, SiteError> {
        Err(SiteError::not_implemented("payment"))
    }
    async fn list_orders(&self, _page: u32) -> Result<Step<OrderListPage>, SiteError> {
        Err(SiteError::not_implemented("order-list lookup (§10 item 3)"))
    }
    async fn order_detail(&self, _n: &str) -> Result<Step<OrderDetailResult>, SiteError> {
        Err(SiteError::not_implemented("order-detail"))
    }
}
