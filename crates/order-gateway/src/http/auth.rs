//! Bearer authentication and role checks (§8).
//!
//! Two layers:
//! - [`require_bearer`], on every `/api/*` route: `Authorization: Bearer <token>` (scheme matched
//!   case-insensitively, RFC 9110 §11.1) must be a configured token ([`crate::roles`]), else 401
//!   (1001). The [`Actor`] is put into the request for handlers (`actor: Actor`).
//! - [`guarded`], which builds each router from one table of `(path, method router, roles)`:
//!   a caller whose role is not listed gets 403 (1002). Operators pass every check, so an
//!   operator-only route is one line with [`OPERATOR_ONLY`].
//!
//! - [`act_as_worker`], in every handler that names a `worker_id`: a worker-role token acts only
//!   for the worker ids bound to it (D-worker-id-bound-to-token), else 403 (1002).
//!
//! Tokens are never logged: they are read here and compared as digests only.

use axum::Router;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;
use axum::routing::MethodRouter;

use super::AppState;
use super::error::ApiError;
pub use crate::roles::{Actor, Role};

/// Roles allowed on a route besides operators (who may call every route).
pub type Allowed = &'static [Role];

/// An operator-only route.
pub const OPERATOR_ONLY: Allowed = &[];

/// One line of a router's access table: path, the handler(s) for it, who besides operators may
/// call it.
pub type Guarded = (&'static str, MethodRouter<AppState>, Allowed);

/// Builds a router from its access table; each route refuses other roles with 403 (1002). One
/// path may appear on several lines (one per method), each with its own roles.
pub fn guarded(table: Vec<Guarded>) -> Router<AppState> {
    table
        .into_iter()
        .fold(Router::new(), |router, (path, method_router, allowed)| {
            router.route(
                path,
                method_router.route_layer(from_fn_with_state(allowed, require_role)),
            )
        })
}

/// The token of an `Authorization: Bearer <token>` header; the scheme is case-insensitive.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let value = values.next()?.to_str().ok()?;
    if values.next().is_some() {
        // Two credentials: which one a proxy or log reader takes differs, so neither counts.
        return None;
    }
    let (scheme, token) = value.trim_start().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
        .filter(|t| !t.is_empty())
}

/// The actor a request's Bearer token names: `Ok(None)` without an `Authorization` header.
///
/// # Errors
/// [`ApiError::Unauthorized`] for a header that is not a configured Bearer token.
pub fn actor_of(state: &AppState, headers: &HeaderMap) -> Result<Option<Actor>, ApiError> {
    if !headers.contains_key(AUTHORIZATION) {
        return Ok(None);
    }
    bearer_token(headers)
        .and_then(|t| state.credentials.identify(t))
        .map(Some)
        .ok_or(ApiError::Unauthorized)
}

/// Middleware refusing requests without a configured token (401, 1001); passes the [`Actor`] on.
///
/// # Errors
/// [`ApiError::Unauthorized`].
pub async fn require_bearer(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let actor = actor_of(&state, req.headers())?.ok_or(ApiError::Unauthorized)?;
    req.extensions_mut().insert(actor);
    Ok(next.run(req).await)
}

/// Refuses a worker-role `actor` acting for `worker_id` when the id is bound to another worker
/// token; binds an unbound id to the actor's token name first (D-worker-id-bound-to-token).
/// Operators act for any worker id and bind nothing (the demo and single-token setups). Called
/// before the handler changes anything, so a refused call changes nothing.
///
/// # Errors
/// [`ApiError::NotYourWorker`] (403, 1002); a store failure.
pub async fn act_as_worker(
    state: &AppState,
    actor: &Actor,
    worker_id: &rakuten_types::WorkerId,
) -> Result<(), ApiError> {
    if actor.role != Role::Worker {
        return Ok(());
    }
    let bound = state
        .ops
        .worker_bind(worker_id, &actor.name, state.clock.now())
        .await?;
    if bound == actor.name {
        Ok(())
    } else {
        Err(ApiError::NotYourWorker(worker_id.to_string()))
    }
}

/// Whether a worker-role `actor` may see `worker_id`'s things: the id is bound to its token.
///
/// # Errors
/// A store failure.
pub async fn worker_is_bound_to(
    state: &AppState,
    actor: &Actor,
    worker_id: &str,
) -> Result<bool, ApiError> {
    Ok(state.ops.worker_binding(worker_id).await?.as_deref() == Some(actor.name.as_str()))
}

/// Route layer of [`guarded`]: 403 (1002) unless the actor is an operator or its role is allowed.
async fn require_role(
    State(allowed): State<Allowed>,
    actor: Actor,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    if actor.role == Role::Operator || allowed.contains(&actor.role) {
        Ok(next.run(req).await)
    } else {
        Err(ApiError::Forbidden(actor.role))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Actor {
    type Rejection = ApiError;

    /// The actor [`require_bearer`] found; 401 on a route without it.
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Actor>()
            .cloned()
            .ok_or(ApiError::Unauthorized)
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn the_bearer_scheme_is_matched_case_insensitively() {
        let mut h = HeaderMap::new();
        for (value, want) in [
            ("Bearer abc", Some("abc")),
            ("bearer abc", Some("abc")),
            ("BEARER  abc ", Some("abc")),
            ("Basic abc", None),
            ("Bearer", None),
            ("Bearer ", None),
            ("Bearerabc", None),
        ] {
            h.insert(AUTHORIZATION, HeaderValue::from_static(value));
            assert_eq!(bearer_token(&h), want, "{value:?}");
        }
    }

    /// With two `Authorization` headers the first one won.
    #[test]
    fn two_authorization_headers_are_no_token() {
        let mut h = HeaderMap::new();
        h.append(AUTHORIZATION, HeaderValue::from_static("Bearer good"));
        h.append(AUTHORIZATION, HeaderValue::from_static("Bearer other"));
        assert_eq!(bearer_token(&h), None);
    }
}
