//! The order intent (spec §4.2): the gateway passes it through untouched; its structure is the
//! trading side's to define. The rules live in [`rakuten_types::intent`] so the gateway refuses
//! at submit exactly what this worker would refuse.

use rakuten_types::intent::OrderIntent;
use serde_json::Value;

/// What to buy (the worker's view of a checked [`OrderIntent`]).
#[derive(Debug, Clone)]
pub struct Intent {
    /// Item page URL.
    pub item_url: String,
    /// Units, 1..=99 (default 1).
    pub quantity: u32,
    /// Variant, required for items with variants.
    pub variant_id: Option<String>,
    /// Free options, passed to the site as they are (unused by the sim).
    pub options: Value,
    /// Amount limit for this order, yen; overrides `RAKUTEN_ORDER_MAX_TOTAL_YEN`.
    pub max_total_yen: Option<i64>,
}

impl From<OrderIntent> for Intent {
    fn from(i: OrderIntent) -> Self {
        Intent {
            item_url: i.item_url,
            quantity: i.quantity,
            variant_id: i.variant_id,
            options: i.options,
            max_total_yen: i.max_total_yen,
        }
    }
}

impl Intent {
    /// Parses and checks an intent with the shared rules ([`OrderIntent::parse`]).
    ///
    /// # Errors
    /// A message saying what is wrong (`invalid intent: …`).
    pub fn parse(v: &Value) -> Result<Self, String> {
        OrderIntent::parse(v)
            .map(Intent::from)
            .map_err(|e| e.to_string())
    }
}
