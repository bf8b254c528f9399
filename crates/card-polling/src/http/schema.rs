//! The request rules of card-polling's routes as OpenAPI schemas, each built from the predicate the
//! handler runs (`priority::manual::parse_reason`, the item id's canonical decimal, the list
//! filters), so a client generated from `/openapi.json` refuses what the server refuses
//! (D-openapi-states-server-rules). The shared rules come from `rakuten_types::schema`; the
//! domain's own (keys, account ids and tokens, shop names) live beside their checks in
//! [`crate::domain`], since the domain's types carry them; the rest are here.

use rakuten_types::ids::MAX_ID_LEN;
use rakuten_types::schema::{char_class, id_pattern, line_reason_pattern};
use utoipa::openapi::schema::{Object, ObjectBuilder, Type};

use crate::domain::account::account_id_schema;
use crate::domain::key::key_schema;
use crate::priority::MAX_REASON_CHARS;

/// An operator's reason (`priority::manual::parse_reason`): something readable, on one line
/// once edge whitespace is trimmed, no bidirectional control, at most 500 characters.
pub fn reason() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(
            "Why, for the record: 1 to 500 characters with something readable, on one line (no \
             control character), no bidirectional control.",
        ))
        .min_length(Some(1))
        .max_length(Some(MAX_REASON_CHARS))
        .pattern(Some(line_reason_pattern()))
        .build()
}

/// Canonical decimal of 1..=`max`: no sign, no leading zero (`priority::canonical_id`).
pub fn decimal_at_most(max: u64) -> String {
    let digits: Vec<u8> = max.to_string().bytes().map(|b| b - b'0').collect();
    let n = digits.len();
    let mut alts = Vec::new();
    if n > 1 {
        alts.push(if n == 2 {
            "[1-9]".to_owned()
        } else {
            format!("[1-9][0-9]{{0,{}}}", n - 2)
        });
    }
    // As many digits as `max`: equal up to position i, smaller there, anything after.
    for i in 0..n {
        let low = u8::from(i == 0);
        if digits[i] > low {
            let rest = n - i - 1;
            let head: String = digits[..i].iter().map(|d| char::from(b'0' + d)).collect();
            let tail = match rest {
                0 => String::new(),
                1 => "[0-9]".to_owned(),
                r => format!("[0-9]{{{r}}}"),
            };
            alts.push(format!("{head}[{low}-{}]{tail}", digits[i] - 1));
        }
    }
    alts.push(max.to_string());
    format!("^(?:{})$", alts.join("|"))
}

/// A priority item id in a path: canonical decimal of 1..=`i64::MAX` (D-item-ids-and-list-filters).
pub fn item_id() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(
            "A priority item id: a positive integer in decimal without sign or leading zeros, at \
             most 9223372036854775807.",
        ))
        .pattern(Some(decimal_at_most(i64::MAX.unsigned_abs())))
        .build()
}

/// A comma list of `words`, each trimmed of whitespace as the server trims it (`?exception=`).
pub fn comma_list(words: &[&str], description: &str) -> Object {
    let ws = char_class(false, char::is_whitespace);
    let one = format!("{ws}*(?:{}){ws}*", words.join("|"));
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(description))
        .pattern(Some(format!("^{one}(?:,{one})*$")))
        .build()
}

/// A named schema for a path parameter that is a plain `String` in Rust but has the rules of one
/// of the functions above (a path parameter's `value_type`).
macro_rules! schema_type {
    ($(#[$doc:meta])* $name:ident => $schema:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                $schema.into()
            }
        }

        impl utoipa::ToSchema for $name {}
    };
}

schema_type!(
    /// A key in a path: [`key_schema`].
    Key => key_schema()
);
schema_type!(
    /// An account id in a path: [`account_id_schema`].
    AccountId => account_id_schema()
);
schema_type!(
    /// A priority item id in a path: [`item_id`].
    ItemId => item_id()
);

/// A task type a request names (`task_types[]`, `?task_type=`): one this instance is configured
/// with. The component is a plain non-empty name here; the served document lists the configured
/// names as its `enum` (`openapi::with_task_types`), since any other name is refused.
#[derive(Debug, Clone, Copy)]
pub struct TaskTypeName;

impl utoipa::PartialSchema for TaskTypeName {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(
                "A configured task type (`GET /api/task-types`); any other is refused (1003).",
            ))
            .min_length(Some(1))
            .max_length(Some(MAX_ID_LEN))
            .pattern(Some(id_pattern()))
            .build()
            .into()
    }
}

impl utoipa::ToSchema for TaskTypeName {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The item id's pattern accepts exactly what `canonical_id` accepts, at the bound and around it.
    #[test]
    fn the_item_id_pattern_is_canonical_decimal_up_to_i64_max() {
        let pattern = decimal_at_most(i64::MAX.unsigned_abs());
        let re = regex_lite_match(&pattern);
        for s in [
            "1",
            "9",
            "10",
            "999999999999999999",
            "9223372036854775807",
            "9223372036854775799",
            "8999999999999999999",
        ] {
            assert!(re(s), "{s}");
            assert!(crate::priority::canonical_id(s).is_some(), "{s}");
        }
        for s in [
            "0",
            "01",
            "+1",
            "9223372036854775808",
            "9300000000000000000",
            "10000000000000000000",
            "",
        ] {
            assert!(!re(s), "{s}");
            assert!(crate::priority::canonical_id(s).is_none(), "{s}");
        }
    }

    /// A tiny matcher for the alternatives [`decimal_at_most`] writes (`[a-b]`, `[0-9]{n}`,
    /// `[0-9]{0,n}`, literal digits), so the test needs no regex engine.
    fn regex_lite_match(pattern: &str) -> impl Fn(&str) -> bool + use<> {
        let body = pattern
            .strip_prefix("^(?:")
            .and_then(|p| p.strip_suffix(")$"))
            .unwrap()
            .to_owned();
        move |s: &str| {
            body.split('|')
                .any(|alt| matches_alt(alt.as_bytes(), s.as_bytes()))
        }
    }

    fn matches_alt(p: &[u8], s: &[u8]) -> bool {
        match p.first() {
            None => s.is_empty(),
            Some(b'[') => {
                let (lo, hi) = (p[1], p[3]);
                let rest = &p[5..];
                let (min, max, rest) = if rest.first() == Some(&b'{') {
                    let end = rest.iter().position(|&b| b == b'}').unwrap();
                    let spec = std::str::from_utf8(&rest[1..end]).unwrap();
                    let (a, b) = match spec.split_once(',') {
                        Some((a, b)) => (a.parse().unwrap(), b.parse().unwrap()),
                        None => (spec.parse().unwrap(), spec.parse().unwrap()),
                    };
                    (a, b, &rest[end + 1..])
                } else {
                    (1, 1, rest)
                };
                (min..=max).any(|k: usize| {
                    s.len() >= k
                        && s[..k].iter().all(|c| (lo..=hi).contains(c))
                        && matches_alt(rest, &s[k..])
                })
            }
            Some(&c) => s.first() == Some(&c) && matches_alt(&p[1..], &s[1..]),
        }
    }
}
