//! Shops and the agent hierarchy: a shop has at most one parent; an agent account bound to a
//! shop sees that shop and every descendant (stored as a closure table, see the migration).

use rakuten_types::ids::is_invisible;
use rakuten_types::schema::char_class;
use rakuten_types::text::is_bidi_control;
use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::{Object, ObjectBuilder, Type};

/// Longest shop name, characters.
pub const MAX_SHOP_NAME_CHARS: usize = 200;

/// One shop as imported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Shop {
    /// Shop id.
    #[schema(schema_with = crate::domain::key::key_schema)]
    pub id: String,
    /// Parent shop id; `None` for a top-level shop.
    #[serde(default)]
    #[schema(schema_with = crate::domain::key::key_or_null_schema)]
    pub parent_id: Option<String>,
    /// Display name (an absent one is refused as blank).
    #[serde(default)]
    #[schema(schema_with = name_schema, required = true)]
    pub name: String,
}

/// The schema of a shop's display name: something visible (not only whitespace or invisible
/// characters), no control or bidirectional control character, at most [`MAX_SHOP_NAME_CHARS`]
/// characters (the import's check).
pub fn name_schema() -> Object {
    let blank = char_class(false, |c| c.is_whitespace() || is_invisible(c));
    let allowed = char_class(true, |c| c.is_control() || is_bidi_control(c));
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(
            "1 to 200 characters with something visible; no control or bidirectional control \
             character.",
        ))
        .min_length(Some(1))
        .max_length(Some(MAX_SHOP_NAME_CHARS))
        .pattern(Some(format!("^(?!{blank}*$){allowed}*$")))
        .build()
}
