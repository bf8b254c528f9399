//! The worker's hot transitions on SQLite — submit, lease, renew, report, and a submit that hands
//! its task straight to a waiting long-poll — run synchronously on the group-commit writer's own
//! thread through rusqlite (`sqlite_writer::Writer::write_sync`, D-writer-sync-transitions,
//! D-gateway-hot-path-on-writer-thread): a statement costs microseconds here, against a round trip
//! to sqlx's connection thread (tens of µs on these VMs) through sqlx.
//!
//! They keep the decisions and guards of `sql/tasks/` (which PostgreSQL still runs): every
//! status change is a conditional `UPDATE … RETURNING` that repeats [`TaskStatus::transition`]'s
//! guard, the partial unique index `one_active_task` still refuses a second active task of a gate
//! (→ [`LeaseAttempt::GateBusy`]), and the lease history (`lease_grants`) is written in the same
//! transaction. They use fewer statements: a claim picks its candidate inside its own guarded
//! `UPDATE`, a renew is one guarded `UPDATE` (the row is read only to explain a refusal), and a
//! grant's last report state comes back with the row instead of from a query of its own.
//!
//! Each function may run twice in its batch (the writer re-runs a segment with one savepoint per
//! operation after a failure, D-writer-savepoints): nothing here has an effect outside the
//! connection but the undecodable-row alert, which is idempotent.

use rakuten_types::order::{LeaseGrant, RenewAck, ReportAck, SubmitOrderAck};
use rakuten_types::{TaskEvent, TaskId, TaskStatus, Timestamp, WorkerId};
use rusqlite::{Connection, OptionalExtension, Row, params};
use sqlite_writer::WriterError;
use uuid::Uuid;

use crate::settings::LeaseScope;
use crate::store::operator::{GrantEnd, GrantVia, token_fingerprint};
use crate::store::sql::holder::{check_holder, lease_changed_concurrently};
use crate::store::sql::leasable::gate_free;
use crate::store::sql::rows::{TaskRow, UNDECODABLE_ROW, corrupt, decode_ts, order_state, ts};
use crate::store::{
    LeaseAttempt, LeaseRequest, NewReport, NewTask, RenewRequest, StoreError, check_same_task,
    idempotency_mismatch,
};

/// A rusqlite error as the store's (classified like sqlx's: busy, unavailable, unique violation).
fn db(e: rusqlite::Error) -> StoreError {
    sqlite_writer::sqlx_error(e).into()
}

fn is_unique_violation(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE)
}

/// The columns of `tasks` a transition reads (`sql::rows::TASK_COLUMNS` without the table alias,
/// so that a `RETURNING` clause can name them), `latest_state` included.
const COLUMNS: &str = "task_id, site, intent_json, intent_summary, intent_bytes, status, \
    lease_owner, lease_expires_at, lease_count, created_at, updated_at, outcome, lease_token, \
    set_aside_reason, not_after, \
    (SELECT r.state FROM task_reports r WHERE r.task_id = tasks.task_id ORDER BY r.seq DESC LIMIT 1) \
    AS latest_state";

/// [`COLUMNS`] without the intent's text (renew and report do not need it).
const HOLDER_COLUMNS: &str = "task_id, site, NULL AS intent_json, intent_summary, intent_bytes, \
    status, lease_owner, lease_expires_at, lease_count, created_at, updated_at, outcome, \
    lease_token, set_aside_reason, not_after, \
    (SELECT r.state FROM task_reports r WHERE r.task_id = tasks.task_id ORDER BY r.seq DESC LIMIT 1) \
    AS latest_state";

