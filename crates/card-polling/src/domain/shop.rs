//! Shops and the agent hierarchy: a shop has at most one parent; an agent account bound to a
//! shop sees that shop and every descendant (stored as a closure table, see the migration).

use serde::{Deserialize, Serialize};

/// One shop as imported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Shop {
    /// Shop id.
    #[schema(schema_with = crate::http::schema::key)]
    pub id: String,
    /// Parent shop id; `None` for a top-level shop.
    #[serde(default)]
    #[schema(schema_with = crate::http::schema::key_or_null)]
    pub parent_id: Option<String>,
    /// Display name (an absent one is refused as blank).
    #[serde(default)]
    #[schema(schema_with = crate::http::schema::shop_name, required = true)]
    pub name: String,
}
