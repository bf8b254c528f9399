//! The order task transitions (§4.2–§5). Each runs inside one transaction of its own (PostgreSQL)
//! or one SAVEPOINT of a group commit (SQLite, the [`sqlite_writer`] crate); each decides with
//! [`TaskStatus::transition`] and repeats the guard in SQL (`UPDATE … WHERE status IN (…) AND
//! lease_owner = $n … RETURNING`), so a lost race, also one against another gateway instance, is a
//! typed error, never a silent no-op.
//!
//! Concurrency between PostgreSQL instances (READ COMMITTED), through the dialect:
//! - rows a transition reads before it writes are locked (`FOR UPDATE`), so renew, report,
//!   reclaim and the sweeper serialize per task;
//! - a claim picks the oldest queued task `FOR UPDATE SKIP LOCKED`, so two instances never pick
//!   the same row, and the partial unique index `one_active_task` refuses the second of two
//!   different rows (unique violation → [`LeaseAttempt::GateBusy`]);
//! - the sweeper takes only rows nobody holds (`SKIP LOCKED`), so when every instance sweeps at
//!   once each lapsed lease turns `stale` exactly once, reported by the instance that did it.

//!
//! SQLite runs submit, lease, renew and report on its writer's own thread instead
//! (`store/sqlite_sync.rs`, D-gateway-hot-path-on-writer-thread), with the same guards; its copy of
//! those functions here is unused.
#![allow(
    dead_code,
    reason = "compiled for both engines; SQLite's hot transitions are in store/sqlite_sync.rs"
)]

use rakuten_types::order::{LeaseGrant, RenewAck, ReportAck, SubmitOrderAck};
use rakuten_types::{OrderState, TaskEvent, TaskId, TaskStatus, Timestamp, WorkerId};
use sqlx::Row;
use uuid::Uuid;

use super::{Conn, Db};
use crate::store::sql::leasable::{before_deadline, gate_free};
use super::{grants, reclaim};
use crate::store::dialect::Dialect;
use crate::store::sql::eq_if_set;
use crate::store::sql::rows::{
    TASK_COLUMNS, TaskRow, UNDECODABLE_ROW, decode_ts, order_state, ts,
};
use crate::store::operator::{GrantEnd, GrantVia};
use crate::store::{
    ExpiredTask, LeaseAttempt, LeaseRequest, NewReport, NewTask, ReclaimRequest, RenewRequest,
    StaleTask, StoreError,
};

fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.kind() == sqlx::error::ErrorKind::UniqueViolation)
}

/// Loads a task; `lock` also locks its row until the transaction ends (PostgreSQL).
async fn load_task(
    conn: &mut Conn,
    task_id: &TaskId,
    lock: bool,
) -> Result<Option<TaskRow>, StoreError> {
    let lock = if lock { Db::FOR_UPDATE } else { "" };
    let sql = format!("SELECT {TASK_COLUMNS} FROM tasks t WHERE t.task_id = $1{lock}");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(task_id.as_str())
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(TaskRow::decode).transpose()
}

async fn load_task_locked(conn: &mut Conn, task_id: &TaskId) -> Result<TaskRow, StoreError> {
    load_task(conn, task_id, true)
        .await?
        .ok_or_else(|| StoreError::TaskNotFound(task_id.clone()))
}

async fn latest_state(conn: &mut Conn, task_id: &str) -> Result<Option<OrderState>, StoreError> {
    let s: Option<String> = sqlx::query_scalar(
        "SELECT state FROM task_reports WHERE task_id = $1 ORDER BY seq DESC LIMIT 1",
    )
    .bind(task_id)
    .fetch_optional(&mut *conn)
    .await?;
    s.as_deref().map(order_state).transpose()
}