/// Decodes a row selected or returned with [`COLUMNS`] or [`HOLDER_COLUMNS`].
fn task_row(r: &Row<'_>) -> Result<TaskRow, StoreError> {
    let get_s = |c: &str| r.get::<_, String>(c).map_err(db);
    let get_o = |c: &str| r.get::<_, Option<String>>(c).map_err(db);
    let task_id = get_s("task_id")?;
    let status = get_s("status")?;
    let outcome = get_o("outcome")?;
    let latest = get_o("latest_state")?;
    Ok(TaskRow {
        task_id: TaskId::parse(&task_id).map_err(|e| corrupt("task_id", e))?,
        site: get_s("site")?,
        intent_json: get_o("intent_json")?,
        intent_summary: get_o("intent_summary")?,
        intent_bytes: r.get("intent_bytes").map_err(db)?,
        status: status.parse().map_err(|e| corrupt("status", e))?,
        lease_owner: get_o("lease_owner")?,
        lease_expires_at: decode_ts(get_o("lease_expires_at")?)?,
        lease_count: r.get("lease_count").map_err(db)?,
        created_at: ts(&get_s("created_at")?)?,
        updated_at: ts(&get_s("updated_at")?)?,
        outcome: outcome
            .map(|o| o.parse().map_err(|e| corrupt("outcome", e)))
            .transpose()?,
        lease_token: get_o("lease_token")?,
        latest_state: latest.as_deref().map(order_state).transpose()?,
        set_aside_reason: get_o("set_aside_reason")?,
        not_after: decode_ts(get_o("not_after")?)?,
    })
}

/// The task `task_id` as [`HOLDER_COLUMNS`] or [`COLUMNS`] (`cols`), if it exists.
fn load(db_: &Connection, task_id: &str, cols: &str) -> Result<Option<TaskRow>, StoreError> {
    let sql = format!("SELECT {cols} FROM tasks WHERE task_id = ?1");
    let mut st = db_.prepare_cached(&sql).map_err(db)?;
    let mut rows = st.query(params![task_id]).map_err(db)?;
    match rows.next().map_err(db)? {
        Some(r) => task_row(r).map(Some),
        None => Ok(None),
    }
}

fn worker_touch(db_: &Connection, worker_id: &WorkerId, now: &str) -> Result<(), StoreError> {
    // The maximum: a heartbeat never moves backwards.
    db_.prepare_cached(
        "INSERT INTO workers (worker_id, last_seen_at) VALUES (?1, ?2) \
         ON CONFLICT (worker_id) DO UPDATE \
         SET last_seen_at = MAX(workers.last_seen_at, EXCLUDED.last_seen_at), retired_at = NULL",
    )
    .and_then(|mut st| st.execute(params![worker_id.as_str(), now]))
    .map_err(db)?;
    Ok(())
}

/// `sql::grants::grant_opened` on the writer's thread.
#[allow(clippy::too_many_arguments)]
fn grant_opened(
    db_: &Connection,
    task_id: &str,
    grant_no: i64,
    worker_id: &str,
    via: GrantVia,
    token: &str,
    expires: &str,
    now: &str,
) -> Result<(), StoreError> {
    db_.prepare_cached(
        "INSERT INTO lease_grants (task_id, grant_no, worker_id, via, token_fp, granted_at, \
         expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .and_then(|mut st| {
        st.execute(params![
            task_id,
            grant_no,
            worker_id,
            via.as_str(),
            token_fingerprint(token),
            now,
            expires
        ])
    })
    .map_err(db)?;
    Ok(())
}

/// `sql::grants::grant_ended` on the writer's thread.
fn grant_ended(
    db_: &Connection,
    task_id: &str,
    how: GrantEnd,
    now: &str,
) -> Result<(), StoreError> {
    db_.prepare_cached(
        "UPDATE lease_grants SET ended_at = ?1, ended_how = ?2 \
         WHERE task_id = ?3 AND ended_at IS NULL",
    )
    .and_then(|mut st| st.execute(params![now, how.as_str(), task_id]))
    .map_err(db)?;
    Ok(())
}

