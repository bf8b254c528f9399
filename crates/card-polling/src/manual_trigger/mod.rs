//! The ordinary manual trigger (an existing feature in the spec's world): an operator asks for an
//! immediate ordinary poll of a card. Unlike manual priority enqueue ([`crate::priority::manual`]),
//! it has a daily quota per operator (setting `RAKUTEN_POLL_MANUAL_DAILY_QUOTA`, UTC days) and a
//! 24 h dedupe per (card, task type); refused requests are recorded too. Accepted triggers go to
//! the task type's manual lane (`poll:manual:{task_type}`), which the scheduler drains after the
//! priority hints and before ordinary batches.

use rakuten_types::Timestamp;

use crate::domain::{Account, TaskTypes};
use crate::hints::Hints;
use crate::priority::manual::ManualError;
use crate::store::{ManualTriggerOutcome, ManualTriggerRequest, ScheduleStore};

/// Seconds from `now` until the daily quota resets (the next 00:00 UTC: the quota counts
/// accepted triggers since the start of the UTC day), rounded up so that a client waiting this
/// long is never early; at least 1. The `Retry-After` of the quota's 429 (D-ordinary-manual-trigger).
pub fn seconds_until_quota_resets(now: Timestamp) -> u64 {
    const DAY_MS: i64 = 86_400_000;
    let left_ms = DAY_MS - now.as_millis().rem_euclid(DAY_MS);
    u64::try_from((left_ms + 999) / 1000).unwrap_or(1).max(1)
}

/// Requests an ordinary manual trigger of `iccid` for `task_types` (empty: every configured one).
///
/// # Errors
/// Forbidden role (needs the manual trigger permission; enterprise refused), unknown task type,
/// card not found or out of scope (identical), storage failures.
#[allow(clippy::too_many_arguments)]
pub async fn request(
    store: &dyn ScheduleStore,
    hints: &Hints,
    configured: &TaskTypes,
    who: &Account,
    iccid: &str,
    task_types: &[String],
    daily_quota: u32,
    now: Timestamp,
) -> Result<ManualTriggerOutcome, ManualError> {
    let scope = crate::domain::authorize(who, crate::domain::Action::Enqueue)?;
    let mut types = if task_types.is_empty() {
        configured.names()
    } else {
        for tt in task_types {
            if configured.get(tt).is_none() {
                return Err(ManualError::Invalid(format!("unknown task type {tt:?}")));
            }
        }
        task_types.to_vec()
    };
    types.sort();
    types.dedup();
    let req = ManualTriggerRequest {
        operator: who.id.clone(),
        iccid: iccid.to_owned(),
        task_types: types,
        daily_quota,
    };
    let out = store.manual_trigger_request(&scope, &req, now).await?;
    if let ManualTriggerOutcome::Queued { triggers } = &out {
        hints.push_manual(triggers).await;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quota_resets_at_the_next_utc_midnight_in_whole_seconds_rounded_up() {
        let at = |s: &str| Timestamp::parse(s).unwrap();
        assert_eq!(
            seconds_until_quota_resets(at("2026-03-01T00:00:00Z")),
            86_400
        );
        assert_eq!(
            seconds_until_quota_resets(at("2026-03-01T23:59:59.001Z")),
            1
        );
        assert_eq!(seconds_until_quota_resets(at("2026-03-01T23:00:00Z")), 3600);
        assert_eq!(
            seconds_until_quota_resets(at("2026-03-01T12:00:00.500+09:00")),
            75_600
        );
    }
}
