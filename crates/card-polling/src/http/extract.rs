//! Extractors whose rejections are envelope errors (422 for bad JSON, query or path; 413 for an
//! oversized body; 415 for a compressed one), never axum's plain-text answers. JSON bodies are
//! strict: a key repeated in one object, at any depth, is a 422 (issue #12; `rakuten_edge::json`).

use axum::body::Bytes;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;

use rakuten_types::ErrorCode;

use super::error::ApiError;

/// JSON body (`Content-Type: application/json` or `application/*+json`), strict about
/// duplicate keys, uncompressed (any `Content-Encoding` but `identity` is a 415 before the body
/// is read).
#[derive(Debug)]
pub struct Json<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Json<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        if let Some(coding) = content_coding(req.headers()) {
            return Err(ApiError::unsupported_encoding(&coding));
        }
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
        rakuten_edge::json::body_from_slice(&bytes)
            .map(Json)
            .map_err(|e| ApiError::invalid(bounded(&e)))
    }
}

/// The first content coding of the body other than `identity`, over every `Content-Encoding`
/// line and comma list (D-newuser8-4); a value that is not text counts as one.
fn content_coding(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::CONTENT_ENCODING)
        .iter()
        .flat_map(|v| match v.to_str() {
            Ok(text) => text.split(',').map(|c| c.trim().to_owned()).collect(),
            Err(_) => vec!["(not text)".to_owned()],
        })
        .find(|c| !c.is_empty() && !c.eq_ignore_ascii_case("identity"))
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
    /// Names the parameter and what it takes, not serde's wording (D-newuser11-4).
    fn from(r: QueryRejection) -> Self {
        ApiError::invalid(rakuten_edge::query_guard::rejection_message(&r.body_text()))
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        ApiError::invalid(bounded(&r.body_text()))
    }
}

/// An id written canonically in a path: ASCII digits only, no sign, no leading zero, within
/// 1..=`i64::MAX` (D-newuser8-3: `+1`, `01` and ` 1` are not `1`); `None` otherwise.
pub fn canonical_id(s: &str) -> Option<i64> {
    let digits = s.as_bytes();
    if digits.first().is_none_or(|d| *d == b'0') || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.parse().ok()
}

fn bounded(s: &str) -> String {
    s.chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::canonical_id;

    #[test]
    fn only_canonical_decimal_ids_parse() {
        assert_eq!(canonical_id("1"), Some(1));
        assert_eq!(canonical_id("42"), Some(42));
        assert_eq!(canonical_id("9223372036854775807"), Some(i64::MAX));
        for bad in [
            "",
            "0",
            "00",
            "01",
            "+1",
            "-1",
            " 1",
            "1 ",
            "1.0",
            "1e3",
            "0x1",
            "١",
            "9223372036854775808",
        ] {
            assert_eq!(canonical_id(bad), None, "{bad:?}");
        }
    }
}