/// `POST /api/orders` (§4.2), as `sql::tasks::task_insert`: insert or find, the deadline decided
/// in the insert itself (D-task-not-after-expired).
pub(crate) fn task_insert(
    db_: &Connection,
    task: &NewTask,
    now: Timestamp,
) -> Result<SubmitOrderAck, StoreError> {
    let before_deadline = task.not_after.is_none_or(|t| t > now);
    let summary = rakuten_types::intent::IntentJson::from_text(task.intent_json.clone())
        .ok()
        .and_then(|i| rakuten_types::intent::OrderIntent::parse_json(&i).ok())
        .and_then(|i| serde_json::to_string(&i.summary()).ok());
    let bytes = i64::try_from(task.intent_json.len()).unwrap_or(i64::MAX);
    let inserted = db_
        .prepare_cached(
            "INSERT INTO tasks (task_id, site, intent_json, intent_summary, intent_bytes, status, \
             lease_count, created_at, updated_at, not_after) \
             SELECT ?1, ?2, ?3, ?4, ?5, 'queued', 0, ?6, ?6, ?7 WHERE ?8 = 1 \
             ON CONFLICT (task_id) DO NOTHING",
        )
        .and_then(|mut st| {
            st.execute(params![
                task.task_id.as_str(),
                task.site,
                task.intent_json,
                summary,
                bytes,
                now.to_rfc3339(),
                task.not_after.map(|t| t.to_rfc3339()),
                i32::from(before_deadline)
            ])
        })
        .map_err(db)?;
    if inserted == 1 {
        return Ok(SubmitOrderAck {
            task_id: task.task_id.clone(),
            status: TaskStatus::Queued,
            created: true,
        });
    }
    let Some(existing) = load(db_, task.task_id.as_str(), COLUMNS)? else {
        return Err(match task.not_after {
            Some(not_after) if !before_deadline => StoreError::DeadlinePassed { not_after, now },
            _ => StoreError::TaskNotFound(task.task_id.clone()),
        });
    };
    let stored = existing.intent_json.as_deref().unwrap_or_default();
    check_same_task(task, &existing.site, stored)?;
    if existing.not_after != task.not_after {
        return Err(idempotency_mismatch(
            "task_id",
            task.task_id.as_str(),
            "not_after",
        ));
    }
    Ok(SubmitOrderAck {
        task_id: existing.task_id,
        status: existing.status,
        created: false,
    })
}

/// A submit that a waiting long-poll may take at once (D-handoff-in-submit-commit): the insert,
/// then — only when it created the task — `waiter`'s lease attempt, in the submit's own
/// operation, so the grant commits with the task and both answers leave after that one commit.
pub(crate) fn task_insert_handing(
    db_: &Connection,
    task: &NewTask,
    waiter: &LeaseRequest,
    now: Timestamp,
) -> Result<(SubmitOrderAck, Option<LeaseAttempt>), StoreError> {
    let ack = task_insert(db_, task, now)?;
    if !ack.created {
        return Ok((ack, None));
    }
    // The attempt in a savepoint of its own: when it fails, only it is rolled back and the
    // submit still commits (the poll then runs an attempt of its own).
    db_.execute_batch("SAVEPOINT handoff").map_err(db)?;
    match task_lease(db_, waiter, now) {
        Ok(attempt) => {
            db_.execute_batch("RELEASE handoff").map_err(db)?;
            Ok((ack, Some(attempt)))
        }
        Err(e) if e.is_storage_failure() => Err(e),
        Err(_) => {
            db_.execute_batch("ROLLBACK TO handoff; RELEASE handoff")
                .map_err(db)?;
            Ok((ack, None))
        }
    }
}

/// One lease attempt (§4.3), as `sql::tasks::task_lease`: the worker's pending reclaim grant or
/// own active task first, else a claim of the oldest leasable queued task; then the heartbeat.
pub(crate) fn task_lease(
    db_: &Connection,
    req: &LeaseRequest,
    now: Timestamp,
) -> Result<LeaseAttempt, StoreError> {
    let now_s = now.to_rfc3339();
    let attempt = lease_attempt(db_, req, now, &now_s)?;
    worker_touch(db_, &req.worker_id, &now_s)?;
    Ok(attempt)
}

