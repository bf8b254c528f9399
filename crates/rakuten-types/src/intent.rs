//! The order intent (spec order-gateway.md §4.2): its structure is the trading side's to define.
//! The gateway stores the intent exactly as sent, but refuses at submit (422, 1003) what the
//! worker could never execute; both call [`OrderIntent::parse`], so the rules are one set.
//!
//! Rules:
//! - the intent is a JSON object;
//! - `item_url`: required string, 1..=2048 characters, `https://` or `http://`, host
//!   `rakuten.co.jp` or a subdomain of it, no user info, no whitespace, control or invisible
//!   characters;
//! - `quantity`: optional JSON integer 1..=99 (default 1);
//! - `variant_id`: optional string (or null), at most 256 characters, no control characters or
//!   bidirectional controls;
//! - `max_total_yen`: optional JSON integer > 0 (or null), yen;
//! - `options`: any JSON, passed to the site untouched.

use serde_json::Value;

/// Longest `item_url`, characters.
pub const MAX_ITEM_URL_CHARS: usize = 2048;
/// Largest `quantity`, units.
pub const MAX_QUANTITY: u32 = 99;
/// Longest `variant_id`, characters.
pub const MAX_VARIANT_ID_CHARS: usize = 256;

/// Why an intent can never be executed. Display: `invalid intent: <field> …`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid intent: {0}")]
pub struct IntentError(pub String);

/// A checked order intent: what to buy.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderIntent {
    /// Item page URL on a Rakuten host.
    pub item_url: String,
    /// Units, 1..=99 (default 1).
    pub quantity: u32,
    /// Variant, required for items with variants.
    pub variant_id: Option<String>,
    /// Free options, passed to the site as they are (`Null` when absent).
    pub options: Value,
    /// Amount limit for this order, yen (> 0); overrides the worker's default limit.
    pub max_total_yen: Option<i64>,
}

fn err(msg: impl Into<String>) -> IntentError {
    IntentError(msg.into())
}

/// Checks `url` is an http(s) URL whose host is `rakuten.co.jp` or one of its subdomains.
fn check_item_url(url: &str) -> Result<(), IntentError> {
    let n = url.chars().count();
    if url.trim().is_empty() || n > MAX_ITEM_URL_CHARS {
        return Err(err(format!(
            "item_url must be 1..={MAX_ITEM_URL_CHARS} characters"
        )));
    }
    // Invisible too: a U+202E in the path made the console show another file name.
    if url
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || crate::ids::is_invisible(c))
    {
        return Err(err(
            "item_url must not contain whitespace, control or invisible characters",
        ));
    }
    let lower = url.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"))
        .ok_or_else(|| err("item_url must be an https:// URL of a rakuten.co.jp item page"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Err(err("item_url must not contain user information"));
    }
    let host = match authority.rsplit_once(':') {
        Some((h, port)) if !port.is_empty() && port.chars().all(|c| c.is_ascii_digit()) => h,
        Some(_) => return Err(err("item_url has an invalid port")),
        None => authority,
    };
    let host = host.strip_suffix('.').unwrap_or(host);
    if host == "rakuten.co.jp" || host.ends_with(".rakuten.co.jp") {
        Ok(())
    } else {
        Err(err(format!(
            "item_url host {:?} is not rakuten.co.jp or a subdomain of it",
            host.chars().take(64).collect::<String>()
        )))
    }
}

/// A JSON integer (not a float, not a string), or `None` when it is not one.
fn integer(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        _ => None,
    }
}

