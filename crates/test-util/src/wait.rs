//! Waiting in a test for something to happen: the condition is polled until it holds or a
//! bound passes, then the test fails naming what it waited for. Never a fixed sleep: a sleep
//! long enough for a loaded machine slows every run, one short enough for a fast run fails on a
//! loaded one.
//!
//! The polls start 5 ms apart and back off to 100 ms. The async forms measure on tokio's clock,
//! so under paused time (`start_paused`) the bound is the runtime's.

use std::fmt::Display;
use std::time::Duration;

/// The first pause between polls, doubled up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(5);

/// The longest pause between polls.
const MAX_PAUSE: Duration = Duration::from_millis(100);

/// Waits until `cond` holds, polling it; at most `within`.
///
/// # Panics
/// `cond` still does not hold after `within`: the message names `what` (say what was awaited,
/// "the task to go stale").
pub async fn wait_until(what: &str, within: Duration, mut cond: impl AsyncFnMut() -> bool) {
    wait_for(what, within, async || {
        if cond().await { Ok(()) } else { Err("not yet") }
    })
    .await;
}

/// Waits until `poll` answers `Ok`, and returns its value; `Err` is what it saw instead, named in
/// the failure. At most `within`.
///
/// # Panics
/// `poll` still answers `Err` after `within`: the message names `what` and the last `Err`.
pub async fn wait_for<T, E: Display>(
    what: &str,
    within: Duration,
    poll: impl AsyncFnMut() -> Result<T, E>,
) -> T {
    match poll_within(within, poll).await {
        Ok(v) => v,
        Err(seen) => panic!("timed out after {within:?} waiting for {what}; last seen: {seen}"),
    }
}

/// Polls `poll` until it answers `Ok` (returned) or `within` has passed (its last `Err`
/// returned): for a caller that cleans up before failing.
pub async fn poll_within<T, E>(
    within: Duration,
    mut poll: impl AsyncFnMut() -> Result<T, E>,
) -> Result<T, E> {
    let deadline = tokio::time::Instant::now() + within;
    let mut pause = FIRST_PAUSE;
    loop {
        let seen = match poll().await {
            Ok(v) => return Ok(v),
            Err(seen) => seen,
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(seen);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

/// [`wait_until`] for a thread that is not in an async runtime: polls `cond` on this thread.
///
/// # Panics
/// As [`wait_until`].
pub fn wait_until_blocking(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + within;
    let mut pause = FIRST_PAUSE;
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        std::thread::sleep(pause);
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn a_condition_that_comes_true_ends_the_wait_with_its_value() {
        let polls = AtomicU32::new(0);
        let v = wait_for(
            "the third poll",
            Duration::from_secs(5),
            async || match polls.fetch_add(1, Ordering::SeqCst) {
                n if n >= 2 => Ok(n),
                n => Err(n),
            },
        )
        .await;
        assert_eq!(v, 2);
    }

    #[tokio::test]
    #[should_panic(
        expected = "timed out after 20ms waiting for the impossible; last seen: not yet"
    )]
    async fn a_condition_that_never_holds_fails_naming_what_was_awaited() {
        wait_until("the impossible", Duration::from_millis(20), async || false).await;
    }

    #[test]
    #[should_panic(expected = "timed out after 20ms waiting for the impossible")]
    fn the_blocking_wait_fails_the_same_way() {
        wait_until_blocking("the impossible", Duration::from_millis(20), || false);
    }
}
