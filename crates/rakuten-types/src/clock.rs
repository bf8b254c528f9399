//! The injected clock. Every lease expiry, TTL, retention and alert reads time from a [`Clock`],
//! never from the system directly, so tests drive time with [`ManualClock`] instead of sleeping.

use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::Timestamp;

/// A source of "now". Implementations must be cheap and thread-safe.
pub trait Clock: Send + Sync + Debug + 'static {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now_utc()
    }
}

/// A clock that only moves when told to. Clones share the same time.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<Mutex<Timestamp>>);

impl ManualClock {
    /// A clock stopped at `start`.
    pub fn new(start: Timestamp) -> Self {
        ManualClock(Arc::new(Mutex::new(start)))
    }

    /// A clock stopped at 2026-07-27T00:00:00Z, a fixed date so that snapshots are stable.
    pub fn at_fixed_date() -> Self {
        Self::new(Timestamp::from_millis(1_785_110_400_000))
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        let mut t = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *t = t.plus(d);
    }

    /// Sets the clock to `t` (may move backwards, for tests of clock skew).
    pub fn set(&self, t: Timestamp) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = t;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
