//! The one HTTP error type. [`ApiError::code`] is the single match from error to [`ErrorCode`]
//! (and with it the HTTP status, §8); [`IntoResponse`] renders the envelope. Internal errors are
//! logged with their cause chain and answered opaquely (code 1500).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rakuten_types::{Envelope, ErrorCode};

use crate::store::StoreError;

/// Result of a handler: an envelope or an [`ApiError`].
pub type ApiResult<T> = Result<Json<Envelope<T>>, ApiError>;

/// Every way a request can fail.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Missing or wrong Bearer token (401, 1001).
    #[error("missing or invalid bearer token")]
    Unauthorized,
    /// A valid token whose role may not call this route (403, 1002).
    #[error("the {0} role may not call this route")]
    Forbidden(crate::roles::Role),
    /// A worker token naming a worker id bound to another worker token (403, 1002;
    /// D-worker-id-bound-to-token).
    #[error(
        "worker_id {0} acts with another worker token; an operator's retire \
         (DELETE /api/workers/{{worker_id}}) frees it"
    )]
    NotYourWorker(String),
    /// Bad input: JSON, types, ranges, vocabularies (422, 1003).
    #[error("{0}")]
    Validation(String),
    /// A body or field over its size bound (413, 1004); the message states the bound in bytes.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// A body in a content coding, or not sent as `application/json` (415, 1007; D-body-coding-type-and-size,
    /// D-body-coding-type-and-size). The answer carries `Accept-Encoding: identity`.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// No such route (404, 1005).
    #[error("no route for {0}")]
    NotFound(String),
    /// The route exists but not for this method (405, 1005).
    #[error("method not allowed")]
    MethodNotAllowed,
    /// A storage outcome: not found, lease invalid, conflicts, or an internal failure.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Anything else that is our fault.
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

impl From<crate::query_queue::InputError> for ApiError {
    fn from(e: crate::query_queue::InputError) -> Self {
        match e {
            crate::query_queue::InputError::Invalid(m) => ApiError::Validation(m),
            crate::query_queue::InputError::TooLarge(m) => ApiError::PayloadTooLarge(m),
        }
    }
}

impl From<rakuten_edge::body::BodyRefusal> for ApiError {
    /// The shared body checks (`rakuten_edge::body`, the ones card-polling answers with 7007)
    /// in this service's codes: 415 is 1007, 413 is 1004, an unreadable body 1003.
    fn from(r: rakuten_edge::body::BodyRefusal) -> Self {
        let msg = r.message();
        match r.status() {
            StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::UnsupportedMediaType(msg),
            StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge(msg),
            _ => ApiError::Validation(msg),
        }
    }
}

