//! The operator's reclaim of a stale task (§5): a grant for a named worker, refused while another
//! task holds the gate, with its audit row.

use rakuten_types::order::LeaseGrant;
use rakuten_types::{TaskEvent, Timestamp};

use super::super::{Conn, reclaim};
use super::grant::{Grant, is_unique_violation};
use super::row::load_task_locked;
use crate::store::operator::GrantVia;
use crate::store::{ReclaimRequest, StoreError};

/// `POST /api/orders/{id}/reclaim` (§5).
pub(crate) async fn task_reclaim(
    conn: &mut Conn,
    req: ReclaimRequest,
    now: Timestamp,
) -> Result<LeaseGrant, StoreError> {
    let row = load_task_locked(conn, &req.task_id).await?;
    if row.status.transition(TaskEvent::Reclaim).is_err() {
        return Err(StoreError::StateConflict {
            status: row.status,
            reason: "only a stale task can be reclaimed".into(),
        });
    }
    let gate_key = req.scope.gate_key(&row.site);
    let holder: Option<String> = sqlx::query_scalar(
        "SELECT task_id FROM tasks WHERE status IN ('leased','running') AND gate_key = $1 LIMIT 1",
    )
    .bind(&gate_key)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(other) = holder {
        return Err(StoreError::GateBusy(format!(
            "task {other} is active; reclaiming now would make two active tasks"
        )));
    }
    let grant = Grant {
        row: &row,
        worker_id: &req.worker_id,
        gate_key,
        guard: "status = 'stale'",
        guard_binds: Vec::new(),
        expires: now.plus(req.ttl),
    };
    match grant.set(conn, now).await {
        Ok(Some(set)) => {
            grant.recorded(conn, &set, GrantVia::Reclaim, now).await?;
            reclaim::reclaim_recorded(
                conn,
                &row.task_id,
                req.worker_id.as_str(),
                set.0,
                &req.actor,
                &req.reason,
                now,
            )
            .await?;
            grant.view(conn, set).await
        }
        Ok(None) => Err(StoreError::StateConflict {
            status: row.status,
            reason: "the task changed concurrently".into(),
        }),
        Err(e) if is_unique_violation(&e) => {
            Err(StoreError::GateBusy("another task became active".into()))
        }
        Err(e) => Err(e.into()),
    }
}
