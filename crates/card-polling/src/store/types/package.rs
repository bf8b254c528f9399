//! Package orders, payments, usages and the package poll's verdict
//! ([`crate::store::PackageStore`]).

use serde::{Deserialize, Serialize};

use rakuten_types::Timestamp;

use crate::domain::asset::AssetRef;
use crate::domain::package::{OrderStatus, PackageKind, PaymentStatus};
use crate::priority::TriggerType;
use crate::store::EnqueuedItem;

/// A package order as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderView {
    /// Order id.
    pub id: String,
    /// The asset the package is for.
    pub asset: AssetRef,
    /// Main or add-on.
    pub kind: PackageKind,
    /// Payment status.
    pub status: OrderStatus,
    /// Payment id of the settling callback.
    pub payment_id: Option<String>,
    /// Creation time.
    pub created_at: Timestamp,
}

/// A payment callback (idempotent by `payment_id`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PaymentCallback {
    /// The payment's id at the payment provider.
    #[schema(schema_with = crate::domain::key::key_schema)]
    pub payment_id: String,
    /// The order paid.
    #[schema(schema_with = crate::domain::key::key_schema)]
    pub order_id: String,
    /// What happened.
    pub status: PaymentStatus,
}

/// What the payment callback did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentOutcome {
    /// The order after the callback.
    pub order_id: String,
    /// Its status.
    pub status: OrderStatus,
    /// True when this payment id was already applied: nothing changed.
    pub replayed: bool,
    /// The usage record created (paid orders).
    pub usage_id: Option<String>,
    /// Whether that usage is active (false: queued behind an active main package).
    pub usage_active: bool,
    /// The trigger type used, when items were enqueued.
    pub trigger_type: Option<TriggerType>,
    /// Items enqueued or merged.
    pub items: Vec<EnqueuedItem>,
}

/// What the package poll concluded for an asset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackagePollOutcome {
    /// Usage records that ran out and were marked expired by this poll.
    pub usages_expired: u64,
    /// True when no active main package remains.
    pub no_valid_package: bool,
    /// True when a pending usage record waits.
    pub pending_usage: bool,
    /// Items enqueued (`no_valid_package`) or merged.
    pub items: Vec<EnqueuedItem>,
}

/// A card's package state as the ordinary package poll reads it before deciding to write
/// (D-package-poll-verdict).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageState {
    /// The asset whose packages are judged: the actively bound device, else the card.
    pub asset: AssetRef,
    /// An active usage whose `ends_at` has passed (the poll marks it expired).
    pub lapsed_usage: bool,
    /// An active main package that has not ended.
    pub valid_main: bool,
    /// A pending usage record waits.
    pub pending_usage: bool,
}

impl PackageState {
    /// Whether the poll must run its write transition (`package_poll_asset`): a lapsed usage to
    /// mark expired, or no valid main package while a usage waits (a priority enqueue). Any
    /// other state is answered from this read alone, with no write.
    pub const fn needs_write(&self) -> bool {
        self.lapsed_usage || (!self.valid_main && self.pending_usage)
    }
}
