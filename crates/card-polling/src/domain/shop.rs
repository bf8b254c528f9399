//! Shops and the agent hierarchy: a shop has at most one parent; an agent account bound to a
//! shop sees that shop and every descendant (stored as a closure table, see the migration).

use serde::{Deserialize, Serialize};

/// One shop as imported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shop {
    /// Shop id.
    pub id: String,
    /// Parent shop id; `None` for a top-level shop.
    #[serde(default)]
    pub parent_id: Option<String>,
    /// Display name.
    #[serde(default)]
    pub name: String,
}
