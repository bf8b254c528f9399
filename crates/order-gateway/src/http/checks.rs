//! Checks of request fields that several route groups share: an operator's `reason` (the
//! operator routes and the order reclaim), the `site` and the long-poll `wait` (the order and the
//! account-query channels).

use std::time::Duration;

use rakuten_types::SITE_RAKUTEN;
use rakuten_types::text::MAX_REASON_CHARS;

use super::error::ApiError;

/// Default long-poll, seconds (§4.3).
pub const DEFAULT_WAIT_SECONDS: f64 = 30.0;

/// A required operator `reason`: 1–1000 characters, not blank or invisible only, no control
/// characters except line breaks and tabs, no bidirectional controls ([`rakuten_types::text::reason`],
/// the console's rule too).
pub(crate) fn check_reason(reason: &str) -> Result<String, ApiError> {
    rakuten_types::text::reason(reason, MAX_REASON_CHARS).map_err(ApiError::Validation)
}

/// Checks the query of both lease long-polls (orders §4.3, account queries §11.2): `wait` in
/// seconds (default [`DEFAULT_WAIT_SECONDS`], finite and non-negative, else 422), clamped to
/// `max_wait_seconds`; then `site`, when given, via [`check_site`].
pub(crate) fn lease_wait_and_site(
    wait: Option<f64>,
    site: Option<&str>,
    max_wait_seconds: f64,
) -> Result<Duration, ApiError> {
    let wait = wait.unwrap_or(DEFAULT_WAIT_SECONDS);
    if !wait.is_finite() || wait < 0.0 {
        return Err(ApiError::Validation(
            "wait must be a finite, non-negative number of seconds".into(),
        ));
    }
    // Clamp before converting: `Duration::from_secs_f64` panics on huge values.
    let wait = Duration::from_secs_f64(wait.min(max_wait_seconds));
    if let Some(site) = site {
        check_site(site)?;
    }
    Ok(wait)
}

pub(crate) fn check_site(site: &str) -> Result<(), ApiError> {
    if site == SITE_RAKUTEN {
        Ok(())
    } else {
        Err(ApiError::Validation(format!(
            "unknown site {:?}; only \"rakuten\" is traded",
            site.chars().take(64).collect::<String>()
        )))
    }
}