impl ApiError {
    /// The error code (and through it the HTTP status) of this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            ApiError::Unauthorized => ErrorCode::Unauthorized,
            ApiError::Forbidden(_) | ApiError::NotYourWorker(_) => ErrorCode::Forbidden,
            ApiError::Validation(_) => ErrorCode::Validation,
            ApiError::PayloadTooLarge(_) => ErrorCode::PayloadTooLarge,
            ApiError::UnsupportedMediaType(_) => ErrorCode::UnsupportedMediaType,
            ApiError::NotFound(_) | ApiError::MethodNotAllowed => ErrorCode::NotFound,
            ApiError::Store(e) => match e {
                StoreError::TaskNotFound(_) => ErrorCode::TaskNotFound,
                StoreError::LeaseInvalid(_) => ErrorCode::LeaseInvalid,
                StoreError::StateConflict { .. } | StoreError::Transition(_) => {
                    ErrorCode::TaskStateConflict
                }
                StoreError::GateBusy(_)
                | StoreError::IdempotencyMismatch(_)
                | StoreError::WorkerRetired { .. } => ErrorCode::Conflict,
                StoreError::Closed | StoreError::Busy(_) | StoreError::Unavailable(_) => {
                    ErrorCode::Unavailable
                }
                StoreError::WorkerNotFound(_) => ErrorCode::NotFound,
                StoreError::Contradicts(_) | StoreError::DeadlinePassed { .. } => {
                    ErrorCode::Validation
                }
                StoreError::QueryNotFound(_) => ErrorCode::QueryNotFound,
                StoreError::QueryLeaseInvalid(_) => ErrorCode::QueryLeaseInvalid,
                StoreError::QueryTransition(_) => ErrorCode::QueryLeaseInvalid,
                StoreError::Corrupt(_) | StoreError::Database(_) => ErrorCode::Internal,
            },
            ApiError::Internal(_) => ErrorCode::Internal,
        }
    }

    /// The HTTP status sent.
    pub fn status_code(&self) -> StatusCode {
        if matches!(self, ApiError::MethodNotAllowed) {
            return StatusCode::METHOD_NOT_ALLOWED;
        }
        StatusCode::from_u16(self.code().http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

/// `Retry-After` of every 503 answer, seconds.
pub const RETRY_AFTER_SECONDS: &str = "1";

/// Writes an error and its sources on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = self.code();
        let msg = match code {
            ErrorCode::Internal => {
                tracing::error!(error = %chain(&self), "internal error");
                "internal error".to_owned()
            }
            ErrorCode::Unavailable => "service unavailable, retry later".to_owned(),
            _ => self.to_string(),
        };
        match &self {
            ApiError::Store(StoreError::Busy(why)) => {
                tracing::warn!(reason = %why, "database busy; answered 503");
            }
            ApiError::Store(StoreError::Unavailable(why)) => {
                tracing::error!(reason = %why, "database cannot store (disk full, read-only, I/O); answered 503");
            }
            _ => {}
        }
        let body: Envelope<()> = Envelope::error(code, msg);
        let mut response = (self.status_code(), Json(body)).into_response();
        if code == ErrorCode::Unavailable {
            // Busy or shutting down: worth trying again shortly.
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static(RETRY_AFTER_SECONDS),
            );
        }
        if code == ErrorCode::UnsupportedMediaType {
            // The one coding a body may be in (RFC 9110 §15.5.16), as card-polling says it.
            response.headers_mut().insert(
                axum::http::header::ACCEPT_ENCODING,
                axum::http::HeaderValue::from_static("identity"),
            );
        }
        response
    }
}

/// The shape of every error answer, for the OpenAPI document: `success: false`, `data: null`,
/// `code` from the table of §8.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ErrorEnvelope {
    /// Always `false`.
    pub success: bool,
    /// What went wrong.
    pub msg: String,
    /// Always `null`.
    #[schema(value_type = Option<Object>)]
    pub data: Option<serde_json::Value>,
    /// The error code.
    pub code: i32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_database_is_a_503_envelope_with_retry_after_never_a_500() {
        let r = ApiError::Store(StoreError::Busy("lock timeout".into())).into_response();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            r.headers()[axum::http::header::RETRY_AFTER],
            RETRY_AFTER_SECONDS
        );
    }

    /// On a full disk a submit was a 500 "internal error" without
    /// `Retry-After`; it is a 503 like any database that cannot take writes now.
    #[test]
    fn a_full_disk_or_read_only_database_is_a_503_with_retry_after() {
        for code in ["13", "8", "778", "08006", "53100"] {
            let e = StoreError::from(sqlx::Error::Database(Box::new(FakeDbError(code))));
            assert!(matches!(e, StoreError::Unavailable(_)), "{code}: {e:?}");
            let r = ApiError::Store(e).into_response();
            assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE, "{code}");
            assert_eq!(
                r.headers()[axum::http::header::RETRY_AFTER],
                RETRY_AFTER_SECONDS
            );
        }
        let e = StoreError::from(sqlx::Error::Database(Box::new(FakeDbError("2067"))));
        assert!(
            matches!(e, StoreError::Database(_)),
            "a constraint stays itself: {e:?}"
        );
    }

    /// A database error with only a code, as the drivers give it.
    #[derive(Debug)]
    struct FakeDbError(&'static str);

    impl std::fmt::Display for FakeDbError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "database error {}", self.0)
        }
    }

    impl std::error::Error for FakeDbError {}

    impl sqlx::error::DatabaseError for FakeDbError {
        fn message(&self) -> &str {
            "fake"
        }
        fn code(&self) -> Option<std::borrow::Cow<'_, str>> {
            Some(self.0.into())
        }
        fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> sqlx::error::ErrorKind {
            sqlx::error::ErrorKind::Other
        }
    }

    #[test]
    fn no_free_pooled_connection_in_time_is_busy() {
        assert!(matches!(
            StoreError::from(sqlx::Error::PoolTimedOut),
            StoreError::Busy(_)
        ));
    }
}
