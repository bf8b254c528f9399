//! Extractors whose rejections are envelope errors (422 for bad JSON, query or path; 413 for an
//! oversized body; 415 for a compressed one or one not sent as JSON), never axum's plain-text answers. JSON bodies are
//! strict: a key repeated in one object, at any depth, is a 422 (`rakuten_edge::json`).

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// JSON body (`Content-Type: application/json` or `application/*+json`), strict about
/// duplicate keys, uncompressed: read by `rakuten_edge::body::json_bytes`, the order and words
/// the gateway shares (a coding or another media type is a 415, code 7007; a body over the
/// route's limit a 413 stating it in bytes; D-body-coding-type-and-size).
#[derive(Debug)]
pub struct Json<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Json<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = rakuten_edge::body::json_bytes(req, state)
            .await
            .map_err(ApiError::from_body)?;
        rakuten_edge::json::body_from_slice(&bytes)
            .map(Json)
            .map_err(|e| ApiError::invalid(bounded(&e)))
    }
}

/// Query string.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct Query<T>(pub T);

/// Path parameters.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct Path<T>(pub T);

impl From<QueryRejection> for ApiError {
    /// Names the parameter and what it takes, not serde's wording (D-query-refusal-wording).
    fn from(r: QueryRejection) -> Self {
        ApiError::invalid(rakuten_edge::query_guard::rejection_message(&r.body_text()))
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        ApiError::invalid(bounded(&r.body_text()))
    }
}

fn bounded(s: &str) -> String {
    s.chars().take(300).collect()
}
