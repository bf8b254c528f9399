//! What a gateway call can end in besides success.

/// Why a gateway call did not succeed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// 6002: not the holder, expired, superseded or terminal. Final.
    #[error("lease lost (6002): {0}")]
    LeaseLost(String),
    /// Another 4xx answer (or a non-2xx that is not an envelope). Final: resending the same
    /// request cannot help.
    #[error("gateway refused the request: HTTP {status}, code {code}: {msg}")]
    Rejected {
        /// HTTP status.
        status: u16,
        /// Envelope code (0 when the answer was not an envelope).
        code: i32,
        /// Envelope message.
        msg: String,
    },
    /// Unreachable, timed out, 5xx or an unreadable success, after the retries the call allows.
    #[error("gateway unavailable: {0}")]
    Transient(String),
    /// The client's shutdown token was cancelled.
    #[error("shutting down")]
    ShuttingDown,
}

impl Error {
    /// The envelope code of a refusal (`None` for other errors).
    pub fn code(&self) -> Option<i32> {
        match self {
            Error::Rejected { code, .. } => Some(*code),
            Error::LeaseLost(_) => Some(rakuten_types::ErrorCode::LeaseInvalid.as_i32()),
            _ => None,
        }
    }
}
