//! The request rules of [`crate::ids`] and [`crate::text`] as OpenAPI schemas, so that a client
//! generated from a service's document refuses what the service refuses. Each pattern is built
//! from the predicate the server runs (`char::is_control`, [`is_invisible`], …) over every code
//! point, never typed by hand, so the two cannot drift (D-openapi-states-server-rules).
//!
//! Patterns are JSON Schema (ECMA-262) regular expressions that Python's `re` and Rust's
//! `fancy-regex` read alike: `\uXXXX` escapes for the Basic Multilingual Plane, characters above
//! it written as themselves (`\u{…}` and `\U…` are each one dialect's only), no lookbehind, and
//! no positive lookahead (property-based generators prepend its text).

use std::sync::LazyLock;

use utoipa::openapi::schema::{Object, ObjectBuilder, Type};

use crate::SITE_RAKUTEN;
use crate::ids::{MAX_ID_LEN, QueryId, ROUTE_WORDS, TaskId, WorkerId, is_invisible};
use crate::text::{MAX_REASON_CHARS, is_bidi_control, is_nonspacing_mark};

/// A character class of every code point `pred` holds for (`negate`: every other one), written
/// as a list of the smaller side (`[…]` of the members or `[^…]` of the rest): a generator walks
/// the code points a class lists, and schemathesis stalled on a class listing a million of them.
/// Planes 4 to 13 are unassigned and planes 15 and 16 private use: `pred` is asked once for each
/// such block (it runs at every start, and a walk over all 1.1 million code points took seconds
/// in a debug build).
fn class(negate: bool, pred: impl Fn(char) -> bool) -> String {
    let member = |c: char| pred(c) != negate;
    // Member ranges, inclusive.
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    let mut add = |a: u32, b: u32| match ranges.last_mut() {
        Some(last) if last.1 + 1 >= a => last.1 = b,
        _ => ranges.push((a, b)),
    };
    let uniform = [(0x4_0000_u32, 0xD_FFFF_u32), (0xF_0000, 0x10_FFFF)];
    let mut n = 0_u32;
    while n <= 0x10_FFFF {
        if let Some(&(a, b)) = uniform.iter().find(|(a, _)| *a == n) {
            if char::from_u32(a).is_some_and(member) {
                add(a, b);
            }
            n = b + 1;
            continue;
        }
        if char::from_u32(n).is_some_and(member) {
            add(n, n);
        }
        n += 1;
    }
    let members: u32 = ranges.iter().map(|(a, b)| b - a + 1).sum();
    let list_members = members < 0x8_0000;
    let listed = if list_members {
        ranges
    } else {
        let mut rest = Vec::new();
        let mut next = 0_u32;
        for (a, b) in ranges {
            if a > next {
                rest.push((next, a - 1));
            }
            next = b + 1;
        }
        if next <= 0x10_FFFF {
            rest.push((next, 0x10_FFFF));
        }
        rest
    };
    let mut out = String::from(if list_members { "[" } else { "[^" });
    for (a, b) in listed {
        // A range's ends are characters; a surrogate end moves to the nearest character.
        let (Some(a), Some(b)) = (
            char::from_u32(a).or(char::from_u32(0xE000)),
            char::from_u32(b).or(char::from_u32(0xD7FF)),
        ) else {
            continue;
        };
        if b < a {
            continue;
        }
        out.push_str(&lit(a));
        if b != a {
            if u32::from(b) > u32::from(a) + 1 {
                out.push('-');
            }
            out.push_str(&lit(b));
        }
    }
    out.push(']');
    out
}

/// [`class`] for a service's own predicates: a character class (`[…]`, or `[^…]` with
/// `negate`) of every code point `pred` holds for, in the dialect of this module's patterns.
pub fn char_class(negate: bool, pred: impl Fn(char) -> bool) -> String {
    class(negate, pred)
}

/// One character inside a class: `\uXXXX` in the BMP, the character itself above it.
fn lit(c: char) -> String {
    match u32::from(c) {
        n @ 0..=0xFFFF if !c.is_ascii_alphanumeric() => format!("\\u{n:04x}"),
        _ => c.to_string(),
    }
}

/// What may not appear anywhere in an id ([`crate::ids::parse_id`]).
fn id_forbidden(c: char) -> bool {
    c.is_control() || is_invisible(c) || c == '/' || c == '\\'
}

/// An id's text without anchors: its first and last characters are not whitespace, none is
/// forbidden, at most [`MAX_ID_LEN`] characters, no `..`, not a route word.
static ID_BODY: LazyLock<String> = LazyLock::new(|| {
    let words: Vec<String> = ROUTE_WORDS.iter().map(|w| w.replace('.', "\\.")).collect();
    let edge = class(true, |c| id_forbidden(c) || c.is_whitespace());
    let inner = class(true, id_forbidden);
    format!(
        "(?!(?:{})(?:/|$))(?![^/]*\\.\\.){edge}(?:{inner}{{0,{}}}{edge})?",
        words.join("|"),
        MAX_ID_LEN - 2
    )
});

