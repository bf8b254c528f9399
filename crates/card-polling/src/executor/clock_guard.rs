//! The clock guard of claims on a shared database.
//!
//! Claims are stamped (`claim_expires_at = now + CLAIM_LEASE`) and taken over (`claim_expires_at
//! <= now`) with the instance's own clock. With several instances on one PostgreSQL database, an
//! instance whose clock ran 120 s ahead saw every claim of the others as lapsed and took it over
//! while it was in flight: the carrier was called twice. An instance running behind stamped claims
//! that the others saw lapsed at once. So, as the gateway's sweeper does (`56ff2ec`), each
//! instance checks its clock against the one clock the instances share — the database's — and
//! while the difference is beyond [`Settings::clock_max_skew_secs`](crate::settings::Settings)
//! it makes no claim at all (neither a first claim nor a takeover): the other instances run the
//! items. The state is logged when it changes, shown in `/health` (`clock`) and in `/metrics`
//! (`cardpoll_clock_offset_seconds`, `cardpoll_clock_skewed`,
//! `cardpoll_claims_refused_total{reason="clock_skew"}`).
//!
//! The check costs one `SELECT` and is reused for [`RECHECK`]; an embedded SQLite database has no
//! other clock to check against and is never skewed. [`ClockGuard::health`] says which of these
//! holds from the start, with this instance's own clock reading (D-poll-clock-skew-no-claims).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use rakuten_types::{Clock, Timestamp};

use crate::store::ServiceStore;
use crate::telemetry::PollMetrics;

/// How long one check of the clock against the database's is reused.
pub const RECHECK: Duration = Duration::from_secs(1);

/// The last check of this instance's clock against the database's (`/health` `clock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ClockCheck {
    /// The database's clock minus this instance's, milliseconds.
    pub offset_ms: i64,
    /// The tolerated difference, milliseconds ([`Settings::clock_max_skew_secs`](crate::settings::Settings)).
    pub max_skew_ms: u64,
    /// True when `|offset_ms| > max_skew_ms`: this instance makes no claims.
    pub skewed: bool,
    /// When (this instance's clock) the check ran.
    pub checked_at: Timestamp,
}

/// What `/health` says of the clock check (`clock.status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockStatus {
    /// `RAKUTEN_POLL_CLOCK_MAX_SKEW_SECS=0`: no check, every claim allowed.
    Off,
    /// An embedded database: no other clock to compare with, every claim allowed.
    NoSharedClock,
    /// The check is on, but no claim has been tried yet, so nothing was measured.
    NotYetMeasured,
    /// The last measurement was within the tolerance.
    Ok,
    /// The last measurement was beyond the tolerance: this instance makes no claims.
    Skewed,
}

/// `/health`'s `clock`: the check's state, this instance's clock reading, the tolerance and the
/// last measurement (its fields `null` until one was made).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ClockHealth {
    /// The check's state.
    pub status: ClockStatus,
    /// This instance's clock when `/health` answered.
    pub now: Timestamp,
    /// The tolerated difference, milliseconds; `null` with the check off.
    pub max_skew_ms: Option<u64>,
    /// The last measurement: the database's clock minus this instance's, milliseconds.
    pub offset_ms: Option<i64>,
    /// True when the last measurement was beyond the tolerance: this instance makes no claims.
    pub skewed: bool,
    /// When (this instance's clock) the last measurement was made.
    pub checked_at: Option<Timestamp>,
}

/// Checks the instance's clock against the shared database's before claims.
pub struct ClockGuard {
    store: Arc<dyn ServiceStore>,
    clock: Arc<dyn Clock>,
    metrics: Arc<PollMetrics>,
    max_skew: Option<Duration>,
    shared: bool,
    last: Mutex<Option<(Instant, ClockCheck)>>,
}

impl std::fmt::Debug for ClockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClockGuard")
            .field("max_skew", &self.max_skew)
            .finish_non_exhaustive()
    }
}

