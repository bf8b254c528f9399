//! A worker's lease attempt (§4.3): a reclaim's pending grant, else a re-grant of its own task,
//! else a claim of the oldest queued task whose gate is free; a queued row that cannot be decoded
//! is set aside on the way.

use rakuten_types::{TaskEvent, TaskId, TaskStatus, Timestamp};
use sqlx::Row;

use super::super::{Conn, Db, grants, reclaim};
use super::grant::{Grant, is_unique_violation};
use super::row::{load_task_locked, worker_touch};
use crate::store::dialect::Dialect;
use crate::store::operator::{GrantEnd, GrantVia};
use crate::store::sql::eq_if_set;
use crate::store::sql::leasable::{before_deadline, gate_free};
use crate::store::sql::rows::{TASK_COLUMNS, TaskRow, UNDECODABLE_ROW};
use crate::store::{LeaseAttempt, LeaseRequest, StoreError};

/// One lease attempt (§4.3): re-grant of the worker's own task, else a claim, then the heartbeat.
/// The heartbeat row is locked last, like renew and report do (task row first, then the worker
/// row), so concurrent calls of one worker on two PostgreSQL instances cannot deadlock.
pub(crate) async fn task_lease(
    conn: &mut Conn,
    req: LeaseRequest,
    now: Timestamp,
) -> Result<LeaseAttempt, StoreError> {
    let worker_id = req.worker_id.clone();
    let attempt = lease_attempt(conn, req, now).await?;
    worker_touch(conn, &worker_id, now).await?;
    Ok(attempt)
}

