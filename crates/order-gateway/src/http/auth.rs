//! Bearer authentication of every `/api/*` route (§8): `Authorization: Bearer <RAKUTEN_API_TOKEN>`,
//! compared in constant time. The token is never logged.

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::Response;
use subtle::ConstantTimeEq;

use super::AppState;
use super::error::ApiError;

/// Middleware refusing requests without the right token (401, code 1001).
///
/// # Errors
/// [`ApiError::Unauthorized`].
pub async fn require_bearer(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let expected = state.settings.api_token.expose().as_bytes();
    let ok = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| bool::from(t.trim().as_bytes().ct_eq(expected)));
    if !ok {
        return Err(ApiError::Unauthorized);
    }
    Ok(next.run(req).await)
}