fn lease_attempt(
    db_: &Connection,
    req: &LeaseRequest,
    now: Timestamp,
    now_s: &str,
) -> Result<LeaseAttempt, StoreError> {
    let expires = now.plus(req.ttl);
    let expires_s = expires.to_rfc3339();
    let worker = req.worker_id.as_str();

    // (a) and (b) of `sql::tasks::lease_attempt` in one read: the worker's unexpired active
    // tasks, a reclaim's grant it has not received yet first.
    let own = {
        let sql = format!(
            "SELECT {COLUMNS}, (status = 'leased' AND reclaim_pending = 1) AS reclaimed \
             FROM tasks WHERE status IN ('leased','running') AND lease_owner = ?1 \
             AND lease_expires_at > ?2 ORDER BY reclaimed DESC, created_at, rowid LIMIT 1"
        );
        let mut st = db_.prepare_cached(&sql).map_err(db)?;
        let mut rows = st.query(params![worker, now_s]).map_err(db)?;
        match rows.next().map_err(db)? {
            Some(r) => Some((task_row(r)?, r.get::<_, bool>("reclaimed").map_err(db)?)),
            None => None,
        }
    };
    if let Some((row, reclaimed)) = own {
        return if reclaimed {
            reclaimed_grant(db_, row, &expires_s, now_s, expires)
        } else {
            regrant(db_, req, row, &expires_s, now_s, expires)
        };
    }
    claim(db_, req, now_s, &expires_s, expires)
}

/// (a) A reclaim's grant its worker has not received yet: this poll receives that very grant
/// (same token and count), the lease running from now.
fn reclaimed_grant(
    db_: &Connection,
    row: TaskRow,
    expires_s: &str,
    now_s: &str,
    expires: Timestamp,
) -> Result<LeaseAttempt, StoreError> {
    let taken = db_
        .prepare_cached(
            "UPDATE tasks SET reclaim_pending = 0, lease_expires_at = ?1, updated_at = ?2 \
             WHERE task_id = ?3 AND status = 'leased' AND reclaim_pending = 1 \
             RETURNING lease_count, lease_token",
        )
        .and_then(|mut st| {
            st.query_row(params![expires_s, now_s, row.task_id.as_str()], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })
            .optional()
        })
        .map_err(db)?;
    let Some((count, token)) = taken else {
        return Err(lease_changed_concurrently());
    };
    // The reclaim's grant (already in the history) now runs from this poll.
    db_.prepare_cached(
        "UPDATE lease_grants SET expires_at = ?1 WHERE task_id = ?2 AND ended_at IS NULL",
    )
    .and_then(|mut st| st.execute(params![expires_s, row.task_id.as_str()]))
    .map_err(db)?;
    Ok(LeaseAttempt::Granted(grant_view(
        &row, expires, count, token,
    )?))
}

/// (b) The worker's own unexpired active task comes back as a new grant (`lease_count + 1`).
fn regrant(
    db_: &Connection,
    req: &LeaseRequest,
    row: TaskRow,
    expires_s: &str,
    now_s: &str,
    expires: Timestamp,
) -> Result<LeaseAttempt, StoreError> {
    row.status.transition(TaskEvent::Regrant)?;
    let token = Uuid::now_v7().to_string();
    let set = db_
        .prepare_cached(
            "UPDATE tasks SET status = 'leased', lease_owner = ?1, lease_expires_at = ?2, \
             lease_count = lease_count + 1, lease_token = ?3, gate_key = ?4, updated_at = ?5 \
             WHERE task_id = ?6 AND status IN ('leased','running') AND lease_owner = ?1 \
             AND lease_expires_at > ?5 RETURNING lease_count",
        )
        .and_then(|mut st| {
            st.query_row(
                params![
                    req.worker_id.as_str(),
                    expires_s,
                    token,
                    req.scope.gate_key(&row.site),
                    now_s,
                    row.task_id.as_str()
                ],
                |r| r.get::<_, i64>(0),
            )
            .optional()
        });
    let count = match set {
        Ok(Some(count)) => count,
        Ok(None) => return Err(lease_changed_concurrently()),
        // The gate key changed with the scope setting and another task holds the new one.
        Err(e) if is_unique_violation(&e) => return Ok(LeaseAttempt::GateBusy),
        Err(e) => return Err(db(e)),
    };
    let task_id = row.task_id.as_str();
    grant_ended(db_, task_id, GrantEnd::Regranted, now_s)?;
    grant_opened(
        db_,
        task_id,
        count,
        req.worker_id.as_str(),
        GrantVia::Poll,
        &token,
        expires_s,
        now_s,
    )?;
    Ok(LeaseAttempt::Granted(grant_view(
        &row, expires, count, token,
    )?))
}

