//! The bounded retry of a whole write transition (D-poll-postgres-concurrent-writes). On PostgreSQL several instances write
//! at once under READ COMMITTED: a deadlock (`40P01`), a serialization failure (`40001`) or a
//! concurrent change a transition detected itself ([`StoreError::Raced`]: e.g. another
//! transaction inserted the trigger event this one found missing) rolls the transaction back, and
//! running the transition again from its first read resolves it. SQLite has one writer: none of
//! these can happen there, so the retry never fires on it.

use std::time::Duration;

use crate::store::StoreError;

/// Runs of one transition at most (the first and four retries).
pub(crate) const MAX_RUNS: u32 = 5;

/// Whether the transition that failed with `e` on its run number `*runs` (1-based) runs again;
/// counts the run and, before a retry, waits a jittered 0–2^runs ms so two deadlocked
/// transactions do not meet again in the same order.
pub(crate) async fn again(e: &StoreError, runs: &mut u32) -> bool {
    *runs += 1;
    if *runs >= MAX_RUNS || !retryable(e) {
        return false;
    }
    tracing::debug!(error = %e, run = *runs, "retrying a write transition after a concurrent change");
    let ms = rand::random_range(0..=(1u64 << *runs));
    tokio::time::sleep(Duration::from_millis(ms)).await;
    true
}

/// A deadlock, a serialization failure, or a concurrent change the transition detected.
pub(crate) fn retryable(e: &StoreError) -> bool {
    match e {
        StoreError::Raced(_) => true,
        StoreError::Db(db) => match &**db {
            sqlx::Error::Database(db) => matches!(db.code().as_deref(), Some("40001" | "40P01")),
            _ => false,
        },
        _ => false,
    }
}
