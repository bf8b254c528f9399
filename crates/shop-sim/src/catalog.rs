//! The shop's items. A fixed seed catalog: tests and the demo refer to these item URLs.

use serde::Serialize;

/// The one shop every item belongs to (Rakuten shop ids are numbers; 306087 is the spec's example).
pub const SHOP_ID: i64 = 306087;
/// The shop's display name.
pub const SHOP_NAME: &str = "シミュレーション商店";

/// An item for sale.
#[derive(Debug, Clone, Serialize)]
pub struct Item {
    /// Numeric item id.
    pub item_id: i64,
    /// Item code (the last path segment of its URL).
    pub item_code: String,
    /// Display name.
    pub name: String,
    /// Canonical item URL, shaped like a real item page URL.
    pub url: String,
    /// Unit price, yen (tax included).
    pub price_yen: i64,
    /// Variant ids; empty when the item has none (then no `variant_id` may be given).
    pub variants: Vec<String>,
    /// Units in stock.
    pub stock: i64,
}

fn item(
    item_id: i64,
    code: &str,
    name: &str,
    price_yen: i64,
    variants: &[&str],
    stock: i64,
) -> Item {
    Item {
        item_id,
        item_code: code.into(),
        name: name.into(),
        url: format!("https://item.rakuten.co.jp/simshop/{code}/"),
        price_yen,
        variants: variants.iter().map(|v| (*v).to_owned()).collect(),
        stock,
    }
}

/// The seed catalog.
///
/// - `sample-tea` (1001): 2,980 yen, no variants.
/// - `sample-shirt` (1002): 3,980 yen, variants `red-m`, `blue-m`.
/// - `sample-camera` (1003): 58,000 yen (over the worker's default limit), no variants.
/// - `sample-soldout` (1004): 1,200 yen, out of stock.
pub fn seed() -> Vec<Item> {
    vec![
        item(1001, "sample-tea", "お試し緑茶セット", 2980, &[], 1000),
        item(
            1002,
            "sample-shirt",
            "コットンシャツ",
            3980,
            &["red-m", "blue-m"],
            1000,
        ),
        item(1003, "sample-camera", "ミラーレスカメラ", 58000, &[], 1000),
        item(1004, "sample-soldout", "限定マグカップ", 1200, &[], 0),
    ]
}

/// Normalizes an item URL for matching: no scheme, no query, no trailing slash, lower case.
pub fn normalize_url(url: &str) -> String {
    let u = url.split(['?', '#']).next().unwrap_or("");
    let u = u
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    u.trim_end_matches('/').to_lowercase()
}