/// (c) Claims the oldest queued task whose gate is free and whose deadline has not passed, in
/// one guarded `UPDATE` that picks it. A claimed row that does not decode (or whose intent is
/// not JSON) is set aside instead and the next one tried, so one bad row never blocks the queue.
fn claim(
    db_: &Connection,
    req: &LeaseRequest,
    now_s: &str,
    expires_s: &str,
    expires: Timestamp,
) -> Result<LeaseAttempt, StoreError> {
    TaskStatus::Queued.transition(TaskEvent::Lease)?;
    // The global gate's key is one constant; a per-site gate's is the row's own site.
    let gate_key = match req.scope {
        LeaseScope::Global => Some(LeaseScope::Global.gate_key("")),
        LeaseScope::Site => None,
    };
    let sql = format!(
        "UPDATE tasks SET status = 'leased', lease_owner = ?1, lease_expires_at = ?2, \
         lease_count = lease_count + 1, lease_token = ?3, gate_key = COALESCE(?4, site), \
         updated_at = ?5 \
         WHERE task_id = (SELECT t.task_id FROM tasks t WHERE t.status = 'queued' \
           AND (?6 IS NULL OR t.site = ?6) AND {} \
           AND (t.not_after IS NULL OR t.not_after >= ?5) ORDER BY t.created_at, t.rowid LIMIT 1) \
         AND status = 'queued' AND (not_after IS NULL OR not_after >= ?5) \
         RETURNING {COLUMNS}",
        gate_free(req.scope)
    );
    for _ in 0..MAX_SET_ASIDE_PER_LEASE {
        let token = Uuid::now_v7().to_string();
        let claimed = {
            let mut st = db_.prepare_cached(&sql).map_err(db)?;
            let mut rows = match st.query(params![
                req.worker_id.as_str(),
                expires_s,
                token,
                gate_key,
                now_s,
                req.site
            ]) {
                Ok(rows) => rows,
                Err(e) if is_unique_violation(&e) => return Ok(LeaseAttempt::GateBusy),
                Err(e) => return Err(db(e)),
            };
            match rows.next() {
                Ok(Some(r)) => Some(
                    task_row(r)
                        .and_then(|row| row.intent().map(|_| row))
                        .map_err(|e| (e, r.get::<_, String>("task_id").ok())),
                ),
                Ok(None) => None,
                // The partial unique index `one_active_task` is the last word on the gate.
                Err(e) if is_unique_violation(&e) => return Ok(LeaseAttempt::GateBusy),
                Err(e) => return Err(db(e)),
            }
        };
        match claimed {
            Some(Ok(row)) => {
                let task_id = row.task_id.as_str();
                let count = row.lease_count;
                grant_opened(
                    db_,
                    task_id,
                    count,
                    req.worker_id.as_str(),
                    GrantVia::Poll,
                    &token,
                    expires_s,
                    now_s,
                )?;
                return Ok(LeaseAttempt::Granted(grant_view(
                    &row, expires, count, token,
                )?));
            }
            Some(Err((cause, Some(task_id)))) => set_aside(db_, &task_id, &token, &cause, now_s)?,
            Some(Err((cause, None))) => return Err(cause),
            None => break,
        }
    }
    let queued: bool = db_
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM tasks t WHERE t.status = 'queued' \
             AND (?1 IS NULL OR t.site = ?1) AND (t.not_after IS NULL OR t.not_after >= ?2))",
        )
        .and_then(|mut st| st.query_row(params![req.site, now_s], |r| r.get(0)))
        .map_err(db)?;
    Ok(if queued {
        LeaseAttempt::GateBusy
    } else {
        LeaseAttempt::Empty
    })
}