async fn worker_touch(
    conn: &mut Conn,
    worker_id: &WorkerId,
    now: Timestamp,
) -> Result<(), StoreError> {
    // The maximum: instances' clocks may differ slightly; a heartbeat never moves backwards.
    let sql = format!(
        "INSERT INTO workers (worker_id, last_seen_at) VALUES ($1, $2) \
         ON CONFLICT (worker_id) DO UPDATE \
         SET last_seen_at = {}(workers.last_seen_at, EXCLUDED.last_seen_at), retired_at = NULL",
        Db::GREATEST
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(worker_id.as_str())
        .bind(now.to_rfc3339())
        .execute(&mut *conn)
        .await?;
    Ok(())
}

fn new_token() -> String {
    Uuid::now_v7().to_string()
}

/// `POST /api/orders` (§4.2): insert or find. A new task is inserted only while its `not_after`
/// (if any) lies ahead of `now`, decided in the same statement, so the retry of a submit whose
/// answer was lost still finds its task after the deadline (D-task-not-after-expired).
pub(crate) async fn task_insert(
    conn: &mut Conn,
    task: NewTask,
    now: Timestamp,
) -> Result<SubmitOrderAck, StoreError> {
    let before_deadline = task.not_after.is_none_or(|t| t > now);
    // What lists show of the intent, written once (D-list-pages-bounded); none for a text that is
    // not a checked intent (only a store-level caller can send one).
    let summary = rakuten_types::intent::IntentJson::from_text(task.intent_json.clone())
        .ok()
        .and_then(|i| rakuten_types::intent::OrderIntent::parse_json(&i).ok())
        .and_then(|i| serde_json::to_string(&i.summary()).ok());
    let bytes = i64::try_from(task.intent_json.len()).unwrap_or(i64::MAX);
    let inserted = sqlx::query(
        "INSERT INTO tasks (task_id, site, intent_json, intent_summary, intent_bytes, status, \
         lease_count, created_at, updated_at, not_after) \
         SELECT $1, $2, $3, $4, $5, 'queued', 0, $6, $6, $7 WHERE $8 = 1 \
         ON CONFLICT (task_id) DO NOTHING",
    )
    .bind(task.task_id.as_str())
    .bind(&task.site)
    .bind(&task.intent_json)
    .bind(summary)
    .bind(bytes)
    .bind(now.to_rfc3339())
    .bind(task.not_after.map(|t| t.to_rfc3339()))
    .bind(i32::from(before_deadline))
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if inserted == 1 {
        return Ok(SubmitOrderAck {
            task_id: task.task_id,
            status: TaskStatus::Queued,
            created: true,
        });
    }
    let Some(existing) = load_task(conn, &task.task_id, false).await? else {
        return Err(match task.not_after {
            Some(not_after) if !before_deadline => StoreError::DeadlinePassed { not_after, now },
            _ => StoreError::TaskNotFound(task.task_id.clone()),
        });
    };
    // Same transaction as the insert: the row's site, intent and deadline never change after
    // insert.
    let stored = existing.intent_json.as_deref().unwrap_or_default();
    crate::store::check_same_task(&task, &existing.site, stored)?;
    if existing.not_after != task.not_after {
        return Err(crate::store::idempotency_mismatch(
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

/// A fresh grant to set on a task already selected (and locked) by the caller.
struct Grant<'a> {
    row: &'a TaskRow,
    worker_id: &'a WorkerId,
    gate_key: String,
    /// The SQL condition the row must still meet; its parameters start at `$7`.
    guard: &'static str,
    guard_binds: Vec<String>,
    expires: Timestamp,
}

impl Grant<'_> {
    /// Sets the grant: `(lease_count, lease_token)`, or `None` when the guard no longer holds. A
    /// unique violation (the gate is taken) rolls back only this statement, so the rest of the
    /// transaction (the heartbeat) still commits.
    async fn set(
        &self,
        conn: &mut Conn,
        now: Timestamp,
    ) -> Result<Option<(i64, String)>, sqlx::Error> {
        if Db::SAVEPOINT_AROUND_CONFLICT {
            sqlx::query("SAVEPOINT grant_attempt")
                .execute(&mut *conn)
                .await?;
        }
        let r = self.update(conn, now).await;
        if Db::SAVEPOINT_AROUND_CONFLICT {
            let end = if r.is_ok() {
                "RELEASE SAVEPOINT grant_attempt"
            } else {
                "ROLLBACK TO SAVEPOINT grant_attempt"
            };
            sqlx::query(end).execute(&mut *conn).await?;
        }
        r
    }

    /// Writes the grant's row of the lease history, once [`Self::set`] succeeded.
    async fn recorded(
        &self,
        conn: &mut Conn,
        (lease_count, lease_token): &(i64, String),
        via: GrantVia,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        grants::grant_opened(
            conn,
            &self.row.task_id,
            *lease_count,
            self.worker_id.as_str(),
            via,
            lease_token,
            self.expires,
            now,
        )
        .await
    }

    /// The grant as the worker sees it, once [`Self::set`] succeeded.
    async fn view(
        &self,
        conn: &mut Conn,
        (lease_count, lease_token): (i64, String),
    ) -> Result<LeaseGrant, StoreError> {
        let row = self.row;
        Ok(LeaseGrant {
            task_id: row.task_id.clone(),
            site: row.site.clone(),
            intent: row.intent()?,
            lease_expires_at: self.expires,
            lease_count,
            known_state: latest_state(conn, row.task_id.as_str()).await?,
            lease_token,
        })
    }

    async fn update(
        &self,
        conn: &mut Conn,
        now: Timestamp,
    ) -> Result<Option<(i64, String)>, sqlx::Error> {
        let token = new_token();
        let sql = format!(
            "UPDATE tasks SET status = 'leased', lease_owner = $1, lease_expires_at = $2, \
             lease_count = lease_count + 1, lease_token = $3, gate_key = $4, updated_at = $5 \
             WHERE task_id = $6 AND {} RETURNING lease_count",
            self.guard
        );
        let mut q = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql))
            .bind(self.worker_id.as_str().to_owned())
            .bind(self.expires.to_rfc3339())
            .bind(token.clone())
            .bind(self.gate_key.clone())
            .bind(now.to_rfc3339())
            .bind(self.row.task_id.as_str().to_owned());
        for b in &self.guard_binds {
            q = q.bind(b.clone());
        }
        Ok(q.fetch_optional(&mut *conn).await?.map(|n| (n, token)))
    }
}

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
        return Ok(LeaseAttempt::Granted(grant.view(conn, (count, token)).await?));
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

fn changed_concurrently(rows_affected: u64) -> Result<(), StoreError> {
    if rows_affected == 1 {
        Ok(())
    } else {
        Err(lease_changed_concurrently())
    }
}

/// The refusal of a guarded lease `UPDATE` that found the row no longer as it was read.
pub(crate) fn lease_changed_concurrently() -> StoreError {
    StoreError::LeaseInvalid("lease changed concurrently".into())
}

/// `POST /api/orders/{id}/renew` (§4.4).
pub(crate) async fn task_renew(
    conn: &mut Conn,
    req: RenewRequest,
    now: Timestamp,
) -> Result<RenewAck, StoreError> {
    let row = load_task_locked(conn, &req.task_id).await?;
    check_holder(&row, &req.worker_id, req.lease_token.as_deref(), now)?;
    if row.status.is_terminal() {
        return Err(StoreError::LeaseInvalid(format!(
            "task {} is {}; nothing to renew",
            row.task_id, row.status
        )));
    }
    let expires = now.plus(req.ttl);
    let done = sqlx::query(
        "UPDATE tasks SET lease_expires_at = $1, updated_at = $2 WHERE task_id = $3 \
         AND status IN ('leased','running') AND lease_owner = $4 AND lease_token = $5 \
         AND lease_expires_at > $2",
    )
    .bind(expires.to_rfc3339())
    .bind(now.to_rfc3339())
    .bind(req.task_id.as_str())
    .bind(req.worker_id.as_str())
    .bind(row.lease_token.clone())
    .execute(&mut *conn)
    .await?
    .rows_affected();
    changed_concurrently(done)?;
    grants::grant_renewed(conn, &req.task_id, expires, now).await?;
    worker_touch(conn, &req.worker_id, now).await?;
    Ok(RenewAck {
        task_id: req.task_id,
        lease_expires_at: expires,
    })
}

/// `POST /api/orders/{id}/report` (§4.5).
pub(crate) async fn task_report(
    conn: &mut Conn,
    r: NewReport,
    now: Timestamp,
) -> Result<ReportAck, StoreError> {
    let row = load_task_locked(conn, &r.task_id).await?;
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
        let done = sqlx::query(
            "UPDATE tasks SET status = $1, outcome = $2, updated_at = $3 WHERE task_id = $4 \
             AND status IN ('leased','running') AND lease_owner = $5 AND lease_token = $6 \
             AND lease_expires_at > $3",
        )
        .bind(next.as_str())
        .bind(r.outcome.map(|o| o.as_str()))
        .bind(&now_s)
        .bind(r.task_id.as_str())
        .bind(r.worker_id.as_str())
        .bind(row.lease_token.clone())
        .execute(&mut *conn)
        .await?
        .rows_affected();
        changed_concurrently(done)?;
        if next.is_terminal() {
            // The final report ends the grant; later monitoring reports (§6) do not reopen it.
            grants::grant_ended(conn, &r.task_id, GrantEnd::Reported, now).await?;
        }
        next
    };

    let duplicate: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM task_reports WHERE task_id = $1 AND state = $2)",
    )
    .bind(r.task_id.as_str())
    .bind(r.state.as_str())
    .fetch_one(&mut *conn)
    .await?;
    // The task row is locked (PostgreSQL FOR UPDATE above; SQLite's one writer), so
    // MAX(seq) + 1 cannot race.
    sqlx::query(
        "INSERT INTO task_reports (task_id, state, payable_yen, pay_deadline, site_order_id, \
         evidence_ref, detail, reported_at, error_code, worker_id, seq) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, \
                 (SELECT COALESCE(MAX(seq), 0) + 1 FROM task_reports WHERE task_id = $1)) \
         ON CONFLICT (task_id, state) DO UPDATE SET \
         payable_yen = COALESCE(EXCLUDED.payable_yen, task_reports.payable_yen), \
         pay_deadline = COALESCE(EXCLUDED.pay_deadline, task_reports.pay_deadline), \
         site_order_id = COALESCE(EXCLUDED.site_order_id, task_reports.site_order_id), \
         evidence_ref = COALESCE(EXCLUDED.evidence_ref, task_reports.evidence_ref), \
         detail = COALESCE(EXCLUDED.detail, task_reports.detail), \
         error_code = COALESCE(EXCLUDED.error_code, task_reports.error_code), \
         worker_id = EXCLUDED.worker_id",
    )
    .bind(r.task_id.as_str())
    .bind(r.state.as_str())
    .bind(r.payable_yen)
    .bind(r.pay_deadline.map(|t| t.to_rfc3339()))
    .bind(r.site_order_id)
    .bind(r.evidence_ref)
    .bind(r.detail)
    .bind(&now_s)
    .bind(r.error_code)
    .bind(r.worker_id.as_str())
    .execute(&mut *conn)
    .await?;
    worker_touch(conn, &r.worker_id, now).await?;
    Ok(ReportAck {
        task_id: r.task_id,
        status,
        state: r.state,
        duplicate,
    })
}

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

