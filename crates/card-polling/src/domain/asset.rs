//! Assets: a standalone card or a device with bound cards. Priority items always target cards;
//! the asset is recorded for display and scope.

use serde::{Deserialize, Serialize};

/// The kind of asset a package is bought for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AssetType {
    /// A card on its own.
    Card,
    /// A device; its cards are those with an active binding.
    Device,
}

impl AssetType {
    /// Stored and wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            AssetType::Card => "card",
            AssetType::Device => "device",
        }
    }

    /// Parses a stored or wire name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "card" => Some(AssetType::Card),
            "device" => Some(AssetType::Device),
            _ => None,
        }
    }
}

/// An asset reference: type and id (ICCID or device number).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AssetRef {
    /// Card or device.
    pub asset_type: AssetType,
    /// ICCID for a card, device number for a device.
    pub asset_id: String,
}

/// A card as imported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CardRow {
    /// ICCID.
    #[schema(schema_with = crate::domain::key::key_schema)]
    pub iccid: String,
    /// Owning shop.
    #[schema(schema_with = crate::domain::key::key_schema)]
    pub shop_id: String,
    /// Card polling switch.
    #[serde(default = "yes")]
    pub polling_enabled: bool,
    /// Carrier channel threshold stop lock.
    #[serde(default)]
    pub stop_locked: bool,
}

/// A device as imported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeviceRow {
    /// Device number.
    #[schema(schema_with = crate::domain::key::key_schema)]
    pub device_no: String,
    /// Owning shop.
    #[schema(schema_with = crate::domain::key::key_schema)]
    pub shop_id: String,
    /// Device polling switch.
    #[serde(default = "yes")]
    pub polling_enabled: bool,
    /// The slot the device last reported (never used for targeting).
    #[serde(default)]
    #[schema(schema_with = crate::domain::key::key_or_null_schema)]
    pub reported_slot_iccid: Option<String>,
}

/// A device–card binding as imported or changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BindingRow {
    /// Device number.
    #[schema(schema_with = crate::domain::key::key_schema)]
    pub device_no: String,
    /// ICCID.
    #[schema(schema_with = crate::domain::key::key_schema)]
    pub iccid: String,
    /// Whether the binding is in effect.
    #[serde(default = "yes")]
    pub active: bool,
}

fn yes() -> bool {
    true
}