/// Poison rows set aside by one lease attempt at most; more wait for the next attempt.
const MAX_SET_ASIDE_PER_LEASE: usize = 16;

/// Sets a queued task whose row cannot be decoded aside (`needs_human`, reason
/// [`UNDECODABLE_ROW`]) and raises the alert. The claim has just granted it under `token`; the
/// same statement takes that grant back, leaving the lease columns as a queued task has them
/// (never leased: nothing returns to `queued`), so the row ends as if set aside while queued.
fn set_aside(
    db_: &Connection,
    task_id: &str,
    token: &str,
    cause: &StoreError,
    now_s: &str,
) -> Result<(), StoreError> {
    TaskStatus::Queued.transition(TaskEvent::SetAside)?;
    let done = db_
        .prepare_cached(
            "UPDATE tasks SET status = 'needs_human', outcome = 'needs_human', \
             set_aside_reason = ?1, updated_at = ?2, lease_owner = NULL, lease_expires_at = NULL, \
             lease_token = NULL, gate_key = NULL, lease_count = lease_count - 1 \
             WHERE task_id = ?3 AND status = 'leased' AND lease_token = ?4",
        )
        .and_then(|mut st| st.execute(params![UNDECODABLE_ROW, now_s, task_id, token]))
        .map_err(db)?;
    if done != 1 {
        return Err(cause.clone());
    }
    crate::jobs::alert_hooks::raise_undecodable_row(task_id, &cause.to_string());
    Ok(())
}

/// The grant as the worker sees it; the row's last report state was read with it.
fn grant_view(
    row: &TaskRow,
    expires: Timestamp,
    lease_count: i64,
    lease_token: String,
) -> Result<LeaseGrant, StoreError> {
    Ok(LeaseGrant {
        task_id: row.task_id.clone(),
        site: row.site.clone(),
        intent: row.intent()?,
        lease_expires_at: expires,
        lease_count,
        known_state: row.latest_state,
        lease_token,
    })
}

/// `POST /api/orders/{id}/renew` (§4.4), as `sql::tasks::task_renew`: one guarded `UPDATE`; the
/// row is read only when it refuses, to say why.
pub(crate) fn task_renew(
    db_: &Connection,
    req: &RenewRequest,
    now: Timestamp,
) -> Result<RenewAck, StoreError> {
    let now_s = now.to_rfc3339();
    let expires = now.plus(req.ttl);
    let expires_s = expires.to_rfc3339();
    let task_id = req.task_id.as_str();
    let renewed = db_
        .prepare_cached(
            "UPDATE tasks SET lease_expires_at = ?1, updated_at = ?2 WHERE task_id = ?3 \
             AND status IN ('leased','running') AND lease_owner = ?4 \
             AND (?5 IS NULL OR lease_token = ?5) AND lease_expires_at > ?2",
        )
        .and_then(|mut st| {
            st.execute(params![
                expires_s,
                now_s,
                task_id,
                req.worker_id.as_str(),
                req.lease_token
            ])
        })
        .map_err(db)?;
    if renewed != 1 {
        let row = load(db_, task_id, HOLDER_COLUMNS)?
            .ok_or_else(|| StoreError::TaskNotFound(req.task_id.clone()))?;
        check_holder(&row, &req.worker_id, req.lease_token.as_deref(), now)?;
        if row.status.is_terminal() {
            return Err(StoreError::LeaseInvalid(format!(
                "task {} is {}; nothing to renew",
                row.task_id, row.status
            )));
        }
        return Err(lease_changed_concurrently());
    }
    db_.prepare_cached(
        "UPDATE lease_grants SET expires_at = ?1, renewals = renewals + 1, last_renewed_at = ?2 \
         WHERE task_id = ?3 AND ended_at IS NULL",
    )
    .and_then(|mut st| st.execute(params![expires_s, now_s, task_id]))
    .map_err(db)?;
    worker_touch(db_, &req.worker_id, &now_s)?;
    Ok(RenewAck {
        task_id: req.task_id.clone(),
        lease_expires_at: expires,
    })
}

