//! The response envelope of every endpoint (spec order-gateway.md §8):
//! `{"success": bool, "msg": str, "data": T|null, "code": int}`. Success has `code: 0`.

use serde::{Deserialize, Serialize};

use crate::ErrorCode;

/// The envelope around every response body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Envelope<T> {
    /// `true` exactly when `code` is 0 (or the diagnostic 6004).
    pub success: bool,
    /// Human-readable message; `"ok"` on success.
    pub msg: String,
    /// The payload, `null` on errors and on an empty long-poll.
    pub data: Option<T>,
    /// 0 on success, otherwise an [`ErrorCode`] number.
    pub code: i32,
}

impl<T> Envelope<T> {
    /// A success envelope carrying `data`.
    pub fn ok(data: T) -> Self {
        Envelope {
            success: true,
            msg: "ok".into(),
            data: Some(data),
            code: 0,
        }
    }

    /// A success envelope with `data: null` (an empty long-poll), with an optional diagnostic code.
    pub fn empty(code: i32, msg: impl Into<String>) -> Self {
        Envelope {
            success: true,
            msg: msg.into(),
            data: None,
            code,
        }
    }

    /// An error envelope.
    pub fn error(code: ErrorCode, msg: impl Into<String>) -> Self {
        Envelope {
            success: false,
            msg: msg.into(),
            data: None,
            code: code.as_i32(),
        }
    }
}
