//! Whole numbers read from JSON bodies the way JSON Schema's `integer` reads them: `11`, `11.0`
//! and `1.1e1` are the same integer, `11.5` is not one (D-json-whole-numbers).
//!
//! The OpenAPI documents say `type: integer`, and a client that writes every number as a float
//! (JavaScript's `JSON.stringify(11.0)` does not, but Python's `json.dumps(11.0)` does) sends
//! `11.0`. serde's integer types refuse it; the helpers here take it. What they refuse they
//! refuse with serde's own message (`invalid type: floating point `11.5`, expected i64`,
//! `invalid value: integer `300`, expected u8`), so a 422's text does not depend on which
//! spelling of a number was sent.
//!
//! Use on a field: `#[serde(deserialize_with = "crate::whole::deserialize")]`, or for an
//! `Option`, `#[serde(default, deserialize_with = "crate::whole::option")]`. For a number inside
//! a `serde_json::Value`: [`value_as_i64`].

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, Unexpected, Visitor};
use serde_json::Value;

/// An integer type a JSON body may carry: its name as serde writes it in messages, and the
/// conversions from the two integer forms a JSON parser produces.
pub trait WholeNumber: TryFrom<i64> + TryFrom<u64> + Sized {
    /// The Rust name (`i64`), which serde's messages use and the HTTP edge rewrites to "a whole
    /// number".
    const NAME: &'static str;
}

macro_rules! whole_number {
    ($($t:ty),*) => {$(
        impl WholeNumber for $t {
            const NAME: &'static str = stringify!($t);
        }
    )*};
}
whole_number!(i32, i64, u32, u64);

/// Largest magnitude an `f64` can hold that is still exactly an `i64`/`u64` bound: 2^63 and
/// 2^64 as floats (exclusive upper bounds).
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;

struct WholeVisitor<T>(PhantomData<T>);

impl<'de, T: WholeNumber> Visitor<'de> for WholeVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::NAME)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        T::try_from(v).map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        T::try_from(v).map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        if !v.is_finite() || v.fract() != 0.0 {
            return Err(E::invalid_type(Unexpected::Float(v), &self));
        }
        // Exact: a whole f64 inside these bounds converts without rounding.
        let converted = if (-TWO_POW_63..TWO_POW_63).contains(&v) {
            T::try_from(v as i64).ok()
        } else if (0.0..TWO_POW_64).contains(&v) {
            T::try_from(v as u64).ok()
        } else {
            None
        };
        // Refused as before this helper: every float an integer type does not take is the same
        // "invalid type" message.
        converted.ok_or_else(|| E::invalid_type(Unexpected::Float(v), &self))
    }
}

/// A whole number as `T`, however it is written (see the module doc).
struct Whole<T>(T);

impl<'de, T: WholeNumber> serde::Deserialize<'de> for Whole<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(WholeVisitor(PhantomData)).map(Whole)
    }
}

/// `deserialize_with` for an integer field: `11` and `11.0` give 11; `11.5`, a string, or a
/// value outside `T` is refused with serde's message for `T`.
///
/// # Errors
/// As above.
pub fn deserialize<'de, D: Deserializer<'de>, T: WholeNumber>(d: D) -> Result<T, D::Error> {
    <Whole<T> as serde::Deserialize>::deserialize(d).map(|w| w.0)
}

/// `deserialize_with` for an `Option` integer field (pair it with `#[serde(default)]` so an
/// absent key is `None`): `null` is `None`, a number as in [`deserialize`].
///
/// # Errors
/// As [`deserialize`].
pub fn option<'de, D: Deserializer<'de>, T: WholeNumber>(d: D) -> Result<Option<T>, D::Error> {
    <Option<Whole<T>> as serde::Deserialize>::deserialize(d).map(|o| o.map(|w| w.0))
}

/// The whole number a JSON value holds (`11`, `11.0`), or `None` for anything else: a fraction,
/// a string, a number outside `i64`.
pub fn value_as_i64(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && (-TWO_POW_63..TWO_POW_63).contains(f))
                .map(|f| f as i64)
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize)]
    struct Body {
        #[serde(deserialize_with = "deserialize")]
        n: i64,
        #[serde(default, deserialize_with = "option")]
        code: Option<i32>,
        #[serde(default, deserialize_with = "option")]
        pages: Option<u32>,
    }

    fn parse(s: &str) -> Result<Body, String> {
        serde_json::from_str(s).map_err(|e| e.to_string())
    }

    #[test]
    fn a_whole_number_written_with_a_fraction_is_that_integer() {
        let b = parse(r#"{"n": -194848.0, "code": 5004.0, "pages": 11.0}"#).unwrap();
        assert_eq!((b.n, b.code, b.pages), (-194848, Some(5004), Some(11)));
        let b = parse(r#"{"n": 1.1e1, "code": null}"#).unwrap();
        assert_eq!((b.n, b.code, b.pages), (11, None, None));
        let b = parse(r#"{"n": 9223372036854775807}"#).unwrap();
        assert_eq!(b.n, i64::MAX);
    }

    #[test]
    fn a_fraction_or_an_out_of_range_number_keeps_serdes_message() {
        // The messages the plain integer types give, so a 422 reads the same as before.
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Plain {
            n: i64,
            code: Option<i32>,
            pages: Option<u32>,
        }
        for input in [
            r#"{"n": 11.5}"#,
            r#"{"n": "11"}"#,
            r#"{"n": 1, "code": 3000000000}"#,
            r#"{"n": 1, "pages": -1}"#,
            r#"{"n": 1e300}"#,
            r#"{"n": 1, "code": 3000000000.0}"#,
        ] {
            let plain = serde_json::from_str::<Plain>(input)
                .unwrap_err()
                .to_string();
            assert_eq!(parse(input).unwrap_err(), plain, "{input}");
        }
    }

    #[test]
    fn value_as_i64_takes_whole_numbers_only() {
        assert_eq!(value_as_i64(&json!(11)), Some(11));
        assert_eq!(value_as_i64(&json!(11.0)), Some(11));
        assert_eq!(value_as_i64(&json!(-2936.0)), Some(-2936));
        assert_eq!(value_as_i64(&json!(11.5)), None);
        assert_eq!(value_as_i64(&json!("11")), None);
        assert_eq!(value_as_i64(&json!(1e300)), None);
        assert_eq!(value_as_i64(&json!(u64::MAX)), None);
    }
}
