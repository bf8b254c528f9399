//! Timestamps at the steps of a hand-off (submit acknowledged → grant received), for the
//! benchmark's breakdown (`docs/BENCHMARKS.md`). Nothing is recorded unless a
//! hook is installed ([`install`], done only by `benches/gateway.rs`); without one a step costs
//! one atomic load. The hook is process-wide: several applications in one process share it.

use std::sync::OnceLock;

/// A step of the hand-off path, in the order a single hand-off passes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    /// `POST /api/orders`: the insert is committed (the store answered).
    SubmitCommitted,
    /// `POST /api/orders`: the waiting long-poll was notified.
    SubmitNotified,
    /// `POST /api/orders`: the handler returns its answer (serialized and written next).
    SubmitAnswered,
    /// A waiting long-poll's task ran again after a wake-up, about to start its lease attempt.
    PollWoken,
    /// SQLite writer: a batch starts (`BEGIN IMMEDIATE` next).
    WriterBatchBegin,
    /// SQLite writer: the batch's operations ran, `COMMIT` (the fsync) next.
    WriterCommitStart,
    /// SQLite writer: `COMMIT` returned.
    WriterCommitDone,
    /// The long-poll's lease attempt returned to its handler (the answer is serialized next).
    LeaseReturned,
}

static HOOK: OnceLock<fn(Step)> = OnceLock::new();

/// Installs `hook`, called at every [`Step`] from then on; false when one was installed already.
pub fn install(hook: fn(Step)) -> bool {
    HOOK.set(hook).is_ok()
}

/// Records `step` when a hook is installed.
#[inline]
pub(crate) fn mark(step: Step) {
    if let Some(hook) = HOOK.get() {
        hook(step);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use rakuten_types::ManualClock;
    use serde_json::json;

    use super::*;
    use crate::{Application, Settings};

    const TOKEN: &str = "probe-test-token-0123456789";
    static EVENTS: Mutex<Vec<Step>> = Mutex::new(Vec::new());

    fn record(step: Step) {
        if matches!(
            step,
            Step::SubmitNotified | Step::PollWoken | Step::SubmitAnswered
        ) {
            EVENTS.lock().unwrap_or_else(|e| e.into_inner()).push(step);
        }
    }

    /// The hand-off's lease starts while the submit's acknowledgement is still being written: the
    /// woken long-poll runs before the submit's handler answers (it used to run only after the
    /// answer was written, 121 µs at p50 on the bench machine; BENCHMARKS.md). One thread
    /// (`current_thread`), so the order is deterministic.
    #[tokio::test]
    async fn a_submit_lets_the_woken_long_poll_start_before_answering() {
        assert!(install(record), "the only test installing the probe");
        let dir = tempfile::tempdir().unwrap();
        let app = Application::build(
            Settings::for_tests(dir.path().join("gw.db"), TOKEN),
            Arc::new(ManualClock::at_fixed_date()),
        )
        .await
        .unwrap();
        let state = app.state();
        // The wake-up path (a submit's hand-off would run the poll's attempt in its own commit).
        state.lease_notifier.set_handoff(false);
        let base = format!("http://127.0.0.1:{}", app.port());
        tokio::spawn(app.run_until_stopped(std::future::pending()));
        let client = reqwest::Client::new();
        let poll = tokio::spawn({
            let (client, url) = (
                client.clone(),
                format!("{base}/api/orders/lease?worker_id=w1&wait=10"),
            );
            async move {
                let r = client.get(url).bearer_auth(TOKEN).send().await.unwrap();
                r.text().await.unwrap()
            }
        });
        let started = Instant::now();
        while state.lease_notifier.attempts().first < 1 {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the poll never waited"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let ack = client
            .post(format!("{base}/api/orders"))
            .bearer_auth(TOKEN)
            .json(&json!({"task_id": "po-1", "site": "rakuten", "intent": {"item_url": "https://item.rakuten.co.jp/shop/a/", "quantity": 1}}))
            .send()
            .await
            .unwrap();
        assert_eq!(ack.status(), 200);
        let grant = poll.await.unwrap();
        assert!(grant.contains("\"po-1\""), "{grant}");
        let events = EVENTS.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert_eq!(
            events,
            [Step::SubmitNotified, Step::PollWoken, Step::SubmitAnswered]
        );
    }
}