/// The pattern of every id (task, query, worker ids; `D-id-rules`).
pub fn id_pattern() -> String {
    format!("^{}$", *ID_BODY)
}

/// The schema of an id type ([`crate::TaskId`], …): 1 to [`MAX_ID_LEN`] characters and
/// [`id_pattern`].
pub fn id() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(MAX_ID_LEN))
        .pattern(Some(id_pattern()))
        .build()
}

/// `evidence_ref`: `{id}/{NN}-{step}`, NN two or more digits, step `[a-z0-9-]+`, at most 256
/// characters. The id must be the task's own, which a schema cannot say.
pub fn evidence_ref_or_null() -> Object {
    ObjectBuilder::new()
        .schema_type(nullable_string())
        .description(Some(
            "This task's evidence: `{task_id}/{NN}-{step}` (NN two or more digits, step \
             `[a-z0-9-]+`), at most 256 characters, e.g. `po-1/03-order-confirm`.",
        ))
        .max_length(Some(256))
        .pattern(Some(format!("^{}/[0-9]{{2,}}-[a-z0-9-]+$", *ID_BODY)))
        .build()
}

/// A reason an operator types: at least one readable character (not whitespace, invisible or a
/// non-spacing mark), no control character but line breaks and tabs once edge whitespace is
/// trimmed, no bidirectional control ([`crate::text::reason`]). Its length is [`reason`]'s
/// `maxLength`.
pub fn reason_pattern() -> String {
    reason_pattern_with(true)
}

/// [`reason_pattern`] for a reason on one line: no control character at all once edge
/// whitespace is trimmed (card-polling's `parse_reason`).
pub fn line_reason_pattern() -> String {
    reason_pattern_with(false)
}

fn reason_pattern_with(newlines: bool) -> String {
    let ws = class(false, char::is_whitespace);
    let allowed = |c: char| {
        (!c.is_control() || (newlines && matches!(c, '\n' | '\r' | '\t'))) && !is_bidi_control(c)
    };
    let any = class(false, allowed);
    let edge = class(false, |c| allowed(c) && !c.is_whitespace());
    let blank = class(false, |c| {
        c.is_whitespace() || is_invisible(c) || is_nonspacing_mark(c)
    });
    // The bound is the schema's `maxLength`: a repetition bound of 998 stalled schemathesis.
    format!("^(?!{blank}*$){ws}*{edge}(?:{any}*{edge})?{ws}*$")
}

static REASON: LazyLock<String> = LazyLock::new(reason_pattern);

const REASON_DOC: &str = "Why, for the record: 1 to 1000 characters with something readable, \
    line breaks and tabs but no other control character, no bidirectional control.";

/// A required operator reason: [`reason_pattern`], at most
/// [`MAX_REASON_CHARS`] characters. The server counts them after
/// trimming edge whitespace, so this bound is the stricter one by that whitespace.
pub fn reason() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(REASON_DOC))
        .min_length(Some(1))
        .max_length(Some(MAX_REASON_CHARS))
        .pattern(Some(REASON.clone()))
        .build()
}

/// An optional operator reason in a body: [`reason`] or `null`.
pub fn reason_or_null() -> Object {
    ObjectBuilder::new()
        .schema_type(nullable_string())
        .description(Some(REASON_DOC))
        .min_length(Some(1))
        .max_length(Some(MAX_REASON_CHARS))
        .pattern(Some(REASON.clone()))
        .build()
}

/// Text without control characters (`newlines`: line breaks and tabs allowed), 1 to `max`
/// characters when `min_one`.
fn plain_text(max: usize, min_one: bool, newlines: bool, nullable: bool) -> Object {
    let pattern = format!(
        "^{}*$",
        class(true, |c| c.is_control()
            && !(newlines && matches!(c, '\n' | '\r' | '\t')))
    );
    let doc = format!(
        "{} {max} characters, no control character{}.",
        if min_one { "1 to" } else { "At most" },
        if newlines {
            " but line breaks and tabs"
        } else {
            ""
        }
    );
    ObjectBuilder::new()
        .description(Some(doc))
        .schema_type(if nullable {
            nullable_string()
        } else {
            Type::String.into()
        })
        .min_length(min_one.then_some(1))
        .max_length(Some(max))
        .pattern(Some(pattern))
        .build()
}

/// A lease's fencing token as a client sends it back: 1 to 128 characters, no control character.
pub fn lease_token() -> Object {
    plain_text(128, true, false, false)
}

/// [`lease_token`] or `null`, in a body.
pub fn lease_token_or_null() -> Object {
    plain_text(128, true, false, true)
}

