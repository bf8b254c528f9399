//! Parsed identifiers. Every id that arrives from a request passes through [`parse_id`]: 1 to
//! [`MAX_ID_LEN`] characters, no control characters, no leading or trailing whitespace. Ids are
//! used in file paths by the worker (evidence), so `/`, `\` and `..` are refused as well. Ids are
//! also shown to the operator, so invisible characters are refused too ([`is_invisible`]): an id
//! with a zero-width space or a right-to-left override would look like another one on the
//! console (D-id-rules).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

/// Longest accepted id, in characters.
pub const MAX_ID_LEN: usize = 128;

/// Fixed path segments that sit where an id may stand, in any service of this workspace
/// (order-gateway, card-polling), plus the dot segments clients normalise away. No id equals one.
pub const ROUTE_WORDS: &[&str] = &[
    "lease",
    "renew",
    "report",
    "reclaim",
    "result",
    "activate",
    "polling",
    "stop-lock",
    "reported-slot",
    "close",
    "retrigger",
    ".",
];

/// Why an id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// Empty string.
    #[error("{0} must not be empty")]
    Empty(&'static str),
    /// Longer than [`MAX_ID_LEN`] characters.
    #[error("{0} is longer than 128 characters")]
    TooLong(&'static str),
    /// Contains a control or invisible character, whitespace at an end, a path separator or `..`.
    #[error(
        "{0} contains a forbidden character (control, invisible, path separator, '..', edge whitespace)"
    )]
    BadChar(&'static str),
    /// Equal to a route word or a dot segment ([`ROUTE_WORDS`]).
    #[error("{0} must not be a route word ({words}) or `.`", words = ROUTE_WORDS[..ROUTE_WORDS.len() - 1].join(", "))]
    RouteWord(&'static str),
}

/// Checks an id and returns it unchanged. `what` names the field in the error.
///
/// # Errors
/// [`IdError`] describing the first rule broken.
pub fn parse_id(what: &'static str, s: &str) -> Result<String, IdError> {
    if s.is_empty() {
        return Err(IdError::Empty(what));
    }
    if s.chars().count() > MAX_ID_LEN {
        return Err(IdError::TooLong(what));
    }
    if s.chars()
        .any(|c| c.is_control() || is_invisible(c) || c == '/' || c == '\\')
        || s.contains("..")
        || s.trim() != s
    {
        return Err(IdError::BadChar(what));
    }
    if ROUTE_WORDS.contains(&s) {
        return Err(IdError::RouteWord(what));
    }
    Ok(s.to_owned())
}

/// Characters that change how text around them is shown without being seen themselves: Unicode
/// format characters (`Cf`: zero-width space and joiners, bidirectional overrides and isolates, the
/// byte order mark, soft hyphen, tag characters), the line and paragraph separators (`Zl`, `Zp`),
/// the rest of Unicode's default-ignorable code points (the Hangul fillers U+115F, U+1160, U+3164,
/// U+FFA0, the combining grapheme joiner U+034F, U+17B4–U+17B5, the variation selectors and the
/// Mongolian free variation selectors) and the braille blank U+2800, which draws as a space but is
/// not whitespace (each of these alone would pass as a reason or an id).
pub fn is_invisible(c: char) -> bool {
    use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
    matches!(
        c.general_category(),
        GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
    ) || matches!(
        c,
        '\u{034f}'
            | '\u{115f}'..='\u{1160}'
            | '\u{17b4}'..='\u{17b5}'
            | '\u{180b}'..='\u{180f}'
            | '\u{2800}'
            | '\u{3164}'
            | '\u{fe00}'..='\u{fe0f}'
            | '\u{ffa0}'
            | '\u{fff0}'..='\u{fff8}'
            | '\u{e0000}'..='\u{e0fff}'
    )
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Parses and checks an id (see the module docs for the rules).
            ///
            /// # Errors
            /// [`IdError`] when a rule is broken.
            pub fn parse(s: &str) -> Result<Self, IdError> {
                parse_id($what, s).map($name)
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The id as an owned string.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                $name::parse(&s).map_err(serde::de::Error::custom)
            }
        }

    };
}

id_type!(
    /// An order task id: the upstream's idempotency key (§4.2) or a server-generated UUIDv7.
    TaskId,
    "task_id"
);
id_type!(
    /// An account query id (§11.2), idempotency key like [`TaskId`].
    QueryId,
    "query_id"
);
id_type!(
    /// A worker's id (§4.3), by default the worker host's name.
    WorkerId,
    "worker_id"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_bad_ids() {
        assert!(TaskId::parse("po-20260727-0001").is_ok());
        assert!(TaskId::parse("注文-1").is_ok());
        assert_eq!(TaskId::parse(""), Err(IdError::Empty("task_id")));
        assert_eq!(
            TaskId::parse(&"x".repeat(129)),
            Err(IdError::TooLong("task_id"))
        );
        assert!(TaskId::parse(&"é".repeat(128)).is_ok());
        for bad in [
            "a\nb",
            "a\u{0}",
            "../etc",
            "a/b",
            "a\\b",
            " a",
            "a ",
            // Invisible: zero-width space and joiner, right-to-left override, isolate, BOM,
            // soft hyphen, line separator, a tag character.
            "a\u{200B}b",
            "a\u{200D}b",
            "po-\u{202E}1000",
            "a\u{2066}b",
            "\u{FEFF}a",
            "a\u{AD}b",
            "a\u{2028}b",
            "a\u{E0041}",
        ] {
            assert_eq!(
                TaskId::parse(bad),
                Err(IdError::BadChar("task_id")),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn an_id_equal_to_a_route_word_is_refused_in_every_id_space() {
        for word in ["lease", "result", "renew", "close", "."] {
            assert_eq!(TaskId::parse(word), Err(IdError::RouteWord("task_id")));
            assert_eq!(QueryId::parse(word), Err(IdError::RouteWord("query_id")));
            assert_eq!(WorkerId::parse(word), Err(IdError::RouteWord("worker_id")));
        }
        // Only the exact word: case and neighbours are ordinary ids.
        for ok in ["Lease", "lease-1", "leases", ".x"] {
            assert!(TaskId::parse(ok).is_ok(), "{ok}");
        }
    }
}
