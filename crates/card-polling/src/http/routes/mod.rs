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

/// Most task types named in one request.
pub const MAX_TASK_TYPES: usize = 32;

/// The `task_types` of a request: absent means every configured one (returned as an empty list,
/// which the domain reads that way); present, it must name 1–[`MAX_TASK_TYPES`] (D-item-ids-and-list-filters).
pub(crate) fn task_type_list(given: Option<Vec<String>>) -> Result<Vec<String>, ApiError> {
    match given {
        None => Ok(Vec::new()),
        Some(v) if v.is_empty() => Err(ApiError::invalid(
            "task_types must name at least one task type (omit it for every configured one)",
        )),
        Some(v) if v.len() > MAX_TASK_TYPES => Err(ApiError::invalid(format!(
            "at most {MAX_TASK_TYPES} task types"
        ))),
        Some(v) => Ok(v),
    }
}
