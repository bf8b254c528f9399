//! Bearer authentication: the token's SHA-256 is compared in constant time with the bootstrap
//! admin token, else looked up among the accounts. Tokens are never logged.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::AppState;
use super::error::ApiError;
use crate::domain::{Account, Role, TokenHash};

/// Longest accepted Authorization header value, bytes.
const MAX_AUTH_HEADER: usize = 300;

/// The authenticated account of a request.
#[derive(Debug, Clone)]
pub struct Auth(pub Account);

impl FromRequestParts<AppState> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let mut headers = parts
            .headers
            .get_all(axum::http::header::AUTHORIZATION)
            .iter();
        let header = headers.next().ok_or_else(ApiError::unauthorized)?;
        if headers.next().is_some() {
            // Two credentials: which one a proxy or log reader takes differs, so neither counts.
            return Err(ApiError::unauthorized());
        }
        if header.len() > MAX_AUTH_HEADER {
            return Err(ApiError::unauthorized());
        }
        let token = header
            .to_str()
            .ok()
            .and_then(|h| h.trim_start().split_once(' '))
            // The scheme is case-insensitive (RFC 9110 §11.1).
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .filter(|t| !t.is_empty())
            .ok_or_else(ApiError::unauthorized)?;
        match account_of_token(state, token).await {
            Ok(Some(a)) => Ok(Auth(a)),
            Ok(None) => Err(ApiError::unauthorized()),
            Err(e) => Err(ApiError::from_store(e, Some("account"))),
        }
    }
}

/// The account a token belongs to: the bootstrap admin (`admin`, super_admin), else the account
/// with that token hash. The console's sign-in uses it too.
///
/// # Errors
/// The store failed.
pub async fn account_of_token(
    state: &AppState,
    token: &str,
) -> Result<Option<Account>, crate::store::StoreError> {
    let hash = TokenHash::of(token);
    if state.admin_token_hash.ct_eq(&hash.0) {
        return Ok(Some(Account {
            id: "admin".into(),
            role: Role::SuperAdmin,
            shop_id: None,
            perm_manual_trigger: true,
            perm_card_data: true,
        }));
    }
    state.store.account_find_by_token(&hash).await
}

impl Auth {
    /// Refuses accounts that may not administer the host domain.
    ///
    /// # Errors
    /// 403.
    pub fn require_admin(&self) -> Result<&Account, ApiError> {
        if self.0.may_administer() {
            Ok(&self.0)
        } else {
            Err(ApiError::forbidden())
        }
    }
}
