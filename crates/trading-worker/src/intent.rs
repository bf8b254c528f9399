//! The order intent (spec §4.2): the gateway passes it through untouched; its structure is the
//! trading side's to define. The rules live in [`rakuten_types::intent`] so the gateway refuses
//! at submit exactly what this worker would refuse. The intent arrives as its JSON text as the
//! upstream sent it ([`IntentJson`]); `options` is kept as its own text, so what goes to the site
//! is what the upstream wrote, large numbers included (D-intent-verbatim-text).

use std::collections::BTreeMap;

use rakuten_types::intent::{IntentJson, OrderIntent};
use serde_json::value::RawValue;

/// What to buy (the worker's view of a checked [`OrderIntent`]).
#[derive(Debug, Clone)]
pub struct Intent {
    /// Item page URL.
    pub item_url: String,
    /// Units, 1..=99 (default 1).
    pub quantity: u32,
    /// Variant, required for items with variants.
    pub variant_id: Option<String>,
    /// Free options, their JSON text as sent, passed to the site as they are (unused by the sim);
    /// `None` when the intent has none.
    pub options: Option<Box<RawValue>>,
    /// Amount limit for this order, yen; overrides `RAKUTEN_ORDER_MAX_TOTAL_YEN`.
    pub max_total_yen: Option<i64>,
}

impl Intent {
    /// Parses and checks an intent with the shared rules ([`OrderIntent::parse_json`]).
    ///
    /// # Errors
    /// A message saying what is wrong (`invalid intent: …`).
    pub fn parse(intent: &IntentJson) -> Result<Self, String> {
        let checked = OrderIntent::parse_json(intent).map_err(|e| e.to_string())?;
        let options = serde_json::from_str::<BTreeMap<String, Box<RawValue>>>(intent.as_str())
            .ok()
            .and_then(|mut fields| fields.remove("options"));
        Ok(Intent {
            item_url: checked.item_url,
            quantity: checked.quantity,
            variant_id: checked.variant_id,
            options,
            max_total_yen: checked.max_total_yen,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_reach_the_worker_as_the_upstream_wrote_them() {
        let text = r#"{"item_url":"https://item.rakuten.co.jp/shop/a/","options":{"n":123456789012345678901234567890, "f":0.1000000000000000055511151231257827}}"#;
        let i = Intent::parse(&IntentJson::from_text(text.to_owned()).unwrap()).unwrap();
        assert_eq!(
            i.options.unwrap().get(),
            r#"{"n":123456789012345678901234567890, "f":0.1000000000000000055511151231257827}"#
        );
    }
}
