//! The carrier behind a trait. The executor calls [`Upstream::poll`] for one (card, task type)
//! and, for a suspended card, may ask [`Upstream::resume`] (复机) — never for a card holding the
//! carrier channel threshold stop lock.
//!
//! Two carriers: [`sim::SimCarrier`] (simulated; the default, tests and benchmarks) and
//! [`http::HttpCarrier`] (a carrier gateway over a documented JSON contract,
//! `docs/carrier-http-contract.md`), chosen by `RAKUTEN_POLL_CARRIER_URL`. The executor bounds
//! every call by the spec's upstream timeout and writes one interaction-log row per call from
//! the safe summaries returned here — never a credential or the raw answer.
//!
//! Errors say whether to retry ([`UpstreamError::is_retryable`]): timeouts, failures, invalid
//! responses and answers past the size cap are recoverable; an unknown card is a business failure
//! that is never retried.

pub mod http;
pub mod sim;

use async_trait::async_trait;

pub use http::HttpCarrier;
pub use sim::{SimBehavior, SimCarrier, SimConfig};

/// One poll of one card for one task type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollRequest {
    /// ICCID.
    pub iccid: String,
    /// Task type name (`card_status`, `data_usage`, `package`, …).
    pub task_type: String,
    /// 1-based attempt: a priority item's attempt counted before the call (1..=3); 1 for an
    /// ordinary poll or ordinary manual trigger.
    pub attempt: u32,
    /// The priority item this call executes (`None` for ordinary polls). Context only: a real
    /// carrier never sees it; the simulated carrier records it so tests can check that no call
    /// was made for a closed or expired item.
    pub item_id: Option<i64>,
}

/// What the carrier answered, already reduced to a safe summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollResponse {
    /// A short, credential-free summary of the answer for the interaction log.
    pub summary: String,
    /// The carrier reports the card as suspended (停机).
    pub suspended: bool,
}

/// Why a carrier call failed. Messages are safe to show.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamError {
    /// No answer within the timeout.
    #[error("carrier call timed out")]
    Timeout,
    /// The carrier answered with an error.
    #[error("carrier call failed: {0}")]
    Failed(String),
    /// The answer could not be understood.
    #[error("carrier response invalid")]
    InvalidResponse,
    /// The carrier does not know the card.
    #[error("carrier does not know the card")]
    UnknownCard,
    /// The answer grew past the size the adapter reads
    /// (`RAKUTEN_POLL_CARRIER_MAX_ANSWER_BYTES`): the call was cut there, the rest never read.
    #[error("carrier answer larger than {limit} bytes")]
    AnswerTooLarge {
        /// The cap, bytes.
        limit: usize,
    },
}

impl UpstreamError {
    /// Recoverable failures go back to pending (below the attempt limit).
    pub const fn is_retryable(&self) -> bool {
        !matches!(self, UpstreamError::UnknownCard)
    }

    /// Short outcome label for logs and results.
    pub const fn label(&self) -> &'static str {
        match self {
            UpstreamError::Timeout => "timeout",
            UpstreamError::Failed(_) => "failed",
            UpstreamError::InvalidResponse => "invalid_response",
            UpstreamError::UnknownCard => "unknown_card",
            UpstreamError::AnswerTooLarge { .. } => "answer_too_large",
        }
    }
}

/// The carrier interface.
#[async_trait]
pub trait Upstream: Send + Sync + 'static {
    /// Polls one card for one task type.
    async fn poll(&self, req: &PollRequest) -> Result<PollResponse, UpstreamError>;
    /// Resumes (复机) a suspended card.
    async fn resume(&self, iccid: &str) -> Result<(), UpstreamError>;
}
