//! One file per resource.

pub mod admin;
pub mod assets;
pub mod health;
pub mod items;
pub mod manual_triggers;
pub mod orders;
pub mod scheduler;

use super::error::ApiError;

/// Checks a request identifier (bounded, no control characters or path separators).
pub(crate) fn key(what: &'static str, s: &str) -> Result<String, ApiError> {
    crate::domain::parse_key(what, s).map_err(|e| ApiError::invalid(e.to_string()))
}
