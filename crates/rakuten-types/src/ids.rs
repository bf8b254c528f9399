//! Parsed identifiers. Every id that arrives from a request passes through [`parse_id`]: 1 to
//! [`MAX_ID_LEN`] characters, no control characters, no leading or trailing whitespace. Ids are
//! used in file paths by the worker (evidence), so `/`, `\` and `..` are refused as well.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

/// Longest accepted id, in characters.
pub const MAX_ID_LEN: usize = 128;

/// Why an id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// Empty string.
    #[error("{0} must not be empty")]
    Empty(&'static str),
    /// Longer than [`MAX_ID_LEN`] characters.
    #[error("{0} is longer than 128 characters")]
    TooLong(&'static str),
    /// Contains a control character, whitespace at an end, a path separator or `..`.
    #[error("{0} contains a forbidden character (control, path separator, '..', edge whitespace)")]
    BadChar(&'static str),
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
    if s.chars().any(|c| c.is_control() || c == '/' || c == '\\')
        || s.contains("..")
        || s.trim() != s
    {
        return Err(IdError::BadChar(what));
    }
    Ok(s.to_owned())
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

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .min_length(Some(1))
                    .max_length(Some(MAX_ID_LEN))
                    .into()
            }
        }

        impl utoipa::ToSchema for $name {}
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
        for bad in ["a\nb", "a\u{0}", "../etc", "a/b", "a\\b", " a", "a "] {
            assert_eq!(
                TaskId::parse(bad),
                Err(IdError::BadChar("task_id")),
                "{bad:?}"
            );
        }
    }
}
