//! Manual writes: enqueue (merges; ignores the manual trigger's daily quota and 24 h dedupe),
//! close and retrigger. Each checks the role, the reason and the task-type range, then calls the
//! store, which checks scope and state in one transaction.

use rakuten_types::Timestamp;

use super::{MAX_REASON_CHARS, TriggerType};
use crate::domain::{Account, Action, AssetRef, Denied, TaskTypes, authorize};
use crate::store::{Demand, EnqueuedItem, ItemStore, StoreError};

impl From<Denied> for ManualError {
    fn from(_: Denied) -> Self {
        ManualError::Forbidden
    }
}

/// Why a manual write was refused before reaching the store.
#[derive(Debug, thiserror::Error)]
pub enum ManualError {
    /// The role or permission does not allow this write.
    #[error("this account may not do this")]
    Forbidden,
    /// Bad input (reason, task types).
    #[error("{0}")]
    Invalid(String),
    /// The store refused.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Checks a required reason: 1–500 characters after trimming, not blank or invisible only, no
/// control characters (line breaks included) and no bidirectional controls: the gateway's rule
/// ([`rakuten_types::text::reason`]) on one line.
///
/// # Errors
/// [`ManualError::Invalid`].
pub fn parse_reason(reason: Option<&str>) -> Result<String, ManualError> {
    let r = rakuten_types::text::reason(reason.unwrap_or(""), MAX_REASON_CHARS)
        .map_err(ManualError::Invalid)?;
    if r.contains(['\n', '\r', '\t']) {
        return Err(ManualError::Invalid(
            "reason contains control characters".into(),
        ));
    }
    Ok(r)
}

/// A manual enqueue request.
#[derive(Debug, Clone, Copy)]
pub struct ManualRequest<'a> {
    /// The asset.
    pub asset: &'a AssetRef,
    /// Task types; empty means every configured task type.
    pub task_types: &'a [String],
    /// Required reason.
    pub reason: Option<&'a str>,
    /// Optional idempotency key: the same key again from the same account is a replay.
    pub event_id: Option<&'a str>,
}

/// Manual enqueue for an asset: merges into active items, never refused for quota or dedupe.
///
/// # Errors
/// Forbidden role, bad reason or task type, asset not found or out of scope (identical).
pub async fn enqueue(
    store: &dyn ItemStore,
    configured: &TaskTypes,
    who: &Account,
    req: ManualRequest<'_>,
    now: Timestamp,
) -> Result<Vec<EnqueuedItem>, ManualError> {
    let ManualRequest {
        asset,
        task_types,
        reason,
        event_id,
    } = req;
    let scope = authorize(who, Action::Enqueue)?;
    let reason = parse_reason(reason)?;
    let task_types = if task_types.is_empty() {
        configured.names()
    } else {
        for tt in task_types {
            if configured.get(tt).is_none() {
                return Err(ManualError::Invalid(format!("unknown task type {tt:?}")));
            }
        }
        // The same task type twice counts once (one item, one audit fact), in first-seen order.
        let mut seen = std::collections::HashSet::new();
        task_types
            .iter()
            .filter(|tt| seen.insert(tt.as_str()))
            .cloned()
            .collect()
    };
    let event_id = match event_id {
        Some(e) => format!("manual:{}:{e}", who.id),
        None => format!("manual:{}", uuid::Uuid::now_v7()),
    };
    let demand = Demand {
        trigger_type: TriggerType::ManualTrigger,
        source: format!("manual:{}", who.id),
        event_id,
        operator: Some(who.id.clone()),
        reason: Some(reason),
        task_types,
    };
    Ok(store
        .item_enqueue_manual(&scope, asset, &demand, now)
        .await?)
}

/// Manual close of an active item.
///
/// # Errors
/// Forbidden role, missing reason, not found/out of scope, not active (conflict).
pub async fn close(
    store: &dyn ItemStore,
    who: &Account,
    id: i64,
    reason: Option<&str>,
    now: Timestamp,
) -> Result<(), ManualError> {
    let scope = authorize(who, Action::Close)?;
    let reason = parse_reason(reason)?;
    Ok(store.item_close(&scope, id, &who.id, &reason, now).await?)
}

/// Manual retrigger of a failed or expired item: a new active item for its card and task type.
///
/// # Errors
/// Forbidden role, missing reason, not found/out of scope, wrong state or task type no longer
/// configured (conflict), card gone (conflict).
pub async fn retrigger(
    store: &dyn ItemStore,
    configured: &TaskTypes,
    who: &Account,
    id: i64,
    reason: Option<&str>,
    now: Timestamp,
) -> Result<EnqueuedItem, ManualError> {
    let scope = authorize(who, Action::Enqueue)?;
    let reason = parse_reason(reason)?;
    let item = store
        .item_get(&scope, id)
        .await?
        .ok_or(StoreError::NotFound)?
        .item;
    if configured.get(&item.task_type).is_none() {
        return Err(StoreError::Conflict(format!(
            "task type {} is not configured any more",
            item.task_type
        ))
        .into());
    }
    Ok(store
        .item_retrigger(&scope, id, &who.id, &reason, now)
        .await?)
}
