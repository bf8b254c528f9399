//! Strict JSON: a body with the same key twice in one object, at any depth, is refused.
//!
//! `serde_json` keeps the last of two equal keys while other parsers keep the first, so
//! `{"max_total_yen":1000,"max_total_yen":999999}` means a different spending limit to a proxy or
//! log reader than to us (issue #12 item 4). [`from_slice`] walks the document once with a
//! visitor that remembers each object's keys, then deserializes the target type.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeOwned, DeserializeSeed, MapAccess, SeqAccess, Visitor};

/// Parses `bytes` as `T`, refusing a duplicate object key anywhere in the document.
///
/// # Errors
/// The `serde_json` error of the first problem: syntax, a duplicate key (message
/// ``duplicate key `name` ``, with line and column), or a mismatch with `T`.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, serde_json::Error> {
    check_no_duplicate_keys(bytes)?;
    serde_json::from_slice(bytes)
}

/// Checks `bytes` is one JSON document without a duplicate key in any object.
///
/// # Errors
/// The `serde_json` error of a syntax error or of the first duplicate key.
pub fn check_no_duplicate_keys(bytes: &[u8]) -> Result<(), serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    NoDuplicates.deserialize(&mut de)?;
    de.end()
}

/// A seed that accepts any JSON value and fails on a repeated key in an object.
struct NoDuplicates;

impl<'de> DeserializeSeed<'de> for NoDuplicates {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NoDuplicates {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(NoDuplicates)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if seen.contains(&key) {
                // Cut so an echoed message stays short whatever the key.
                let shown: String = key.chars().take(64).collect();
                return Err(de::Error::custom(format_args!("duplicate key `{shown}`")));
            }
            seen.insert(key);
            map.next_value_seed(NoDuplicates)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duplicate_key_at_any_depth_is_refused() {
        for bad in [
            r#"{"a":1,"a":2}"#,
            r#"{"x":{"max_total_yen":1000,"max_total_yen":999999}}"#,
            r#"[{"k":[{"z":1,"y":2,"z":3}]}]"#,
            r#"{"a":{},"b":[],"a":null}"#,
        ] {
            let e = check_no_duplicate_keys(bad.as_bytes()).unwrap_err();
            assert!(e.to_string().contains("duplicate key"), "{bad}: {e}");
        }
    }

    #[test]
    fn equal_keys_in_different_objects_are_fine() {
        for good in [
            r#"{"a":{"a":1},"b":{"a":2}}"#,
            r#"[{"a":1},{"a":1}]"#,
            r#""a""#,
            "[]",
            r#"{"a\u0062":1,"ab2":2}"#,
        ] {
            check_no_duplicate_keys(good.as_bytes()).unwrap();
        }
    }

    #[test]
    fn an_escaped_spelling_of_the_same_key_is_a_duplicate() {
        let e = check_no_duplicate_keys(br#"{"ab":1,"a\u0062":2}"#).unwrap_err();
        assert!(e.to_string().contains("duplicate key `ab`"), "{e}");
    }

    #[test]
    fn trailing_garbage_is_refused() {
        assert!(check_no_duplicate_keys(br#"{"a":1} x"#).is_err());
    }
}