/// The sweeper's transition (§5): every lapsed active lease → `stale`, never `queued`. One
/// statement; on PostgreSQL rows another transaction holds (a report in flight, another
/// instance's sweep) are skipped and looked at again on the next tick, so each lease lapses
/// exactly once.
pub(crate) async fn task_mark_stale_expired(
    conn: &mut Conn,
    now: Timestamp,
) -> Result<Vec<StaleTask>, StoreError> {
    // Both active statuses may lapse; the SQL guard below admits exactly those.
    for s in [TaskStatus::Leased, TaskStatus::Running] {
        s.transition(TaskEvent::Expire)?;
    }
    let sql = format!(
        "UPDATE tasks SET status = 'stale', updated_at = $1 \
         WHERE task_id IN (SELECT task_id FROM tasks \
           WHERE status IN ('leased','running') AND lease_expires_at <= $1 \
           ORDER BY lease_expires_at LIMIT 1000{}) \
         AND status IN ('leased','running') AND lease_expires_at <= $1 \
         RETURNING task_id, lease_owner, lease_expires_at, lease_count",
        Db::SKIP_LOCKED
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(now.to_rfc3339())
        .fetch_all(&mut *conn)
        .await?;
    let mut staled = rows
        .iter()
        .map(|row| {
            let task_id: String = row.try_get("task_id")?;
            Ok(StaleTask {
                task_id: TaskId::parse(&task_id)
                    .map_err(|e| StoreError::Corrupt(format!("task_id: {e}")))?,
                lease_owner: row.try_get("lease_owner")?,
                lease_expires_at: decode_ts(row.try_get("lease_expires_at")?)?,
                lease_count: row.try_get("lease_count")?,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    for t in &staled {
        grants::grant_ended(conn, &t.task_id, GrantEnd::Expired, now).await?;
    }
    // RETURNING has no order; report the oldest lapse first.
    staled.sort_by(|a, b| {
        (a.lease_expires_at, a.task_id.as_str()).cmp(&(b.lease_expires_at, b.task_id.as_str()))
    });
    Ok(staled)
}

/// The sweeper's other transition (D-task-not-after-expired): every queued task whose
/// `not_after` is before `now` → `expired`, the terminal status that says why. Only `queued`
/// takes the event (a leased task keeps running); on PostgreSQL rows a lease is claiming right
/// now are skipped and looked at on the next tick (the lease's own guard refuses them anyway).
pub(crate) async fn task_expire_past_not_after(
    conn: &mut Conn,
    now: Timestamp,
) -> Result<Vec<ExpiredTask>, StoreError> {
    // The status written is the transition function's answer; the guard is its `from`.
    let next = TaskStatus::Queued.transition(TaskEvent::NotAfterPassed)?;
    let sql = format!(
        "UPDATE tasks SET status = $2, updated_at = $1 \
         WHERE task_id IN (SELECT task_id FROM tasks \
           WHERE status = 'queued' AND not_after IS NOT NULL AND not_after < $1 \
           ORDER BY not_after LIMIT 1000{}) \
         AND status = 'queued' AND not_after IS NOT NULL AND not_after < $1 \
         RETURNING task_id, not_after, created_at",
        Db::SKIP_LOCKED
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(now.to_rfc3339())
        .bind(next.as_str())
        .fetch_all(&mut *conn)
        .await?;
    let mut expired = rows
        .iter()
        .map(|row| {
            let task_id: String = row.try_get("task_id")?;
            Ok(ExpiredTask {
                task_id: TaskId::parse(&task_id)
                    .map_err(|e| StoreError::Corrupt(format!("task_id: {e}")))?,
                not_after: ts(&row.try_get::<String, _>("not_after")?)?,
                created_at: ts(&row.try_get::<String, _>("created_at")?)?,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    // RETURNING has no order; the earliest deadline first.
    expired.sort_by(|a, b| (a.not_after, a.task_id.as_str()).cmp(&(b.not_after, b.task_id.as_str())));
    Ok(expired)
}

/// Clamps every active lease expiring after `limit` to `limit`; returns the
/// tasks clamped. Rows another transaction holds are left for the next sweep.
pub(crate) async fn task_clamp_leases(
    conn: &mut Conn,
    limit: Timestamp,
    now: Timestamp,
) -> Result<Vec<TaskId>, StoreError> {
    let sql = format!(
        "UPDATE tasks SET lease_expires_at = $1, updated_at = $2 \
         WHERE task_id IN (SELECT task_id FROM tasks \
           WHERE status IN ('leased','running') AND lease_expires_at > $1 LIMIT 1000{}) \
         AND status IN ('leased','running') AND lease_expires_at > $1 RETURNING task_id",
        Db::SKIP_LOCKED
    );
    let ids: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(limit.to_rfc3339())
        .bind(now.to_rfc3339())
        .fetch_all(&mut *conn)
        .await?;
    let ids = ids
        .iter()
        .map(|s| TaskId::parse(s).map_err(|e| StoreError::Corrupt(format!("task_id: {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    for id in &ids {
        grants::grant_moved(conn, id, limit).await?;
    }
    Ok(ids)
}
