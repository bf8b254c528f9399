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
//!
//! The intent travels as [`IntentJson`]: the JSON text exactly as the upstream sent it, stored and
//! handed to the worker byte for byte (D-intent-verbatim-text); the checks read a parsed copy.
//! Lists show an [`IntentSummary`] of it, the task's detail and its lease the whole text
//! (D-list-pages-bounded).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

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

/// An intent's JSON text exactly as received: numbers (`123456789012345678901234567890`,
/// `0.1000000000000000055511151231257827`), key order and spacing are kept, never re-encoded
/// through a float (D-intent-verbatim-text). Serializes as that JSON value, written out as is.
#[derive(Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct IntentJson(Box<RawValue>);

impl IntentJson {
    /// The intent from its JSON text.
    ///
    /// # Errors
    /// The text is not one JSON value.
    pub fn from_text(text: String) -> Result<Self, serde_json::Error> {
        RawValue::from_string(text).map(IntentJson)
    }

    /// The JSON `null` (what an undecodable row shows instead of its intent).
    pub fn null() -> Self {
        Self::from(&Value::Null)
    }

    /// The JSON text, byte for byte as received.
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.as_str().len()
    }

    /// Whether the text is empty (never, for a valid value).
    pub fn is_empty(&self) -> bool {
        self.as_str().is_empty()
    }

    /// A parsed copy, for reading fields: numbers beyond `i64`/`u64` become floats here, so use
    /// it to check and show, never to pass the intent on.
    ///
    /// # Errors
    /// A number out of a float's range (`1e400`).
    pub fn value(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_str(self.as_str())
    }

    /// The first top-level field where `other` is a different JSON value (`intent.quantity`, under
    /// `prefix`), `prefix` itself when the difference is not inside an object's field, `None` when
    /// both are the same value. The same value: object key order and spacing aside, strings
    /// compared after unescaping, numbers compared as written (`1` is not `1.0`, and
    /// `123456789012345678901234567890` is not `…891` even though both round to one float)
    /// (D-intent-resubmit-same-value).
    pub fn first_difference(&self, other: &IntentJson, prefix: &str) -> Option<String> {
        let (a, b) = (self.as_str(), other.as_str());
        if a == b {
            return None;
        }
        if let (Ok(ma), Ok(mb)) = (object(a), object(b)) {
            let mut keys: Vec<&String> = ma.keys().chain(mb.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let same = match (ma.get(k), mb.get(k)) {
                    (Some(x), Some(y)) => same_value(x.get(), y.get()),
                    _ => false,
                };
                if !same {
                    let name: String = k.chars().take(64).collect();
                    return Some(format!("{prefix}.{name}"));
                }
            }
            return None;
        }
        (!same_value(a, b)).then(|| prefix.to_owned())
    }
}

type RawObject = BTreeMap<String, Box<RawValue>>;

fn object(text: &str) -> Result<RawObject, serde_json::Error> {
    serde_json::from_str(text)
}

/// Whether two JSON texts are the same value, as [`IntentJson::first_difference`] defines it.
fn same_value(a: &str, b: &str) -> bool {
    let (a, b) = (a.trim(), b.trim());
    if a == b {
        return true;
    }
    match (a.as_bytes().first(), b.as_bytes().first()) {
        (Some(b'{'), Some(b'{')) => match (object(a), object(b)) {
            (Ok(ma), Ok(mb)) => {
                ma.len() == mb.len()
                    && ma
                        .iter()
                        .all(|(k, x)| mb.get(k).is_some_and(|y| same_value(x.get(), y.get())))
            }
            _ => false,
        },
        (Some(b'['), Some(b'[')) => {
            match (
                serde_json::from_str::<Vec<Box<RawValue>>>(a),
                serde_json::from_str::<Vec<Box<RawValue>>>(b),
            ) {
                (Ok(va), Ok(vb)) => {
                    va.len() == vb.len()
                        && va
                            .iter()
                            .zip(&vb)
                            .all(|(x, y)| same_value(x.get(), y.get()))
                }
                _ => false,
            }
        }
        (Some(b'"'), Some(b'"')) => matches!(
            (serde_json::from_str::<String>(a), serde_json::from_str::<String>(b)),
            (Ok(x), Ok(y)) if x == y
        ),
        // Numbers, true, false, null: as written (spacing is trimmed above).
        _ => false,
    }
}

impl From<&Value> for IntentJson {
    /// The compact JSON text of `v` (a value built in code, e.g. with `json!`).
    fn from(v: &Value) -> Self {
        // A `Value` always serializes (string keys, finite numbers); `null` keeps this total.
        IntentJson(serde_json::value::to_raw_value(v).unwrap_or_default())
    }
}

impl From<Value> for IntentJson {
    fn from(v: Value) -> Self {
        IntentJson::from(&v)
    }
}

