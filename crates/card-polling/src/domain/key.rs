//! Keys: the ids a request names (ICCID, device number, shop, account, order, usage, payment or
//! event id), checked by [`parse_key`], and the same rule as an OpenAPI schema for the types that
//! carry keys (D-id-rules, D-openapi-states-server-rules).

use rakuten_types::ids::{IdError, MAX_ID_LEN, parse_id};
use rakuten_types::schema::{id, id_pattern};
use utoipa::openapi::schema::{Object, ObjectBuilder, SchemaType, Type};

/// Checks an identifier from a request (1–128 characters, no control characters, no path
/// separators, see [`rakuten_types::ids`]).
///
/// # Errors
/// [`IdError`] naming `what`.
pub fn parse_key(what: &'static str, s: &str) -> Result<String, IdError> {
    parse_id(what, s)
}

/// The schema of a key: [`parse_key`]'s rules.
pub fn key_schema() -> Object {
    id()
}

/// The schema of an optional key: [`key_schema`], or `null`, which the server reads as absent.
pub fn key_or_null_schema() -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .min_length(Some(1))
        .max_length(Some(MAX_ID_LEN))
        .pattern(Some(id_pattern()))
        .build()
}
