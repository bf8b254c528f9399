//! The schedule configuration check (D-schedule-config-check): every instance on one database shares one
//! ordinary polling schedule, synced to an instance's `RAKUTEN_POLL_TASK_TYPES` /
//! `RAKUTEN_POLL_SHARDS` only when it starts. An instance started later with other values rewrites
//! it for all (and says so, `ef5c945`); the instances already running keep scheduling with their
//! own values. This job reads the stored configuration every [`CHECK_EVERY`] (one `SELECT`) and
//! compares it with this instance's: `/health` shows `schedule_config` (`same` or `differs`, with
//! both), and a difference is logged as a WARN once per stored value it differs by (an INFO when
//! they agree again). It changes nothing: the fix is to restart the instances with one set of
//! values (docs/card-polling-instances.md).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use rakuten_types::{Clock, Timestamp};

use crate::store::{ScheduleConfig, ScheduleStore, StoreResult};

/// How often a running instance reads the stored configuration.
pub const CHECK_EVERY: Duration = Duration::from_secs(30);

/// `schedule_config.status` in `/health`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleConfigStatus {
    /// No check has run yet.
    NotYetChecked,
    /// The stored configuration is this instance's.
    Same,
    /// The stored configuration is not this instance's (another instance started with other
    /// values, or none is stored): this instance schedules by values the others no longer share.
    Differs,
}

/// `/health`'s `schedule_config`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScheduleConfigHealth {
    /// Same, differs, or not yet checked.
    pub status: ScheduleConfigStatus,
    /// When (this instance's clock) the last check ran; `null` before the first.
    pub checked_at: Option<Timestamp>,
    /// This instance's configuration, the one it schedules by.
    pub instance: ScheduleConfig,
    /// The stored configuration at the last check; `null` before the first, or when none is
    /// stored.
    pub stored: Option<ScheduleConfig>,
}

/// What one check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleConfigCheck {
    /// The stored configuration is not this instance's.
    pub differs: bool,
    /// This check logged the WARN (the first check to see this stored value differ).
    pub warned: bool,
}

struct State {
    health: ScheduleConfigHealth,
    /// The stored value the last WARN named; `None` while they agree.
    warned_for: Option<Option<ScheduleConfig>>,
}

/// The check; clones share one state (the job's loop and `/health`).
#[derive(Clone)]
pub struct ScheduleConfigJob {
    store: Arc<dyn ScheduleStore>,
    clock: Arc<dyn Clock>,
    every: Duration,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for ScheduleConfigJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScheduleConfigJob")
            .field("every", &self.every)
            .finish_non_exhaustive()
    }
}

impl ScheduleConfigJob {
    /// A check of `instance` (this instance's configuration) against the stored one, every
    /// `every`.
    pub fn new(
        store: Arc<dyn ScheduleStore>,
        clock: Arc<dyn Clock>,
        instance: ScheduleConfig,
        every: Duration,
    ) -> Self {
        ScheduleConfigJob {
            store,
            clock,
            every,
            state: Arc::new(Mutex::new(State {
                health: ScheduleConfigHealth {
                    status: ScheduleConfigStatus::NotYetChecked,
                    checked_at: None,
                    instance,
                    stored: None,
                },
                warned_for: None,
            })),
        }
    }

    /// What the last check found (`/health`).
    pub fn health(&self) -> ScheduleConfigHealth {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .health
            .clone()
    }

    /// Reads the stored configuration and compares it with this instance's at `now`.
    ///
    /// # Errors
    /// Storage failures (the last state is kept).
    pub async fn run_once(&self, now: Timestamp) -> StoreResult<ScheduleConfigCheck> {
        let stored = self.store.schedule_config_read().await?;
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let differs = stored.as_ref() != Some(&st.health.instance);
        let mut warned = false;
        if differs {
            if st.warned_for.as_ref() != Some(&stored) {
                let stored_text = stored
                    .as_ref()
                    .map_or_else(|| "none".to_owned(), ToString::to_string);
                tracing::warn!(
                    instance = %st.health.instance,
                    stored = %stored_text,
                    "the stored schedule configuration differs from this instance's: another \
                     instance started with other RAKUTEN_POLL_TASK_TYPES / RAKUTEN_POLL_SHARDS \
                     rewrote it; this instance keeps scheduling by its own until restarted \
                     (restart every instance with one set of values)"
                );
                st.warned_for = Some(stored.clone());
                warned = true;
            }
        } else if st.warned_for.take().is_some() {
            tracing::info!(
                instance = %st.health.instance,
                "the stored schedule configuration is this instance's again"
            );
        }
        st.health.status = if differs {
            ScheduleConfigStatus::Differs
        } else {
            ScheduleConfigStatus::Same
        };
        st.health.checked_at = Some(now);
        st.health.stored = stored;
        Ok(ScheduleConfigCheck { differs, warned })
    }

    /// Runs until `shutdown`: once at start, then every [`CHECK_EVERY`] (the `every` given).
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            if let Err(e) = self.run_once(self.clock.now()).await {
                tracing::warn!(error = %e, "schedule configuration check failed");
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(self.every) => {}
            }
        }
    }
}
