//! Extractors whose rejections are envelope errors (422 for bad JSON, query or path; 413 for an
//! oversized body), never axum's plain-text answers. JSON bodies are strict: a key repeated in
//! one object, at any depth, is a 422 (issue #12; `rakuten_edge::json`).

use axum::body::Bytes;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;

use rakuten_types::ErrorCode;

use super::error::ApiError;

/// JSON body (`Content-Type: application/json` or `application/*+json`), strict about
/// duplicate keys.
#[derive(Debug)]
pub struct Json<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Json<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        if !is_json(req.headers()) {
            return Err(ApiError::invalid(
                "Expected request with `Content-Type: application/json`",
            ));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|r| {
            if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::generic(ErrorCode::PayloadTooLarge, "request body too large")
            } else {
                ApiError::invalid(bounded(&r.body_text()))
            }
        })?;
        rakuten_edge::json::from_slice(&bytes)
            .map(Json)
            .map_err(|e| ApiError::invalid(bounded(&format!("invalid JSON body: {e}"))))
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let mime = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
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
    fn from(r: QueryRejection) -> Self {
        ApiError::invalid(bounded(&r.body_text()))
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
