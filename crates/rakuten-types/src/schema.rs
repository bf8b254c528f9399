//! The request rules of [`crate::ids`] and [`crate::text`] as OpenAPI schemas, so that a client
//! generated from a service's document refuses what the service refuses. Each pattern is built
//! from the predicate the server runs (`char::is_control`, [`is_invisible`], …) over every code
//! point, never typed by hand, so the two cannot drift.
//!
//! Patterns are JSON Schema (ECMA-262) regular expressions that Python's `re` and Rust's
//! `fancy-regex` read alike: `\uXXXX` escapes for the Basic Multilingual Plane, characters above
//! it written as themselves (`\u{…}` and `\U…` are each one dialect's only), no lookbehind, and
//! no positive lookahead (property-based generators prepend its text).

use std::sync::LazyLock;

use utoipa::openapi::schema::{Object, ObjectBuilder, Type};

use crate::SITE_RAKUTEN;
use crate::ids::{MAX_ID_LEN, ROUTE_WORDS, is_invisible};
use crate::text::{is_bidi_control, is_nonspacing_mark};

/// A character class of every code point `pred` holds for (`negate`: every other one), written
/// as a list of the smaller side (`[…]` of the members or `[^…]` of the rest): a generator walks
/// the code points a class lists, and schemathesis stalled on a class listing a million of them.
fn class(negate: bool, pred: impl Fn(char) -> bool) -> String {
    let member = |c: char| pred(c) != negate;
    let members = (0..=0x10_FFFF_u32)
        .filter_map(char::from_u32)
        .filter(|&c| member(c))
        .count();
    let list_members = members < 0x8_0000;
    let listed = |c: char| member(c) == list_members;
    let mut out = String::from(if list_members { "[" } else { "[^" });
    let mut start: Option<char> = None;
    let mut prev = '\0';
    let push = |out: &mut String, a: char, b: char| {
        out.push_str(&lit(a));
        if b != a {
            if u32::from(b) > u32::from(a) + 1 {
                out.push('-');
            }
            out.push_str(&lit(b));
        }
    };
    for c in (0..=0x10_FFFF_u32).filter_map(char::from_u32) {
        if listed(c) {
            if start.is_none() {
                start = Some(c);
            }
            prev = c;
        } else if let Some(a) = start.take() {
            push(&mut out, a, prev);
        }
    }
    if let Some(a) = start {
        push(&mut out, a, prev);
    }
    out.push(']');
    out
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
        .max_length(Some(256))
        .pattern(Some(format!("^{}/[0-9]{{2,}}-[a-z0-9-]+$", *ID_BODY)))
        .build()
}

/// A reason an operator types: at least one readable character (not whitespace, invisible or a
/// non-spacing mark), no control character but line breaks and tabs once edge whitespace is
/// trimmed, no bidirectional control ([`crate::text::reason`]). Its length is [`reason`]'s
/// `maxLength`.
pub fn reason_pattern() -> String {
    let ws = class(false, char::is_whitespace);
    let allowed =
        |c: char| !(c.is_control() && !matches!(c, '\n' | '\r' | '\t')) && !is_bidi_control(c);
    let any = class(false, allowed);
    let edge = class(false, |c| allowed(c) && !c.is_whitespace());
    let blank = class(false, |c| {
        c.is_whitespace() || is_invisible(c) || is_nonspacing_mark(c)
    });
    // The bound is the schema's `maxLength`: a repetition bound of 998 stalled schemathesis.
    format!("^(?!{blank}*$){ws}*{edge}(?:{any}*{edge})?{ws}*$")
}

static REASON: LazyLock<String> = LazyLock::new(reason_pattern);

/// A required operator reason: [`reason_pattern`], at most
/// [`MAX_REASON_CHARS`](crate::alert::MAX_REASON_CHARS) characters. The server counts them after
/// trimming edge whitespace, so this bound is the stricter one by that whitespace.
pub fn reason() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(crate::alert::MAX_REASON_CHARS))
        .pattern(Some(REASON.clone()))
        .build()
}

/// An optional operator reason in a body: [`reason`] or `null`.
pub fn reason_or_null() -> Object {
    ObjectBuilder::new()
        .schema_type(nullable_string())
        .min_length(Some(1))
        .max_length(Some(crate::alert::MAX_REASON_CHARS))
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
    ObjectBuilder::new()
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