impl OrderIntent {
    /// Parses and checks an intent against the rules in the module doc. Unknown fields are
    /// ignored (the intent is the trading side's; the gateway stores it as sent).
    ///
    /// # Errors
    /// [`IntentError`] naming the first offending field.
    pub fn parse(v: &Value) -> Result<Self, IntentError> {
        let obj = v
            .as_object()
            .ok_or_else(|| err("intent must be a JSON object"))?;
        let item_url = match obj.get("item_url") {
            Some(Value::String(s)) => s.clone(),
            None | Some(Value::Null) => return Err(err("item_url is required")),
            Some(_) => return Err(err("item_url must be a string")),
        };
        check_item_url(&item_url)?;
        let quantity = match obj.get("quantity") {
            None => 1,
            Some(q) => match integer(q) {
                Some(n) if (1..=i64::from(MAX_QUANTITY)).contains(&n) => {
                    u32::try_from(n).map_err(|_| err("quantity out of range"))?
                }
                _ => {
                    return Err(err(format!(
                        "quantity must be an integer 1..={MAX_QUANTITY}"
                    )));
                }
            },
        };
        let variant_id = match obj.get("variant_id") {
            None | Some(Value::Null) => None,
            Some(Value::String(s))
                if s.chars()
                    .any(|c| c.is_control() || crate::text::is_bidi_control(c)) =>
            {
                // "\u{7}\u{0}" was taken and reached the console's page raw.
                return Err(err(
                    "variant_id must not contain control characters or bidirectional controls",
                ));
            }
            Some(Value::String(s)) if s.chars().count() <= MAX_VARIANT_ID_CHARS => Some(s.clone()),
            Some(Value::String(_)) => {
                return Err(err(format!(
                    "variant_id must be at most {MAX_VARIANT_ID_CHARS} characters"
                )));
            }
            Some(_) => return Err(err("variant_id must be a string")),
        };
        let max_total_yen = match obj.get("max_total_yen") {
            None | Some(Value::Null) => None,
            Some(m) => match integer(m) {
                Some(y) if y > 0 => Some(y),
                _ => return Err(err("max_total_yen must be an integer > 0 (yen)")),
            },
        };
        Ok(OrderIntent {
            item_url,
            quantity,
            variant_id,
            options: obj.get("options").cloned().unwrap_or(Value::Null),
            max_total_yen,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const URL: &str = "https://item.rakuten.co.jp/simshop/sample-tea/";

    #[test]
    fn a_minimal_intent_defaults_quantity_to_one() {
        let i = OrderIntent::parse(&json!({"item_url": URL})).unwrap();
        assert_eq!(i.quantity, 1);
        assert_eq!(i.max_total_yen, None);
        assert_eq!(i.options, Value::Null);
    }

    #[test]
    fn a_full_intent_parses() {
        let i = OrderIntent::parse(&json!({"item_url": URL, "quantity": 99, "variant_id": "v1",
            "max_total_yen": 5000, "options": {"gift": true}, "extra": 1}))
        .unwrap();
        assert_eq!(
            (i.quantity, i.variant_id.as_deref(), i.max_total_yen),
            (99, Some("v1"), Some(5000))
        );
    }

    #[test]
    fn intents_the_worker_can_never_execute_are_refused() {
        let bad = [
            json!([]),
            json!({}),
            json!({"item_url": 5}),
            json!({"item_url": ""}),
            json!({"item_url": "javascript:alert(1)"}),
            json!({"item_url": "https://evil.example/item"}),
            json!({"item_url": "https://rakuten.co.jp.evil.example/x"}),
            json!({"item_url": "https://user@item.rakuten.co.jp/x"}),
            json!({"item_url": "https://item.notrakuten.co.jp/x"}),
            json!({"item_url": URL, "quantity": "one"}),
            json!({"item_url": URL, "quantity": 0}),
            json!({"item_url": URL, "quantity": -1}),
            json!({"item_url": URL, "quantity": 1.5}),
            json!({"item_url": URL, "quantity": 100}),
            json!({"item_url": URL, "quantity": 99_999_999_999_999_999_999.0}),
            json!({"item_url": URL, "max_total_yen": -5}),
            json!({"item_url": URL, "max_total_yen": 0}),
            json!({"item_url": URL, "max_total_yen": "5"}),
            json!({"item_url": URL, "variant_id": 3}),
            // What reached the console's page raw.
            json!({"item_url": "https://item.rakuten.co.jp/shop/\u{202e}gnp.exe/"}),
            json!({"item_url": "https://item.rakuten.co.jp/shop/x\u{200b}/"}),
            json!({"item_url": URL, "variant_id": "\u{7}\u{0}"}),
            json!({"item_url": URL, "variant_id": "red \u{202e}x"}),
        ];
        for b in bad {
            assert!(OrderIntent::parse(&b).is_err(), "{b} was accepted");
        }
    }

    #[test]
    fn the_error_names_the_field() {
        let e = OrderIntent::parse(&json!({"item_url": URL, "quantity": "one"})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid intent: quantity must be an integer 1..=99"
        );
    }

    #[test]
    fn rakuten_hosts_with_ports_and_plain_http_are_accepted() {
        for u in [
            "https://rakuten.co.jp/x",
            "http://item.rakuten.co.jp/a/b/",
            "https://ITEM.Rakuten.co.jp:443/a?b#c",
        ] {
            assert!(OrderIntent::parse(&json!({"item_url": u})).is_ok(), "{u}");
        }
    }
}
