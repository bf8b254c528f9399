//! Whether a worker holds a task's current lease: the check renew and report make before they
//! write, on the locked row. Compiled once, outside the per-engine implementation, because both
//! its PostgreSQL path (`tasks/report.rs`) and SQLite's writer-thread path (`store/sqlite_sync.rs`,
//! D-gateway-hot-path-on-writer-thread) use it, and neither should import the other's engine.

use rakuten_types::{Timestamp, WorkerId};

use crate::store::StoreError;
use crate::store::sql::rows::TaskRow;

/// Checks that `worker_id` (and `token`, when given) hold the task's current, unexpired lease.
pub(crate) fn check_holder(
    row: &TaskRow,
    worker_id: &WorkerId,
    token: Option<&str>,
    now: Timestamp,
) -> Result<(), StoreError> {
    if row.lease_owner.as_deref() != Some(worker_id.as_str()) {
        return Err(StoreError::LeaseInvalid(format!(
            "worker {worker_id} does not hold the lease of task {}",
            row.task_id
        )));
    }
    if let Some(t) = token
        && row.lease_token.as_deref() != Some(t)
    {
        return Err(StoreError::LeaseInvalid(
            "lease_token is not the token of this task's current grant (an earlier grant's, or \
             one never issued)"
                .into(),
        ));
    }
    if row.status.is_terminal() {
        return Ok(());
    }
    if !row.status.is_active() {
        return Err(StoreError::LeaseInvalid(format!(
            "task {} is {}, not leased",
            row.task_id, row.status
        )));
    }
    match row.lease_expires_at {
        Some(exp) if exp > now => Ok(()),
        _ => Err(StoreError::LeaseInvalid(format!(
            "the lease of task {} has expired",
            row.task_id
        ))),
    }
}

/// The refusal of a guarded lease `UPDATE` that found the row no longer as it was read.
pub(crate) fn lease_changed_concurrently() -> StoreError {
    StoreError::LeaseInvalid("lease changed concurrently".into())
}