impl PartialEq for IntentJson {
    /// Byte equality of the texts (for the semantic comparison: [`IntentJson::first_difference`]).
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for IntentJson {}

impl fmt::Debug for IntentJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IntentJson({})", self.as_str())
    }
}

impl fmt::Display for IntentJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a list shows of an intent (D-list-pages-bounded): the fields the gateway checks, as the
/// worker reads them; the whole intent (`options` and any other field) is in the task's detail.
/// At most about 9 KiB of JSON: `item_url` ≤ 2048 characters, `variant_id` ≤ 256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct IntentSummary {
    /// Item page URL.
    pub item_url: String,
    /// Units (1 when the intent leaves it out).
    pub quantity: u32,
    /// Variant, when given.
    pub variant_id: Option<String>,
    /// Amount limit, yen, when given.
    pub max_total_yen: Option<i64>,
}

impl From<&OrderIntent> for IntentSummary {
    fn from(i: &OrderIntent) -> Self {
        IntentSummary {
            item_url: i.item_url.clone(),
            quantity: i.quantity,
            variant_id: i.variant_id.clone(),
            max_total_yen: i.max_total_yen,
        }
    }
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

/// A JSON whole number (`2`, `2.0`; not `2.5`, not a string), or `None` when it is not one.
fn integer(v: &Value) -> Option<i64> {
    crate::whole::value_as_i64(v)
}

impl OrderIntent {
    /// Parses and checks an intent's JSON text (the checks read a parsed copy; the text itself is
    /// what is stored and passed on).
    ///
    /// # Errors
    /// [`IntentError`] naming the first offending field, or saying the text is not JSON.
    pub fn parse_json(intent: &IntentJson) -> Result<Self, IntentError> {
        let v = intent
            .value()
            .map_err(|e| err(format!("the intent is not JSON a worker can read: {e}")))?;
        Self::parse(&v)
    }

    /// What a list shows of it.
    pub fn summary(&self) -> IntentSummary {
        IntentSummary::from(self)
    }

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
    fn whole_numbers_written_with_a_fraction_are_integers() {
        let i =
            OrderIntent::parse(&json!({"item_url": URL, "quantity": 2.0, "max_total_yen": 5000.0}))
                .unwrap();
        assert_eq!((i.quantity, i.max_total_yen), (2, Some(5000)));
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

    const VERBATIM: &str = r#"{"item_url":"https://item.rakuten.co.jp/shop/a/", "options": {"big":123456789012345678901234567890,"u64p1":18446744073709551616,"tenth":0.1000000000000000055511151231257827}}"#;

    #[test]
    fn intent_text_survives_a_round_trip_inside_a_body_byte_for_byte() {
        #[derive(Serialize, Deserialize)]
        struct Body {
            intent: IntentJson,
            n: u8,
        }
        let body = format!(r#"{{"n":1,"intent":{VERBATIM}}}"#);
        let parsed: Body = serde_json::from_str(&body).unwrap();
        assert_eq!(parsed.intent.as_str(), VERBATIM);
        let again = serde_json::to_string(&parsed).unwrap();
        assert!(again.contains(VERBATIM), "{again}");
        // A `Value` would have read the numbers as floats.
        assert!(
            !serde_json::to_string(&parsed.intent.value().unwrap())
                .unwrap()
                .contains("123456789012345678901234567890")
        );
        let i = OrderIntent::parse_json(&parsed.intent).unwrap();
        assert_eq!(i.quantity, 1);
    }

    #[test]
    fn the_same_intent_is_the_same_value_with_numbers_as_written() {
        let t = |s: &str| IntentJson::from_text(s.to_owned()).unwrap();
        let a = t(r#"{"a":1,"b":{"x":[1,"é"],"y":null},"n":123456789012345678901234567890}"#);
        let same = t(
            r#"{ "n" : 123456789012345678901234567890, "b": {"y":null, "x":[ 1 , "é" ]}, "a": 1 }"#,
        );
        assert_eq!(a.first_difference(&same, "intent"), None);
        for (other, field) in [
            (
                r#"{"a":1,"b":{"x":[1,"é"],"y":null},"n":123456789012345678901234567891}"#,
                "intent.n",
            ),
            (
                r#"{"a":1.0,"b":{"x":[1,"é"],"y":null},"n":123456789012345678901234567890}"#,
                "intent.a",
            ),
            (
                r#"{"a":1,"b":{"x":[1,"e"],"y":null},"n":123456789012345678901234567890}"#,
                "intent.b",
            ),
            (
                r#"{"a":1,"b":{"x":[1,"é"]},"n":123456789012345678901234567890}"#,
                "intent.b",
            ),
            (r#"{"a":1,"b":{"x":[1,"é"],"y":null}}"#, "intent.n"),
            (r#"[]"#, "intent"),
        ] {
            assert_eq!(
                a.first_difference(&t(other), "intent").as_deref(),
                Some(field),
                "{other}"
            );
        }
    }
}
