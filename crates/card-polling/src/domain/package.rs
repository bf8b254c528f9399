//! Package orders and package usage records.

use serde::{Deserialize, Serialize};

/// Main package or add-on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PackageKind {
    /// A main package: at most one active per asset, later ones queue as pending.
    Main,
    /// An add-on package: active at once.
    Addon,
}

impl PackageKind {
    /// Stored and wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            PackageKind::Main => "main",
            PackageKind::Addon => "addon",
        }
    }
}

/// Order payment status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderStatus {
    /// Created, no payment arrived yet.
    Unpaid,
    /// Paid (a usage record exists).
    Paid,
    /// Payment failed.
    Failed,
    /// Cancelled.
    Cancelled,
}

impl OrderStatus {
    /// Stored and wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            OrderStatus::Unpaid => "unpaid",
            OrderStatus::Paid => "paid",
            OrderStatus::Failed => "failed",
            OrderStatus::Cancelled => "cancelled",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Unpaid, Self::Paid, Self::Failed, Self::Cancelled]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

/// The status a payment callback reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PaymentStatus {
    /// Money arrived.
    Paid,
    /// Payment failed.
    Failed,
    /// The order was cancelled.
    Cancelled,
}

impl PaymentStatus {
    /// The order status this callback settles to.
    pub const fn order_status(self) -> OrderStatus {
        match self {
            PaymentStatus::Paid => OrderStatus::Paid,
            PaymentStatus::Failed => OrderStatus::Failed,
            PaymentStatus::Cancelled => OrderStatus::Cancelled,
        }
    }
}

/// Usage record status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageStatus {
    /// Queued behind an active main package.
    Pending,
    /// In effect.
    Active,
    /// Past its end.
    Expired,
}

/// How long a package runs once active (days). A host-domain simplification.
pub const PACKAGE_PERIOD_DAYS: u64 = 30;
