//! Stable numeric error codes (spec order-gateway.md §8 and §11.4) and the HTTP status each maps
//! to. Numbers are part of the public contract: never renumber.
//!
//! The spec inherits a 1xxx/5xxx table from a README we do not have; the numbers outside 6xxx are
//! our choices, recorded in `docs/DECISIONS.md`.

use serde::{Deserialize, Serialize};

/// Every error code a service of this workspace returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ErrorCode {
    /// 1001: missing or wrong Bearer token (HTTP 401).
    Unauthorized,
    /// 1002: the token is valid but the role may not do this (HTTP 403).
    Forbidden,
    /// 1003: malformed or invalid request: JSON, types, ranges, vocabularies (HTTP 422).
    Validation,
    /// 1004: request body over its size bound (HTTP 413), or a request target or header section
    /// over the edge's bounds (HTTP 414, 431).
    PayloadTooLarge,
    /// 1005: no such route or resource outside the task vocabulary (HTTP 404).
    NotFound,
    /// 1006: a conflicting concurrent change, e.g. reclaim while another task is active (HTTP 409).
    Conflict,
    /// 1007: the request body is in a form the service does not read (HTTP 415): a
    /// `Content-Encoding` other than `identity`, or not sent as `application/json`
    /// (D-body-coding-type-and-size). card-polling answers the same refusal with its own 7007.
    UnsupportedMediaType,
    /// 1500: internal error; details only in the server log (HTTP 500).
    Internal,
    /// 1503: the service is shutting down or its storage is unavailable (HTTP 503).
    Unavailable,
    /// 5001: the site session is logged out.
    SiteLoginLost,
    /// 5002: the site page did not have the expected structure.
    SiteUnexpectedPage,
    /// 5003: a site step the spec marks unverified (§10): not implemented.
    SiteNotImplemented,
    /// 5004: the payable amount exceeds the limit (amount guard, §6).
    AmountOverLimit,
    /// 5005: the site asks for a human challenge (3-D Secure, SMS).
    SiteChallenge,
    /// 5006: the site is unreachable or answered with a server error.
    SiteUnavailable,
    /// 5007: a read timed out (account query timeout, §11.1).
    SiteTimeout,
    /// 6001: task not found (HTTP 404).
    TaskNotFound,
    /// 6002: invalid lease: not the holder, expired, superseded or task terminal (HTTP 409).
    LeaseInvalid,
    /// 6003: the task's status does not allow this operation (HTTP 409).
    TaskStateConflict,
    /// 6004: another task is active; nothing handed out (HTTP 200, diagnostic only).
    TaskActiveElsewhere,
    /// 6005: account query not found or purged (HTTP 404).
    QueryNotFound,
    /// 6006: account query lease invalid (HTTP 409).
    QueryLeaseInvalid,
}

impl ErrorCode {
    /// Every code, for tables and tests.
    pub const ALL: [ErrorCode; 22] = [
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::Validation,
        ErrorCode::PayloadTooLarge,
        ErrorCode::NotFound,
        ErrorCode::Conflict,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::Internal,
        ErrorCode::Unavailable,
        ErrorCode::SiteLoginLost,
        ErrorCode::SiteUnexpectedPage,
        ErrorCode::SiteNotImplemented,
        ErrorCode::AmountOverLimit,
        ErrorCode::SiteChallenge,
        ErrorCode::SiteUnavailable,
        ErrorCode::SiteTimeout,
        ErrorCode::TaskNotFound,
        ErrorCode::LeaseInvalid,
        ErrorCode::TaskStateConflict,
        ErrorCode::TaskActiveElsewhere,
        ErrorCode::QueryNotFound,
        ErrorCode::QueryLeaseInvalid,
    ];

    /// The number on the wire.
    pub const fn as_i32(self) -> i32 {
        match self {
            ErrorCode::Unauthorized => 1001,
            ErrorCode::Forbidden => 1002,
            ErrorCode::Validation => 1003,
            ErrorCode::PayloadTooLarge => 1004,
            ErrorCode::NotFound => 1005,
            ErrorCode::Conflict => 1006,
            ErrorCode::UnsupportedMediaType => 1007,
            ErrorCode::Internal => 1500,
            ErrorCode::Unavailable => 1503,
            ErrorCode::SiteLoginLost => 5001,
            ErrorCode::SiteUnexpectedPage => 5002,
            ErrorCode::SiteNotImplemented => 5003,
            ErrorCode::AmountOverLimit => 5004,
            ErrorCode::SiteChallenge => 5005,
            ErrorCode::SiteUnavailable => 5006,
            ErrorCode::SiteTimeout => 5007,
            ErrorCode::TaskNotFound => 6001,
            ErrorCode::LeaseInvalid => 6002,
            ErrorCode::TaskStateConflict => 6003,
            ErrorCode::TaskActiveElsewhere => 6004,
            ErrorCode::QueryNotFound => 6005,
            ErrorCode::QueryLeaseInvalid => 6006,
        }
    }

    /// The code for a wire number, if it is one of ours.
    pub fn from_i32(n: i32) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_i32() == n)
    }

    /// The HTTP status this code is sent with.
    pub const fn http_status(self) -> u16 {
        match self {
            ErrorCode::Unauthorized => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::Validation => 422,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::NotFound | ErrorCode::TaskNotFound | ErrorCode::QueryNotFound => 404,
            ErrorCode::Conflict
            | ErrorCode::LeaseInvalid
            | ErrorCode::TaskStateConflict
            | ErrorCode::QueryLeaseInvalid => 409,
            ErrorCode::Internal => 500,
            ErrorCode::Unavailable => 503,
            ErrorCode::TaskActiveElsewhere => 200,
            // Site codes travel inside results and reports, not as HTTP answers of our services.
            ErrorCode::SiteLoginLost
            | ErrorCode::SiteUnexpectedPage
            | ErrorCode::SiteNotImplemented
            | ErrorCode::AmountOverLimit
            | ErrorCode::SiteChallenge
            | ErrorCode::SiteUnavailable
            | ErrorCode::SiteTimeout => 502,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_unique_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for c in ErrorCode::ALL {
            assert!(seen.insert(c.as_i32()), "duplicate {c:?}");
            assert_eq!(ErrorCode::from_i32(c.as_i32()), Some(c));
        }
    }
}
