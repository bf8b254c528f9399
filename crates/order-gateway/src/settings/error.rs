//! [`SettingsError`]: the one refusal of a setting, naming its variable.

/// A setting out of range.
#[derive(Debug, thiserror::Error)]
#[error("invalid setting {name}: {reason}")]
pub struct SettingsError {
    /// The environment variable.
    pub name: &'static str,
    /// What is wrong.
    pub reason: String,
}
