//! Strict JSON: a body with the same key twice in one object, at any depth, is refused.
//!
//! `serde_json` keeps the last of two equal keys while other parsers keep the first, so
//! `{"max_total_yen":1000,"max_total_yen":999999}` means a different spending limit to a proxy or
//! log reader than to us. [`from_slice`] walks the document once with a
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

/// [`from_slice`] for a request body, with a message for a person: the body must be a JSON
/// object (serde would otherwise read `[]` as a struct written as a sequence); a mismatch with `T`
/// names where it is (`accounts[1].role: …`) and says what is expected in JSON's words, never a
/// Rust type (`expected struct EnqueueBody`, `expected i64`; D-json-body-rules).
///
/// # Errors
/// The message, starting `invalid JSON body: ` or saying the body must be an object.
pub fn body_from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    // A file saved by an editor that marks UTF-8, and an empty body, are told
    // apart from a body that is not an object.
    if bytes.starts_with(b"\xEF\xBB\xBF") {
        return Err(
            "the request body starts with a UTF-8 byte order mark (EF BB BF): send the JSON \
             object without it"
                .into(),
        );
    }
    if std::str::from_utf8(bytes).is_err() {
        // A UTF-16 file, or Latin-1 text: not "must be a JSON object", which it may well be.
        return Err("the request body is not UTF-8: send the JSON object encoded as UTF-8".into());
    }
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => {}
        None => return Err("the request body is empty: send a JSON object ({...})".into()),
        Some(_) => return Err("the request body must be a JSON object ({...})".into()),
    }
    check_no_duplicate_keys(bytes)
        .map_err(|e| format!("invalid JSON body: {}", plain(&e.to_string())))?;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let what = plain(&e.into_inner().to_string());
        if path == "." {
            format!("invalid JSON body: {what}")
        } else {
            format!("invalid JSON body: {path}: {what}")
        }
    })
}

/// serde's "expected …" in JSON's words: a struct is an object, an integer type a whole number,
/// a float a number, an enum one of the allowed values.
fn plain(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    while let Some(at) = rest.find("expected ") {
        out.push_str(&rest[..at + "expected ".len()]);
        rest = &rest[at + "expected ".len()..];
        let word_end = |s: &str| s.find([' ', ',']).unwrap_or(s.len());
        if let Some(after) = rest.strip_prefix("struct ") {
            out.push_str("an object");
            rest = &after[word_end(after)..];
        } else if let Some(after) = rest.strip_prefix("enum ") {
            out.push_str("one of the allowed values");
            rest = &after[word_end(after)..];
        } else {
            let word = &rest[..word_end(rest)];
            let plain = match word {
                "i8" | "i16" | "i32" | "i64" | "i128" | "isize" | "u8" | "u16" | "u32" | "u64"
                | "u128" | "usize" => Some("a whole number"),
                "f32" | "f64" => Some("a number"),
                "bool" => Some("true or false"),
                _ => None,
            };
            if let Some(p) = plain {
                out.push_str(p);
                rest = &rest[word.len()..];
            }
        }
    }
    out.push_str(rest);
    out
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
mod body_tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct EnqueueBody {
        asset_id: String,
        rows: Vec<Row>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Row {
        limit: i64,
        role: Role,
        on: Option<bool>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Role {
        Platform,
    }

    /// D-json-body-rules: card-polling answered `null` with "invalid type:
    /// null, expected struct EnqueueBody", took `[...]` as a positional body, and a bad field
    /// deep in an import said only "at line 1 column 211".
    #[test]
    fn a_body_refusal_is_an_object_rule_or_names_the_field_in_json_words() {
        let cases = [
            ("null", "the request body must be a JSON object ({...})"),
            ("[]", "the request body must be a JSON object ({...})"),
            ("not json", "the request body must be a JSON object ({...})"),
            // Each told apart from "must be a JSON object".
            ("", "the request body is empty: send a JSON object ({...})"),
            (
                " \n",
                "the request body is empty: send a JSON object ({...})",
            ),
            (
                "\u{feff}{\"asset_id\": \"a\", \"rows\": []}",
                "the request body starts with a UTF-8 byte order mark (EF BB BF): send the JSON object without it",
            ),
            (
                r#"{"asset_id": 1, "rows": []}"#,
                "invalid JSON body: asset_id: invalid type: integer `1`, expected a string",
            ),
            (
                r#"{"asset_id": "a", "rows": [{"limit": 1, "role": "platform"}, {"limit": "x", "role": "platform"}]}"#,
                "invalid JSON body: rows[1].limit: invalid type: string \"x\", expected a whole number",
            ),
            (
                r#"{"asset_id": "a", "rows": [{"limit": 1, "role": "wizard"}]}"#,
                "invalid JSON body: rows[0].role: unknown variant `wizard`, expected `platform`",
            ),
            (
                r#"{"asset_id": "a", "rows": [{"limit": 1, "role": "platform", "on": "no"}]}"#,
                "invalid JSON body: rows[0].on: invalid type: string \"no\", expected a boolean",
            ),
        ];
        for (body, want) in cases {
            let got = body_from_slice::<EnqueueBody>(body.as_bytes()).unwrap_err();
            assert!(got.starts_with(want), "{body}: {got}");
            for rust in ["struct", "EnqueueBody", "i64", "Role"] {
                assert!(!got.contains(rust), "{body}: {got}");
            }
        }
        // A UTF-16 file and bytes that are not UTF-8 were "must be a JSON
        // object".
        for body in [
            &b"\xff\xfe{\x00}\x00"[..],
            b"\xc3\x28",
            b"{\"asset_id\": \"\xe9\"}",
        ] {
            assert_eq!(
                body_from_slice::<EnqueueBody>(body).unwrap_err(),
                "the request body is not UTF-8: send the JSON object encoded as UTF-8"
            );
        }
        assert!(body_from_slice::<EnqueueBody>(br#"{"asset_id": "a", "rows": []}"#).is_ok());
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
