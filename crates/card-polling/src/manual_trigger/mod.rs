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
use crate::store::{ManualTriggerOutcome, ManualTriggerRequest, Store};

/// Requests an ordinary manual trigger of `iccid` for `task_types` (empty: every configured one).
///
/// # Errors
/// Forbidden role (needs the manual trigger permission; enterprise refused), unknown task type,
/// card not found or out of scope (identical), storage failures.
#[allow(clippy::too_many_arguments)]
pub async fn request(
    store: &dyn Store,
    hints: &Hints,
    configured: &TaskTypes,
    who: &Account,
    iccid: &str,
    task_types: &[String],
    daily_quota: u32,
    now: Timestamp,
) -> Result<ManualTriggerOutcome, ManualError> {
    let scope = who.scope().ok_or(ManualError::Forbidden)?;
    if !who.may_enqueue() {
        return Err(ManualError::Forbidden);
    }
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
