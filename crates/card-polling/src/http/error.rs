//! The one HTTP error type: a status, a stable code and a safe message, sent in the envelope.
//! Internal errors are logged with their cause and answered opaquely.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use rakuten_types::{Envelope, ErrorCode};

use crate::priority::manual::ManualError;
use crate::store::StoreError;

/// Codes specific to card polling (D-poll-error-codes); generic ones come from [`ErrorCode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollCode {
    /// 7001: priority item not found — also the answer for an item outside the caller's scope.
    ItemNotFound,
    /// 7002: the item's status does not allow this (close a terminal item, retrigger an active one).
    ItemStateConflict,
    /// 7003: the claim on the item is no longer held (late finisher after a takeover).
    ClaimLost,
    /// 7004: the operator's daily ordinary manual trigger quota is used up (429).
    ManualQuotaExceeded,
    /// 7005: the card was already manually triggered for that task type within 24 h (409).
    ManualDuplicate,
    /// 7006: the card or device a request names does not exist, or (manual enqueue, manual
    /// trigger) is outside the caller's scope (404) — distinct from 1005, which also answers
    /// unknown routes (D-poll-error-codes).
    AssetNotFound,
    /// 7007: the request body is in a form the service does not read (415): a `Content-Encoding`
    /// other than `identity` (gzip, br, deflate…), or a body not sent as `application/json`
    /// (D-body-coding-type-and-size); the answer carries `Accept-Encoding: identity`.
    UnsupportedMediaType,
}

impl PollCode {
    /// Wire number.
    pub const fn as_i32(self) -> i32 {
        match self {
            PollCode::ItemNotFound => 7001,
            PollCode::ItemStateConflict => 7002,
            PollCode::ClaimLost => 7003,
            PollCode::ManualQuotaExceeded => 7004,
            PollCode::ManualDuplicate => 7005,
            PollCode::AssetNotFound => 7006,
            PollCode::UnsupportedMediaType => 7007,
        }
    }
}

/// The `what` of [`ApiError::from_store`] that name a card or a device: their 404 is code 7006
/// (D-poll-error-codes). A binding is not one of them: it is the relation between a card and a device,
/// and an unknown card or device in `PUT /api/bindings` is [`StoreError::UnknownAsset`] (404, 7006).
pub const ASSETS: [&str; 3] = ["card", "device", "asset"];

/// An error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Envelope code.
    pub code: i32,
    /// Safe message.
    pub msg: String,
    /// Seconds for `Retry-After`, on an answer that is not a 503 (every 503 carries 1): the
    /// quota 429 says when the quota resets (D-ordinary-manual-trigger).
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// From a generic code.
    pub fn generic(code: ErrorCode, msg: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::from_u16(code.http_status())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            code: code.as_i32(),
            msg: msg.into(),
            retry_after: None,
        }
    }

    /// 401.
    pub fn unauthorized() -> Self {
        Self::generic(ErrorCode::Unauthorized, "missing or invalid Bearer token")
    }

    /// 403.
    pub fn forbidden() -> Self {
        Self::generic(ErrorCode::Forbidden, "this account may not do this")
    }

    /// 422.
    pub fn invalid(msg: impl Into<String>) -> Self {
        Self::generic(ErrorCode::Validation, msg)
    }

    /// 404 for a generic resource.
    pub fn not_found(what: &str) -> Self {
        Self::generic(ErrorCode::NotFound, format!("{what} not found"))
    }

    /// 404 for a priority item: the same bytes whether missing or out of scope.
    pub fn item_not_found() -> Self {
        ApiError {
            status: StatusCode::NOT_FOUND,
            code: PollCode::ItemNotFound.as_i32(),
            msg: "priority item not found".into(),
            retry_after: None,
        }
    }

    /// 404 (code 7006) for an unknown or out-of-scope card or device; `what` is `asset`, `card`
    /// or `device` (one of [`ASSETS`]), the same bytes whether missing or out of scope.
    pub fn asset_not_found(what: &str) -> Self {
        Self::poll(
            StatusCode::NOT_FOUND,
            PollCode::AssetNotFound,
            format!("{what} not found"),
        )
    }

    /// A body refused by `rakuten_edge::body` (shared with the gateway): 415 with code 7007 for
    /// a content coding (D-body-coding-type-and-size) or a body not sent as JSON (D-body-coding-type-and-size), 413 (1004)
    /// stating the route's limit in bytes, 422 for a body that could not be read.
    pub fn from_body(r: rakuten_edge::body::BodyRefusal) -> Self {
        let msg = r.message();
        match r.status() {
            StatusCode::UNSUPPORTED_MEDIA_TYPE => {
                Self::poll(r.status(), PollCode::UnsupportedMediaType, msg)
            }
            StatusCode::PAYLOAD_TOO_LARGE => Self::generic(ErrorCode::PayloadTooLarge, msg),
            _ => Self::invalid(msg),
        }
    }

    /// Adds `Retry-After: seconds` to this answer.
    pub fn with_retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// 409 for an item state conflict.
    pub fn item_conflict(msg: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::CONFLICT,
            code: PollCode::ItemStateConflict.as_i32(),
            msg: msg.into(),
            retry_after: None,
        }
    }

    /// A card-polling specific error.
    pub fn poll(status: StatusCode, code: PollCode, msg: impl Into<String>) -> Self {
        ApiError {
            status,
            code: code.as_i32(),
            msg: msg.into(),
            retry_after: None,
        }
    }

    /// 500, opaque.
    pub fn internal(cause: &dyn std::error::Error) -> Self {
        let mut chain = cause.to_string();
        let mut src = cause.source();
        while let Some(s) = src {
            chain.push_str(": ");
            chain.push_str(&s.to_string());
            src = s.source();
        }
        tracing::error!(error = %chain, "internal error");
        Self::generic(ErrorCode::Internal, "internal error")
    }

    /// Maps a store error about a resource named `what` (`None`: a priority item). A missing
    /// card, device or asset ([`ASSETS`]) is a 404 with code 7006 on every route (D-poll-error-codes);
    /// any other missing resource (order, usage record, row, binding…) keeps 1005.
    pub fn from_store(e: StoreError, what: Option<&str>) -> Self {
        match e {
            StoreError::NotFound => match what {
                None => Self::item_not_found(),
                Some(w) if ASSETS.contains(&w) => Self::asset_not_found(w),
                Some(w) => Self::not_found(w),
            },
            StoreError::Conflict(m) => match what {
                None => Self::item_conflict(m),
                Some(_) => Self::generic(ErrorCode::Conflict, m),
            },
            StoreError::ClaimLost => ApiError {
                status: StatusCode::CONFLICT,
                code: PollCode::ClaimLost.as_i32(),
                msg: e.to_string(),
                retry_after: None,
            },
            StoreError::Invalid(m) => Self::invalid(m),
            // What the request names does not exist: 404, the message naming it
            // (D-unknown-reference-is-404).
            StoreError::UnknownRef(m) => Self::generic(ErrorCode::NotFound, m),
            StoreError::UnknownAsset(m) => {
                Self::poll(StatusCode::NOT_FOUND, PollCode::AssetNotFound, m)
            }
            StoreError::Busy(ref db) => {
                tracing::warn!(error = %db, "database busy or unavailable: answering 503");
                Self::generic(
                    ErrorCode::Unavailable,
                    "the database is busy or unavailable; retry shortly",
                )
            }
            StoreError::Raced(what) => {
                tracing::warn!(%what, "a transition kept meeting concurrent changes: answering 503");
                Self::generic(
                    ErrorCode::Unavailable,
                    "the database is busy; retry shortly",
                )
            }
            StoreError::Closed => Self::generic(
                ErrorCode::Unavailable,
                "the service is shutting down; retry shortly",
            ),
            StoreError::Db(ref db) => Self::internal(&**db),
        }
    }
}

