//! Bearer authentication: the token's SHA-256 is compared in constant time with the bootstrap
//! admin token, else looked up among the accounts (a revoked account's is not found). Tokens are
//! never logged.
//!
//! [`Auth`] is the authenticated account; [`Allowed`] is an account the route's [`rule`] allows,
//! checked by [`crate::domain::access::authorize`] (the rule the console asks too) before the
//! handler reads its path, query or body, so an account that may not call a route gets its 403
//! whatever it sent.

use std::marker::PhantomData;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::error::ApiError;
use crate::domain::{Account, Action, Scope, authorize};
use crate::state::AppState;

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
        match state.account_of_token(token).await {
            Ok(Some(a)) => Ok(Auth(a)),
            Ok(None) => Err(ApiError::unauthorized()),
            Err(e) => Err(ApiError::from_store(e, Some("account"))),
        }
    }
}

/// A route's rule: the [`Action`] it does ([`Allowed`]).
pub trait Rule: Send + Sync + 'static {
    /// What the route does.
    const ACTION: Action;
}

/// The rules of the routes, one type per [`Action`].
pub mod rule {
    use super::{Action, Rule};

    macro_rules! rules {
        ($($(#[$doc:meta])* $name:ident),* $(,)?) => {$(
            $(#[$doc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $name;
            impl Rule for $name {
                const ACTION: Action = Action::$name;
            }
        )*};
    }

    rules!(
        /// [`Action::ReadItems`].
        ReadItems,
        /// [`Action::Enqueue`].
        Enqueue,
        /// [`Action::Close`].
        Close,
        /// [`Action::ReadQueues`].
        ReadQueues,
        /// [`Action::Administer`].
        Administer,
        /// [`Action::ManageAccounts`].
        ManageAccounts,
        /// [`Action::ReadConfig`].
        ReadConfig,
    );
}

/// An account that rule `R` allows, with the scope it acts in: 401 without a valid token, 403
/// when the account may not (before anything else of the request is read).
#[derive(Debug, Clone)]
pub struct Allowed<R> {
    /// The account.
    pub account: Account,
    /// The rows it may see or change.
    pub scope: Scope,
    rule: PhantomData<R>,
}

impl<R: Rule> FromRequestParts<AppState> for Allowed<R> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Auth(account) = Auth::from_request_parts(parts, state).await?;
        let scope = authorize(&account, R::ACTION).map_err(|_| ApiError::forbidden())?;
        Ok(Allowed {
            account,
            scope,
            rule: PhantomData,
        })
    }
}