/// One line of at most `max` characters (no control character), or `null`.
pub fn line_or_null(max: usize) -> Object {
    plain_text(max, false, false, true)
}

/// 1 to `max` characters on one line (no control character), or `null`.
pub fn nonempty_line_or_null(max: usize) -> Object {
    plain_text(max, true, false, true)
}

/// Text of at most `max` characters, line breaks and tabs allowed, or `null`.
pub fn text_or_null(max: usize) -> Object {
    plain_text(max, false, true, true)
}

/// A `site`: only `rakuten` is traded (§10).
pub fn site() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some("The site: only `rakuten` is traded."))
        .enum_values(Some([SITE_RAKUTEN]))
        .build()
}

/// `string` or `null`.
fn nullable_string() -> utoipa::openapi::schema::SchemaType {
    utoipa::openapi::schema::SchemaType::from_iter([Type::String, Type::Null])
}

/// A named schema for a parameter that is a plain `String` in Rust but has the rules of one of
/// the functions above (a query parameter's `value_type`, which keeps its description and
/// `required`).
macro_rules! schema_type {
    ($(#[$doc:meta])* $name:ident => $schema:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
                $schema.into()
            }
        }

        impl utoipa::ToSchema for $name {}
    };
}

// The id types are named schemas with `parse_id`'s rules as a pattern, so a client refuses what
// the server does. They are implemented here, beside [`id`], so that `ids` stays a leaf of rules.
macro_rules! id_schema {
    ($($name:ty),*) => {$(
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
                id().into()
            }
        }

        impl utoipa::ToSchema for $name {}
    )*};
}

id_schema!(TaskId, QueryId, WorkerId);

schema_type!(
    /// `site`: [`site`].
    Site => site()
);
schema_type!(
    /// An operator's `reason`: [`reason`].
    Reason => reason()
);
schema_type!(
    /// A `lease_token` sent back: [`lease_token`].
    LeaseToken => lease_token()
);

/// An order intent (§4.2) as [`OrderIntent::parse`](crate::intent::OrderIntent::parse) checks
/// it: an object with `item_url` on a `rakuten.co.jp` host (scheme and host in any ASCII case,
/// an optional port, no user information, no whitespace, control or invisible character),
/// `quantity` 1 to 99, `variant_id` and `max_total_yen` > 0 optional; other keys pass untouched.
pub fn intent() -> Object {
    static INTENT: LazyLock<Object> = LazyLock::new(intent_schema);
    INTENT.clone()
}

fn intent_schema() -> Object {
    use crate::intent::{MAX_ITEM_URL_CHARS, MAX_QUANTITY, MAX_VARIANT_ID_CHARS};
    let any_case = |word: &str| -> String {
        word.chars()
            .map(|c| match c {
                'a'..='z' => format!("[{c}{}]", c.to_ascii_uppercase()),
                '.' => "\\.".into(),
                other => other.to_string(),
            })
            .collect()
    };
    let url_char = |c: char| c.is_whitespace() || c.is_control() || is_invisible(c);
    let any = class(true, url_char);
    let host = class(true, |c| {
        url_char(c) || matches!(c, '/' | '?' | '#' | '@' | ':')
    });
    let item_url = format!(
        "^{}[sS]?://(?:{host}*\\.)?{}\\.?(?::[0-9]+)?(?:[/?#]{any}*)?$",
        any_case("http"),
        any_case("rakuten.co.jp"),
    );
    let variant = format!(
        "^{}*$",
        class(true, |c| c.is_control() || is_bidi_control(c))
    );
    let integer = |min: i64, max: Option<i64>, nullable: bool| {
        let t: utoipa::openapi::schema::SchemaType = if nullable {
            utoipa::openapi::schema::SchemaType::from_iter([Type::Integer, Type::Null])
        } else {
            Type::Integer.into()
        };
        ObjectBuilder::new()
            .schema_type(t)
            .minimum(Some(min as f64))
            .maximum(max.map(|m| m as f64))
    };
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "The order intent, stored and handed to the worker byte for byte; at most 64 KiB.",
        ))
        .required("item_url")
        .property(
            "item_url",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .max_length(Some(MAX_ITEM_URL_CHARS))
                .pattern(Some(item_url)),
        )
        .property("quantity", integer(1, Some(i64::from(MAX_QUANTITY)), false))
        .property(
            "variant_id",
            ObjectBuilder::new()
                .schema_type(nullable_string())
                .max_length(Some(MAX_VARIANT_ID_CHARS))
                .pattern(Some(variant)),
        )
        .property("max_total_yen", integer(1, None, true))
        .property(
            "options",
            ObjectBuilder::new().schema_type(utoipa::openapi::schema::SchemaType::AnyValue),
        )
        .build()
}
