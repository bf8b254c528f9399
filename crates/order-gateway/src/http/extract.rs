//! Extractors whose rejections are [`ApiError`]s, so malformed JSON, bad query strings and bad
//! path segments get the envelope with a clear `msg` (422; 413 for an oversized body, 415 for a
//! compressed one or one not sent as JSON), never axum's plain-text answers. JSON bodies are
//! strict: a duplicate key anywhere is a 422.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// Longest error message echoed back, in characters (serde messages may quote input).
const MAX_MSG_CHARS: usize = 300;

fn short(msg: String) -> String {
    if msg.chars().count() <= MAX_MSG_CHARS {
        msg
    } else {
        let mut s: String = msg.chars().take(MAX_MSG_CHARS).collect();
        s.push('…');
        s
    }
}

/// The body through the checks both services share (`rakuten_edge::body`): a content coding
/// or a body not sent as JSON is a 415 (1007), a body over the route's limit a 413 stating the
/// limit in bytes (D-body-coding-type-and-size). An empty body comes back for the caller.
async fn body_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    Ok(rakuten_edge::body::json_bytes(req, state).await?)
}

/// Strict: a key repeated in one object, at any depth, is a 422 (two parsers must
/// not read two different spending limits from one body).
/// Every body of this API is an object; serde would otherwise read `[]` as a struct written as a
/// sequence and answer "invalid length 0, expected struct SubmitOrder with 3 elements".
fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    rakuten_edge::json::body_from_slice(bytes).map_err(|e| ApiError::Validation(short(e)))
}

/// A JSON body, required, sent as `application/json` (D-body-coding-type-and-size: before, any
/// `Content-Type` was read as JSON, `text/plain` and a gzip body included).
#[derive(Debug, Clone)]
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = body_bytes(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(ApiError::Validation("a JSON body is required".into()));
        }
        parse_json(&bytes).map(ApiJson)
    }
}

/// A query string.
#[derive(Debug, Clone)]
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(v)| ApiQuery(v))
            // The parameter and what it takes, not serde's wording (D-query-refusal-wording).
            .map_err(|e| {
                ApiError::Validation(rakuten_edge::query_guard::rejection_message(&e.body_text()))
            })
    }
}

/// Path parameters.
#[derive(Debug, Clone)]
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(v)| ApiPath(v))
            .map_err(|e| ApiError::Validation(short(e.body_text())))
    }
}