/// `POST /api/orders/{id}/report` (§4.5), as `sql::tasks::task_report`.
pub(crate) fn task_report(
    db_: &Connection,
    r: &NewReport,
    now: Timestamp,
) -> Result<ReportAck, StoreError> {
    let task_id = r.task_id.as_str();
    let row = load(db_, task_id, HOLDER_COLUMNS)?
        .ok_or_else(|| StoreError::TaskNotFound(r.task_id.clone()))?;
    check_holder(&row, &r.worker_id, r.lease_token.as_deref(), now)?;
    let now_s = now.to_rfc3339();
    let status = if row.status.is_terminal() {
        // Post-terminal monitoring (§6): appended, the status stays.
        row.status
    } else {
        let event = match r.outcome {
            Some(o) => TaskEvent::Finish(o),
            None => TaskEvent::Report,
        };
        let next = row.status.transition(event)?;
        let done = db_
            .prepare_cached(
                "UPDATE tasks SET status = ?1, outcome = ?2, updated_at = ?3 WHERE task_id = ?4 \
                 AND status IN ('leased','running') AND lease_owner = ?5 AND lease_token = ?6 \
                 AND lease_expires_at > ?3",
            )
            .and_then(|mut st| {
                st.execute(params![
                    next.as_str(),
                    r.outcome.map(|o| o.as_str()),
                    now_s,
                    task_id,
                    r.worker_id.as_str(),
                    row.lease_token
                ])
            })
            .map_err(db)?;
        if done != 1 {
            return Err(lease_changed_concurrently());
        }
        if next.is_terminal() {
            // The final report ends the grant; later monitoring reports (§6) do not reopen it.
            grant_ended(db_, task_id, GrantEnd::Reported, &now_s)?;
        }
        next
    };
    let duplicate: bool = db_
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM task_reports WHERE task_id = ?1 AND state = ?2)",
        )
        .and_then(|mut st| st.query_row(params![task_id, r.state.as_str()], |row| row.get(0)))
        .map_err(db)?;
    // The writer is the database's one writer, so MAX(seq) + 1 cannot race.
    db_.prepare_cached(
        "INSERT INTO task_reports (task_id, state, payable_yen, pay_deadline, site_order_id, \
         evidence_ref, detail, reported_at, error_code, worker_id, seq) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, \
                 (SELECT COALESCE(MAX(seq), 0) + 1 FROM task_reports WHERE task_id = ?1)) \
         ON CONFLICT (task_id, state) DO UPDATE SET \
         payable_yen = COALESCE(EXCLUDED.payable_yen, task_reports.payable_yen), \
         pay_deadline = COALESCE(EXCLUDED.pay_deadline, task_reports.pay_deadline), \
         site_order_id = COALESCE(EXCLUDED.site_order_id, task_reports.site_order_id), \
         evidence_ref = COALESCE(EXCLUDED.evidence_ref, task_reports.evidence_ref), \
         detail = COALESCE(EXCLUDED.detail, task_reports.detail), \
         error_code = COALESCE(EXCLUDED.error_code, task_reports.error_code), \
         worker_id = EXCLUDED.worker_id",
    )
    .and_then(|mut st| {
        st.execute(params![
            task_id,
            r.state.as_str(),
            r.payable_yen,
            r.pay_deadline.map(|t| t.to_rfc3339()),
            r.site_order_id,
            r.evidence_ref,
            r.detail,
            now_s,
            r.error_code,
            r.worker_id.as_str()
        ])
    })
    .map_err(db)?;
    if !duplicate {
        // A new state takes the next `seq`: it is the task's latest (D-latest-state-on-the-task).
        db_.prepare_cached("UPDATE tasks SET latest_state = ?1 WHERE task_id = ?2")
            .and_then(|mut st| st.execute(params![r.state.as_str(), task_id]))
            .map_err(db)?;
    }
    worker_touch(db_, &r.worker_id, &now_s)?;
    Ok(ReportAck {
        task_id: r.task_id.clone(),
        status,
        state: r.state,
        duplicate,
    })
}