async fn lease_attempt(
    conn: &mut Conn,
    req: LeaseRequest,
    now: Timestamp,
) -> Result<LeaseAttempt, StoreError> {
    let now_s = now.to_rfc3339();
    let expires = now.plus(req.ttl);
    let order = Db::INSERTION_ORDER;

    // (a) A reclaim's grant its worker has not received yet: this poll receives that very grant
    // (same token and count, the lease running from now), so the count rises once per reclaim and
    // the token the operator saw is the live one.
    if let Some((task_id, count, token)) =
        reclaim::reclaimed_grant_take(conn, req.worker_id.as_str(), expires, now).await?
    {
        let id =
            TaskId::parse(&task_id).map_err(|e| StoreError::Corrupt(format!("task_id: {e}")))?;
        let row = load_task_locked(conn, &id).await?;
        // The reclaim's grant (already in the history) now runs from this poll.
        grants::grant_moved(conn, &id, expires).await?;
        let grant = Grant {
            row: &row,
            worker_id: &req.worker_id,
            gate_key: req.scope.gate_key(&row.site),
            guard: "status = 'leased'",
            guard_binds: Vec::new(),
            expires,
        };
        return Ok(LeaseAttempt::Granted(
            grant.view(conn, (count, token)).await?,
        ));
    }

    // (b) The worker's own unexpired active task comes back first, as a new grant: a grant whose
    // response was lost reaches the worker again this way (with `lease_count + 1`).
    let sql = format!(
        "SELECT {TASK_COLUMNS} FROM tasks t WHERE t.status IN ('leased','running') \
         AND t.lease_owner = $1 AND t.lease_expires_at > $2 ORDER BY t.created_at, t.{order} \
         LIMIT 1{}",
        Db::FOR_UPDATE
    );
    let own = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(req.worker_id.as_str())
        .bind(&now_s)
        .fetch_optional(&mut *conn)
        .await?;
    if let Some(row) = own {
        let row = TaskRow::decode(&row)?;
        row.status.transition(TaskEvent::Regrant)?;
        let grant = Grant {
            row: &row,
            worker_id: &req.worker_id,
            gate_key: req.scope.gate_key(&row.site),
            guard: "status IN ('leased','running') AND lease_owner = $7 AND lease_expires_at > $8",
            guard_binds: vec![req.worker_id.as_str().to_owned(), now_s],
            expires,
        };
        return match grant.set(conn, now).await {
            Ok(Some(set)) => {
                grants::grant_ended(conn, &row.task_id, GrantEnd::Regranted, now).await?;
                grant.recorded(conn, &set, GrantVia::Poll, now).await?;
                Ok(LeaseAttempt::Granted(grant.view(conn, set).await?))
            }
            Ok(None) => Err(StoreError::LeaseInvalid(
                "lease changed concurrently".into(),
            )),
            // The gate key changed with the scope setting and another task holds the new one.
            Err(e) if is_unique_violation(&e) => Ok(LeaseAttempt::GateBusy),
            Err(e) => Err(e.into()),
        };
    }

    // (c) Claim the oldest queued task whose gate is free and whose deadline has not passed.
    // SKIP LOCKED: a row another instance is claiming right now is passed over, never handed out
    // twice.
    let sql = format!(
        "SELECT {TASK_COLUMNS} FROM tasks t WHERE t.status = 'queued' AND {} AND {} AND {} \
         ORDER BY t.created_at, t.{order} LIMIT 1{}",
        eq_if_set("t.site", 1),
        gate_free(req.scope),
        before_deadline("t", 2),
        Db::SKIP_LOCKED
    );
    // A poison row (it does not decode, or its intent is not JSON) is set aside and the next
    // candidate tried, so one bad row never blocks the queue.
    let mut candidate = None;
    for _ in 0..MAX_SET_ASIDE_PER_LEASE {
        let Some(raw) = sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
            .bind(req.site.clone())
            .bind(&now_s)
            .fetch_optional(&mut *conn)
            .await?
        else {
            break;
        };
        match TaskRow::decode(&raw).and_then(|row| row.intent().map(|_| row)) {
            Ok(row) => {
                candidate = Some(row);
                break;
            }
            Err(e) => set_aside(conn, &raw.try_get::<String, _>("task_id")?, &e, now).await?,
        }
    }
    let Some(row) = candidate else {
        let sql = format!(
            "SELECT EXISTS (SELECT 1 FROM tasks t WHERE t.status = 'queued' AND {} AND {})",
            eq_if_set("t.site", 1),
            before_deadline("t", 2)
        );
        let queued: bool = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(req.site)
            .bind(&now_s)
            .fetch_one(&mut *conn)
            .await?;
        return Ok(if queued {
            LeaseAttempt::GateBusy
        } else {
            LeaseAttempt::Empty
        });
    };
    row.status.transition(TaskEvent::Lease)?;
    // The deadline again in the guarded UPDATE, against the same `now`: the row as it is when
    // written decides (D-task-not-after-expired).
    let grant = Grant {
        row: &row,
        worker_id: &req.worker_id,
        gate_key: req.scope.gate_key(&row.site),
        guard: "status = 'queued' AND (not_after IS NULL OR not_after >= $7)",
        guard_binds: vec![now_s.clone()],
        expires,
    };
    match grant.set(conn, now).await {
        Ok(Some(set)) => {
            grant.recorded(conn, &set, GrantVia::Poll, now).await?;
            Ok(LeaseAttempt::Granted(grant.view(conn, set).await?))
        }
        Ok(None) => Ok(LeaseAttempt::Empty),
        // The partial unique index `one_active_task` is the last word on the gate: another
        // instance claimed a different task at the same moment.
        Err(e) if is_unique_violation(&e) => Ok(LeaseAttempt::GateBusy),
        Err(e) => Err(e.into()),
    }
}

/// Poison rows set aside by one lease attempt at most; more wait for the next attempt.
const MAX_SET_ASIDE_PER_LEASE: usize = 16;

/// Sets a queued task whose row cannot be decoded aside: `needs_human` with the reason
/// [`UNDECODABLE_ROW`], never granted, and raises the alert.
async fn set_aside(
    conn: &mut Conn,
    task_id: &str,
    cause: &StoreError,
    now: Timestamp,
) -> Result<(), StoreError> {
    TaskStatus::Queued.transition(TaskEvent::SetAside)?;
    let done = sqlx::query(
        "UPDATE tasks SET status = 'needs_human', outcome = 'needs_human', set_aside_reason = $1, \
         updated_at = $2 WHERE task_id = $3 AND status = 'queued'",
    )
    .bind(UNDECODABLE_ROW)
    .bind(now.to_rfc3339())
    .bind(task_id)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if done != 1 {
        // Picked `SKIP LOCKED`/by the one writer, so it was queued; anything else is a real fault.
        return Err(cause.clone());
    }
    crate::jobs::alert_hooks::raise_undecodable_row(task_id, &cause.to_string());
    Ok(())
}
