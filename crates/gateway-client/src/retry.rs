//! Retry policies and backoff.

use std::time::Duration;

use rand::Rng;
use tokio_util::sync::CancellationToken;

use crate::Error;

/// First backoff step.
pub const BACKOFF_BASE: Duration = Duration::from_millis(200);

/// How far a call retries a transient failure ([`Error::Transient`]); refusals are never
/// retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// One attempt.
    Never,
    /// At most this many attempts in all.
    Attempts(u32),
    /// Until a final answer or shutdown (for requests the gateway takes twice: report, result).
    UntilFinal,
    /// Until a final answer or this long since the first attempt.
    For(Duration),
}

impl Retry {
    /// Whether another attempt may follow `attempts` failed ones, `elapsed` after the first.
    pub fn allows(self, attempts: u32, elapsed: Duration) -> bool {
        match self {
            Retry::Never => false,
            Retry::Attempts(n) => attempts < n,
            Retry::UntilFinal => true,
            Retry::For(d) => elapsed < d,
        }
    }
}

/// `min(max, base * 2^attempt)` scaled by a random factor in [0.5, 1.0).
pub fn backoff(attempt: u32, max: Duration) -> Duration {
    let exp = BACKOFF_BASE.saturating_mul(1u32 << attempt.min(16));
    let capped = exp.min(max);
    capped.mul_f64(rand::rng().random_range(0.5..1.0))
}

/// Runs `turn` (one lease long-poll and its work) until `shutdown` or [`Error::ShuttingDown`],
/// backing off (jittered, up to `retry_max`) after each failed turn in a row; `what` names the
/// request in the log. The body of both trading-worker loops.
pub async fn run_turns<T, F, Fut>(
    shutdown: &CancellationToken,
    retry_max: Duration,
    what: &str,
    mut turn: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    let mut failures: u32 = 0;
    loop {
        let r = tokio::select! {
            r = turn() => r,
            () = shutdown.cancelled() => break,
        };
        match r {
            Ok(_) => failures = 0,
            Err(Error::ShuttingDown) => break,
            Err(e) => {
                tracing::warn!(error = %e, "{what} failed; backing off");
                tokio::select! {
                    () = tokio::time::sleep(backoff(failures, retry_max)) => {}
                    () = shutdown.cancelled() => break,
                }
                failures = failures.saturating_add(1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_with_jitter_and_stays_under_the_cap() {
        let max = Duration::from_secs(2);
        for attempt in 0..40 {
            let d = backoff(attempt, max);
            assert!(d <= max, "{attempt}: {d:?}");
            let nominal = BACKOFF_BASE
                .saturating_mul(1u32 << attempt.min(16))
                .min(max);
            assert!(d >= nominal / 2, "{attempt}: {d:?}");
        }
    }

    #[test]
    fn each_policy_allows_what_it_says() {
        let s = Duration::from_secs(1);
        assert!(!Retry::Never.allows(1, Duration::ZERO));
        assert!(Retry::Attempts(4).allows(3, s) && !Retry::Attempts(4).allows(4, s));
        assert!(Retry::UntilFinal.allows(u32::MAX, Duration::MAX));
        assert!(Retry::For(s).allows(99, s / 2) && !Retry::For(s).allows(1, s));
    }
}