impl ClockGuard {
    /// A guard allowing `max_skew` between this instance's clock and the database's; `None`
    /// turns the check off (every claim allowed).
    pub fn new(
        store: Arc<dyn ServiceStore>,
        clock: Arc<dyn Clock>,
        metrics: Arc<PollMetrics>,
        max_skew: Option<Duration>,
    ) -> Self {
        ClockGuard {
            shared: store.clock_shared(),
            store,
            clock,
            metrics,
            max_skew,
            last: Mutex::new(None),
        }
    }

    /// What `/health` shows: whether the check is off, has no clock to compare with, has not
    /// measured yet, or what it last found; with this instance's clock reading now.
    pub fn health(&self) -> ClockHealth {
        let last = self.last_check();
        let status = match (self.max_skew, self.shared, last) {
            (None, _, _) => ClockStatus::Off,
            (Some(_), false, _) => ClockStatus::NoSharedClock,
            (Some(_), true, None) => ClockStatus::NotYetMeasured,
            (Some(_), true, Some(c)) if c.skewed => ClockStatus::Skewed,
            (Some(_), true, Some(_)) => ClockStatus::Ok,
        };
        ClockHealth {
            status,
            now: self.clock.now(),
            max_skew_ms: self.max_skew.map(|d| d.as_millis() as u64),
            offset_ms: last.map(|c| c.offset_ms),
            skewed: last.is_some_and(|c| c.skewed),
            checked_at: last.map(|c| c.checked_at),
        }
    }

    /// The last check, `None` before the first one, with the check off, or on SQLite.
    pub fn last_check(&self) -> Option<ClockCheck> {
        self.last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map(|(_, c)| c)
    }

    /// Whether this instance may claim now: true with the check off or an embedded database;
    /// otherwise true when the last check (at most [`RECHECK`] old, else a new one) found the
    /// clocks within the tolerance. A failed check refuses (the item runs at a later round).
    /// A refusal is counted in `cardpoll_claims_refused_total{reason="clock_skew"}`.
    pub async fn may_claim(&self) -> bool {
        let Some(max_skew) = self.max_skew else {
            return true;
        };
        let cached = *self.last.lock().unwrap_or_else(|e| e.into_inner());
        let check = match cached {
            Some((at, c)) if at.elapsed() < RECHECK => Some(c),
            _ => match self.check(max_skew).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "clock check against the database failed; no claims this round");
                    self.metrics.claim_refused("clock_check_failed");
                    return false;
                }
            },
        };
        match check {
            Some(c) if c.skewed => {
                self.metrics.claim_refused("clock_skew");
                false
            }
            _ => true,
        }
    }

    /// Runs one check and records it; `None` when the store has no shared clock.
    async fn check(
        &self,
        max_skew: Duration,
    ) -> Result<Option<ClockCheck>, crate::store::StoreError> {
        let now = self.clock.now();
        let Some(offset_ms) = self.store.clock_offset_ms(now).await? else {
            return Ok(None);
        };
        let max_skew_ms = max_skew.as_millis() as u64;
        let check = ClockCheck {
            offset_ms,
            max_skew_ms,
            skewed: offset_ms.unsigned_abs() > max_skew_ms,
            checked_at: now,
        };
        let was = self
            .last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace((Instant::now(), check));
        let was_skewed = was.is_some_and(|(_, c)| c.skewed);
        if check.skewed && !was_skewed {
            tracing::error!(
                offset_ms,
                max_skew_ms,
                "this instance's clock is off from the database's: it makes no claims until they agree (RAKUTEN_POLL_CLOCK_MAX_SKEW_SECS)"
            );
        } else if !check.skewed && was_skewed {
            tracing::info!(
                offset_ms,
                "the clock agrees with the database's again: claims resume"
            );
        }
        self.metrics.clock_check(offset_ms, check.skewed);
        Ok(Some(check))
    }
}
