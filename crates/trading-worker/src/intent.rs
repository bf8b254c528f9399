//! The order intent (spec §4.2): the gateway passes it through untouched; its structure is the
//! worker's to define and check.

use serde::Deserialize;
use serde_json::Value;

/// What to buy.
#[derive(Debug, Clone, Deserialize)]
pub struct Intent {
    /// Item page URL.
    pub item_url: String,
    /// Units, 1..=99 (default 1).
    #[serde(default = "one")]
    pub quantity: u32,
    /// Variant, required for items with variants.
    #[serde(default)]
    pub variant_id: Option<String>,
    /// Free options, passed to the site as they are (unused by the sim).
    #[serde(default)]
    pub options: Value,
    /// Amount limit for this order, yen; overrides `RAKUTEN_ORDER_MAX_TOTAL_YEN`.
    #[serde(default)]
    pub max_total_yen: Option<i64>,
}

fn one() -> u32 {
    1
}

impl Intent {
    /// Parses and checks an intent.
    ///
    /// # Errors
    /// A message saying what is wrong.
    pub fn parse(v: &Value) -> Result<Self, String> {
        let i: Intent =
            serde_json::from_value(v.clone()).map_err(|e| format!("invalid intent: {e}"))?;
        if i.item_url.trim().is_empty() || i.item_url.len() > 2048 {
            return Err("invalid intent: item_url must be 1..=2048 characters".into());
        }
        if !(1..=99).contains(&i.quantity) {
            return Err("invalid intent: quantity must be 1..=99".into());
        }
        if matches!(i.max_total_yen, Some(m) if m <= 0) {
            return Err("invalid intent: max_total_yen must be > 0".into());
        }
        Ok(i)
    }
}
