//! Steps before the submit are safe to repeat: a transient site failure is retried
//! (D-pre-submit-retries); a lasting one ends the task.

use std::future::Future;
use std::time::Duration;

use rakuten_types::OrderState;

use super::{Stop, TaskRun};
use crate::gateway_client::backoff;
use crate::site::{SiteError, SiteErrorClass};

/// Attempts of one step before the submit, the first included, when the site fails
/// transiently (D-pre-submit-retries).
pub const SAFE_STEP_ATTEMPTS: u32 = 5;

/// Time budget of one step's attempts before the submit: no further attempt starts when its
/// pause would end after this (D-pre-submit-retries). Well below the lease TTL; the renewal loop keeps
/// the lease meanwhile.
pub const SAFE_STEP_MAX: Duration = Duration::from_secs(30);

/// Largest pause between two attempts of a step before the submit (also capped by
/// `RAKUTEN_GATEWAY_RETRY_MAX_SECONDS`).
const SAFE_STEP_PAUSE_MAX: Duration = Duration::from_secs(8);

impl TaskRun<'_> {
    /// Runs a step that is safe to repeat (item detail, cart add, cart check, order confirm:
    /// nothing irreversible happens before the submit), retrying a [`SiteErrorClass::Retryable`]
    /// failure up to [`SAFE_STEP_ATTEMPTS`] times within [`SAFE_STEP_MAX`], with jittered
    /// exponential pauses (D-pre-submit-retries). `locked`: each attempt holds the account lock (not the
    /// pauses). The lease is checked before every attempt and a pause ends early when it is lost
    /// or the worker shuts down ([`Stop`]). `Ok(Err)`: a fatal failure, or the last retryable one
    /// (its message says how many attempts were made). Never use it for submit or pay.
    pub(super) async fn safe_step<T, F, Fut>(
        &self,
        step: &str,
        locked: bool,
        mut call: F,
    ) -> Result<Result<T, SiteError>, Stop>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SiteError>>,
    {
        let started = tokio::time::Instant::now();
        let cap = self.ctx.settings.retry_max.min(SAFE_STEP_PAUSE_MAX);
        let mut attempt: u32 = 0;
        loop {
            self.check_lease()?;
            let r = if locked {
                let _g = self.ctx.locks.lock(self.ctx.site.account()).await;
                call().await
            } else {
                call().await
            };
            let mut e = match r {
                Ok(v) => return Ok(Ok(v)),
                Err(e) if e.class() == SiteErrorClass::Fatal => return Ok(Err(e)),
                Err(e) => e,
            };
            let pause = backoff(attempt, cap);
            attempt += 1;
            if attempt >= SAFE_STEP_ATTEMPTS || started.elapsed() + pause > SAFE_STEP_MAX {
                e.message = format!("{} (gave up after {attempt} attempts)", e.message);
                return Ok(Err(e));
            }
            tracing::warn!(task_id = %self.task_id(), step, attempt, error = %e, "transient site failure before the submit; retrying");
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = self.lost.cancelled() => {}
                () = self.ctx.shutdown.cancelled() => {}
            }
        }
    }

    /// A step before the submit: its action through [`Self::safe_step`]; on failure the task
    /// ends ([`Self::fail_site`] with `state`) and the answer is `None`.
    pub(super) async fn site_step<T, F, Fut>(
        &self,
        seq: Option<i64>,
        step: &str,
        locked: bool,
        state: OrderState,
        call: F,
    ) -> Result<Option<T>, Stop>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SiteError>>,
    {
        match self.safe_step(step, locked, call).await? {
            Ok(v) => Ok(Some(v)),
            Err(e) => {
                self.fail_site(seq, step, state, &e).await?;
                Ok(None)
            }
        }
    }
}