impl From<ManualError> for ApiError {
    fn from(e: ManualError) -> Self {
        match e {
            ManualError::Forbidden => Self::forbidden(),
            ManualError::Invalid(m) => Self::invalid(m),
            ManualError::Store(s) => Self::from_store(s, None),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body: Envelope<()> = Envelope {
            success: false,
            msg: self.msg,
            data: None,
            code: self.code,
        };
        let mut resp = (self.status, axum::Json(body)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            // Every 503 here means "not now" (busy database, shutting down): say when to retry.
            resp.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
        }
        if let Some(seconds) = self.retry_after {
            resp.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(seconds),
            );
        }
        if self.status == StatusCode::UNAUTHORIZED {
            // RFC 9110 §11.6.1: a 401 names the scheme it wants (D-metrics).
            resp.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        if self.status == StatusCode::UNSUPPORTED_MEDIA_TYPE {
            // The one coding a body may be in (RFC 9110 §15.5.16).
            resp.headers_mut().insert(
                axum::http::header::ACCEPT_ENCODING,
                axum::http::HeaderValue::from_static("identity"),
            );
        }
        resp
    }
}

/// Fallback for unknown routes.
pub async fn not_found_route() -> ApiError {
    ApiError::not_found("route")
}

/// A known path with a method it does not answer: 405 in the envelope (code 1005).
pub async fn method_not_allowed() -> ApiError {
    ApiError {
        status: StatusCode::METHOD_NOT_ALLOWED,
        code: ErrorCode::NotFound.as_i32(),
        msg: "method not allowed on this path".into(),
        retry_after: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// D-poll-error-codes: a missing card, device or asset is 7006 whichever route asks; any other
    /// missing resource keeps 1005, and a missing priority item 7001.
    #[test]
    fn a_missing_card_device_or_asset_is_code_7006_and_other_resources_keep_1005() {
        for what in ["card", "device", "asset"] {
            let e = ApiError::from_store(StoreError::NotFound, Some(what));
            assert_eq!(e, ApiError::asset_not_found(what));
            assert_eq!((e.status, e.code), (StatusCode::NOT_FOUND, 7006), "{what}");
            assert_eq!(e.msg, format!("{what} not found"));
        }
        for what in ["order", "usage record", "row", "binding", "account"] {
            let e = ApiError::from_store(StoreError::NotFound, Some(what));
            assert_eq!((e.status, e.code), (StatusCode::NOT_FOUND, 1005), "{what}");
        }
        assert_eq!(ApiError::from_store(StoreError::NotFound, None).code, 7001);
    }
}
