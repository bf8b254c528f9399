//! The order state vocabulary (spec §3, right column): where an order stands on the site. The
//! worker is its authority; the gateway keeps a mirror in `task_reports`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Where an order stands on the site.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum OrderState {
    /// The worker accepted the task; nothing done on the site yet.
    Created,
    /// The item is in the cart.
    InCart,
    /// The order was submitted and the site gave it an order id.
    Ordered,
    /// Ordered, payment outstanding (e.g. convenience-store payment with a deadline).
    AwaitingPayment,
    /// Paid.
    Paid,
    /// Shipped.
    Shipped,
    /// Delivered.
    Delivered,
    /// Cancelled (by the shop, the site or us).
    Cancelled,
}

impl OrderState {
    /// Every state, in the order an order normally passes through them.
    pub const ALL: [OrderState; 8] = [
        OrderState::Created,
        OrderState::InCart,
        OrderState::Ordered,
        OrderState::AwaitingPayment,
        OrderState::Paid,
        OrderState::Shipped,
        OrderState::Delivered,
        OrderState::Cancelled,
    ];

    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            OrderState::Created => "created",
            OrderState::InCart => "in_cart",
            OrderState::Ordered => "ordered",
            OrderState::AwaitingPayment => "awaiting_payment",
            OrderState::Paid => "paid",
            OrderState::Shipped => "shipped",
            OrderState::Delivered => "delivered",
            OrderState::Cancelled => "cancelled",
        }
    }

    /// Whether an order in this state exists on the site (it was submitted). Used by the worker's
    /// verification branch and by the gateway to decide what a reclaimed worker must check.
    pub const fn is_submitted(self) -> bool {
        !matches!(self, OrderState::Created | OrderState::InCart)
    }
}

impl fmt::Display for OrderState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An order state name outside the vocabulary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown order state {0:?}; expected one of created, in_cart, ordered, awaiting_payment, paid, shipped, delivered, cancelled"
)]
pub struct UnknownOrderState(pub String);

impl FromStr for OrderState {
    type Err = UnknownOrderState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownOrderState(s.chars().take(64).collect()))
    }
}
