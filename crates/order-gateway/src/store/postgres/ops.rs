//! The write transitions on PostgreSQL. Each runs inside its own transaction (opened and committed
//! by [`super::PgStore`]); each decides with [`TaskStatus::transition`] and repeats the guard in
//! SQL (`UPDATE … WHERE status IN (…) AND lease_owner = $ … RETURNING`), so a lost race — also one
//! against another gateway instance — is a typed error, never a silent no-op.
//!
//! Concurrency between instances (READ COMMITTED):
//! - rows a transition reads before it writes are locked (`FOR UPDATE`), so renew, report,
//!   reclaim and the sweeper serialize per task;
//! - a claim picks the oldest queued task `FOR UPDATE SKIP LOCKED`, so two instances never pick
//!   the same row, and the partial unique index `one_active_task` refuses the second of two
//!   different rows (unique violation → [`LeaseAttempt::GateBusy`]);
//! - the sweeper takes only rows nobody holds (`SKIP LOCKED`), so when every instance sweeps at
//!   once each lapsed lease turns `stale` exactly once, reported by the instance that did it.
//!
//! Transitions that may make something leasable are followed, after their commit, by a `NOTIFY`
//! on [`super::TASKS_CHANNEL`] (sent by [`super::PgStore`], see D-pg-8).

use rakuten_types::order::{LeaseGrant, RenewAck, ReportAck, SubmitOrderAck};
use rakuten_types::{OrderState, TaskEvent, TaskId, TaskStatus, Timestamp, WorkerId};
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use super::rows::{TASK_COLUMNS, task_row};
use crate::settings::LeaseScope;
use crate::store::sqlite::rows::{TaskRow, order_state, ts};
use crate::store::{
    LeaseAttempt, LeaseRequest, NewReport, NewTask, ReclaimRequest, RenewRequest, StaleTask,
    StoreError,
};

pub(crate) fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.kind() == sqlx::error::ErrorKind::UniqueViolation)
}

/// Loads a task and locks its row until the transaction ends.
async fn load_task_locked(
    conn: &mut PgConnection,
    task_id: &TaskId,
) -> Result<Option<TaskRow>, StoreError> {
    let sql = format!("SELECT {TASK_COLUMNS} FROM tasks t WHERE t.task_id = $1 FOR UPDATE OF t");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(task_id.as_str())
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(task_row).transpose()
}

async fn latest_state(
    conn: &mut PgConnection,
    task_id: &str,
) -> Result<Option<OrderState>, StoreError> {
    let s: Option<String> = sqlx::query_scalar(
        "SELECT state FROM task_reports WHERE task_id = $1 ORDER BY seq DESC LIMIT 1",
    )
    .bind(task_id)
    .fetch_optional(&mut *conn)
    .await?;
    s.as_deref().map(order_state).transpose()
}

async fn worker_touch(
    conn: &mut PgConnection,
    worker_id: &WorkerId,
    now: Timestamp,
) -> Result<(), StoreError> {
    // GREATEST: instances' clocks may differ slightly; a heartbeat never moves backwards.
    sqlx::query(
        "INSERT INTO workers (worker_id, last_seen_at) VALUES ($1, $2) \
         ON CONFLICT (worker_id) DO UPDATE \
         SET last_seen_at = GREATEST(workers.last_seen_at, EXCLUDED.last_seen_at)",
    )
    .bind(worker_id.as_str())
    .bind(now.to_rfc3339())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

fn new_token() -> String {
    Uuid::now_v7().to_string()
}

/// `POST /api/orders` (§4.2): insert or find.
pub(crate) async fn task_insert(
    conn: &mut PgConnection,
    task: NewTask,
    now: Timestamp,
) -> Result<SubmitOrderAck, StoreError> {
    let now_s = now.to_rfc3339();
    let inserted = sqlx::query(
        "INSERT INTO tasks (task_id, site, intent_json, status, lease_count, created_at, updated_at) \
         VALUES ($1, $2, $3, 'queued', 0, $4, $4) ON CONFLICT (task_id) DO NOTHING",
    )
    .bind(task.task_id.as_str())
    .bind(&task.site)
    .bind(&task.intent_json)
    .bind(&now_s)
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
    let sql = format!("SELECT {TASK_COLUMNS} FROM tasks t WHERE t.task_id = $1");
    let existing = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(task.task_id.as_str())
        .fetch_optional(&mut *conn)
        .await?
        .as_ref()
        .map(task_row)
        .transpose()?
        .ok_or_else(|| StoreError::TaskNotFound(task.task_id.clone()))?;
    // Same write op as the insert: the row's site and intent never change after insert.
    crate::store::check_same_task(&task, &existing.site, &existing.intent_json)?;
    Ok(SubmitOrderAck {
        task_id: existing.task_id,
        status: existing.status,
        created: false,
    })
}

/// Sets a fresh grant on a task already selected (and locked) by the caller. `guard` is the SQL
/// condition the row must still meet; its parameters start at `$7`.
#[allow(clippy::too_many_arguments)]
async fn grant(
    conn: &mut PgConnection,
    task_id: &str,
    worker_id: &WorkerId,
    gate_key: &str,
    guard: &'static str,
    guard_binds: &[String],
    expires: Timestamp,
    now: Timestamp,
) -> Result<Option<(i64, String)>, sqlx::Error> {
    let token = new_token();
    let sql = format!(
        "UPDATE tasks SET status = 'leased', lease_owner = $1, lease_expires_at = $2, \
         lease_count = lease_count + 1, lease_token = $3, gate_key = $4, updated_at = $5 \
         WHERE task_id = $6 AND {guard} RETURNING lease_count"
    );
    let mut q = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql))
        .bind(worker_id.as_str().to_owned())
        .bind(expires.to_rfc3339())
        .bind(token.clone())
        .bind(gate_key.to_owned())
        .bind(now.to_rfc3339())
        .bind(task_id.to_owned());
    for b in guard_binds {
        q = q.bind(b.clone());
    }
    Ok(q.fetch_optional(&mut *conn).await?.map(|n| (n, token)))
}

/// [`grant`] inside a SAVEPOINT: a unique violation (the gate is taken) aborts only the savepoint,
/// so the rest of the transaction (the heartbeat) still commits.
#[allow(clippy::too_many_arguments)]
async fn grant_in_savepoint(
    conn: &mut PgConnection,
    task_id: &str,
    worker_id: &WorkerId,
    gate_key: &str,
    guard: &'static str,
    guard_binds: &[String],
    expires: Timestamp,
    now: Timestamp,
) -> Result<Option<(i64, String)>, sqlx::Error> {
    sqlx::query("SAVEPOINT grant_attempt")
        .execute(&mut *conn)
        .await?;
    let r = grant(
        conn,
        task_id,
        worker_id,
        gate_key,
        guard,
        guard_binds,
        expires,
        now,
    )
    .await;
    let end = if r.is_ok() {
        "RELEASE SAVEPOINT grant_attempt"
    } else {
        "ROLLBACK TO SAVEPOINT grant_attempt"
    };
    sqlx::query(end).execute(&mut *conn).await?;
    r
}

async fn grant_view(
    conn: &mut PgConnection,
    row: &TaskRow,
    lease_count: i64,
    lease_token: String,
    expires: Timestamp,
) -> Result<LeaseGrant, StoreError> {
    Ok(LeaseGrant {
        task_id: row.task_id.clone(),
        site: row.site.clone(),
        intent: row.intent()?,
        lease_expires_at: expires,
        lease_count,
        known_state: latest_state(conn, row.task_id.as_str()).await?,
        lease_token,
    })
}

/// One lease attempt (§4.3): re-grant of the worker's own task, else a claim, then the heartbeat.
/// The heartbeat row is locked last, like renew and report do (task row first, then the worker
/// row), so concurrent calls of one worker on two instances cannot deadlock.
pub(crate) async fn task_lease(
    conn: &mut PgConnection,
    req: LeaseRequest,
    now: Timestamp,
) -> Result<LeaseAttempt, StoreError> {
    let worker_id = req.worker_id.clone();
    let attempt = lease_attempt(conn, req, now).await?;
    worker_touch(conn, &worker_id, now).await?;
    Ok(attempt)
}

async fn lease_attempt(
    conn: &mut PgConnection,
    req: LeaseRequest,
    now: Timestamp,
) -> Result<LeaseAttempt, StoreError> {
    let now_s = now.to_rfc3339();
    let expires = now.plus(req.ttl);

    // (b) The worker's own unexpired active task comes back first, as a new grant.
    let sql = format!(
        "SELECT {TASK_COLUMNS} FROM tasks t WHERE t.status IN ('leased','running') \
         AND t.lease_owner = $1 AND t.lease_expires_at > $2 ORDER BY t.created_at, t.seq \
         LIMIT 1 FOR UPDATE OF t"
    );
    let own = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(req.worker_id.as_str())
        .bind(&now_s)
        .fetch_optional(&mut *conn)
        .await?;
    if let Some(row) = own {
        let row = task_row(&row)?;
        row.status.transition(TaskEvent::Regrant)?;
        let gate = req.scope.gate_key(&row.site);
        let granted = grant_in_savepoint(
            conn,
            row.task_id.as_str(),
            &req.worker_id,
            &gate,
            "status IN ('leased','running') AND lease_owner = $7 AND lease_expires_at > $8",
            &[req.worker_id.as_str().to_owned(), now_s.clone()],
            expires,
            now,
        )
        .await;
        return match granted {
            Ok(Some((count, token))) => Ok(LeaseAttempt::Granted(
                grant_view(conn, &row, count, token, expires).await?,
            )),
            Ok(None) => Err(StoreError::LeaseInvalid(
                "lease changed concurrently".into(),
            )),
            Err(e) if is_unique_violation(&e) => Ok(LeaseAttempt::GateBusy),
            Err(e) => Err(e.into()),
        };
    }

    // (c) Claim the oldest queued task whose gate is free. SKIP LOCKED: a row another instance is
    // claiming right now is passed over, never handed out twice.
    let site = req.site.clone();
    let gate_expr = match req.scope {
        LeaseScope::Global => "'*'",
        LeaseScope::Site => "t.site",
    };
    let sql = format!(
        "SELECT {TASK_COLUMNS} FROM tasks t WHERE t.status = 'queued' \
         AND ($1::text IS NULL OR t.site = $1) AND NOT EXISTS (SELECT 1 FROM tasks a \
         WHERE a.status IN ('leased','running') AND a.gate_key = {gate_expr}) \
         ORDER BY t.created_at, t.seq LIMIT 1 FOR UPDATE OF t SKIP LOCKED"
    );
    let candidate = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(site.clone())
        .fetch_optional(&mut *conn)
        .await?;
    let Some(row) = candidate else {
        let queued: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM tasks WHERE status = 'queued' \
             AND ($1::text IS NULL OR site = $1))",
        )
        .bind(site)
        .fetch_one(&mut *conn)
        .await?;
        return Ok(if queued {
            LeaseAttempt::GateBusy
        } else {
            LeaseAttempt::Empty
        });
    };
    let row = task_row(&row)?;
    row.status.transition(TaskEvent::Lease)?;
    let gate = req.scope.gate_key(&row.site);
    match grant_in_savepoint(
        conn,
        row.task_id.as_str(),
        &req.worker_id,
        &gate,
        "status = 'queued'",
        &[],
        expires,
        now,
    )
    .await
    {
        Ok(Some((count, token))) => Ok(LeaseAttempt::Granted(
            grant_view(conn, &row, count, token, expires).await?,
        )),
        Ok(None) => Ok(LeaseAttempt::Empty),
        // The partial unique index `one_active_task` is the last word on the gate: another
        // instance claimed a different task at the same moment.
        Err(e) if is_unique_violation(&e) => Ok(LeaseAttempt::GateBusy),
        Err(e) => Err(e.into()),
    }
}

/// Checks that `worker_id` (and `token`, when given) hold the task's current, unexpired lease.
fn check_holder(
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
            "lease_token belongs to an earlier grant of this task".into(),
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

/// `POST /api/orders/{id}/renew` (§4.4).
pub(crate) async fn task_renew(
    conn: &mut PgConnection,
    req: RenewRequest,
    now: Timestamp,
) -> Result<RenewAck, StoreError> {
    let row = load_task_locked(conn, &req.task_id)
        .await?
        .ok_or_else(|| StoreError::TaskNotFound(req.task_id.clone()))?;
    check_holder(&row, &req.worker_id, req.lease_token.as_deref(), now)?;
    if row.status.is_terminal() {
        return Err(StoreError::LeaseInvalid(format!(
            "task {} is {}; nothing to renew",
            row.task_id, row.status
        )));
    }
    let expires = now.plus(req.ttl);
    let now_s = now.to_rfc3339();
    let done = sqlx::query(
        "UPDATE tasks SET lease_expires_at = $1, updated_at = $2 WHERE task_id = $3 \
         AND status IN ('leased','running') AND lease_owner = $4 AND lease_token = $5 \
         AND lease_expires_at > $2",
    )
    .bind(expires.to_rfc3339())
    .bind(&now_s)
    .bind(req.task_id.as_str())
    .bind(req.worker_id.as_str())
    .bind(row.lease_token.clone())
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if done != 1 {
        return Err(StoreError::LeaseInvalid(
            "lease changed concurrently".into(),
        ));
    }
    worker_touch(conn, &req.worker_id, now).await?;
    Ok(RenewAck {
        task_id: req.task_id,
        lease_expires_at: expires,
    })
}

/// `POST /api/orders/{id}/report` (§4.5).
pub(crate) async fn task_report(
    conn: &mut PgConnection,
    r: NewReport,
    now: Timestamp,
) -> Result<ReportAck, StoreError> {
    let row = load_task_locked(conn, &r.task_id)
        .await?
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
        if done != 1 {
            return Err(StoreError::LeaseInvalid(
                "lease changed concurrently".into(),
            ));
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
    // The task row is locked (FOR UPDATE above), so MAX(seq) + 1 cannot race.
    sqlx::query(
        "INSERT INTO task_reports (task_id, state, payable_yen, pay_deadline, site_order_id, \
         evidence_ref, detail, reported_at, error_code, worker_id, seq) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, \
                 (SELECT COALESCE(MAX(seq), 0) + 1 FROM task_reports WHERE task_id = $1)) \
         ON CONFLICT (task_id, state) DO UPDATE SET payable_yen = COALESCE(EXCLUDED.payable_yen, task_reports.payable_yen), \
         pay_deadline = COALESCE(EXCLUDED.pay_deadline, task_reports.pay_deadline), site_order_id = COALESCE(EXCLUDED.site_order_id, task_reports.site_order_id), \
         evidence_ref = COALESCE(EXCLUDED.evidence_ref, task_reports.evidence_ref), detail = COALESCE(EXCLUDED.detail, task_reports.detail), \
         error_code = COALESCE(EXCLUDED.error_code, task_reports.error_code), worker_id = EXCLUDED.worker_id",
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
    conn: &mut PgConnection,
    req: ReclaimRequest,
    now: Timestamp,
) -> Result<LeaseGrant, StoreError> {
    let row = load_task_locked(conn, &req.task_id)
        .await?
        .ok_or_else(|| StoreError::TaskNotFound(req.task_id.clone()))?;
    if row.status.transition(TaskEvent::Reclaim).is_err() {
        return Err(StoreError::StateConflict {
            status: row.status,
            reason: "only a stale task can be reclaimed".into(),
        });
    }
    let gate = req.scope.gate_key(&row.site);
    let holder: Option<String> = sqlx::query_scalar(
        "SELECT task_id FROM tasks WHERE status IN ('leased','running') AND gate_key = $1 LIMIT 1",
    )
    .bind(&gate)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(other) = holder {
        return Err(StoreError::GateBusy(format!(
            "task {other} is active; reclaiming now would make two active tasks"
        )));
    }
    let expires = now.plus(req.ttl);
    match grant(
        conn,
        row.task_id.as_str(),
        &req.worker_id,
        &gate,
        "status = 'stale'",
        &[],
        expires,
        now,
    )
    .await
    {
        Ok(Some((count, token))) => grant_view(conn, &row, count, token, expires).await,
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
/// statement; rows another transaction holds (a report in flight, another instance's sweep) are
/// skipped and looked at again on the next tick, so each lease lapses exactly once.
pub(crate) async fn task_mark_stale_expired(
    conn: &mut PgConnection,
    now: Timestamp,
) -> Result<Vec<StaleTask>, StoreError> {
    let rows = sqlx::query(
        "WITH lapsed AS (SELECT task_id, status FROM tasks \
           WHERE status IN ('leased','running') AND lease_expires_at <= $1 \
           ORDER BY lease_expires_at LIMIT 1000 FOR UPDATE SKIP LOCKED) \
         UPDATE tasks t SET status = 'stale', updated_at = $1 FROM lapsed \
         WHERE t.task_id = lapsed.task_id AND t.status IN ('leased','running') \
           AND t.lease_expires_at <= $1 \
         RETURNING t.task_id, lapsed.status AS old_status, t.lease_owner, t.lease_expires_at, \
           t.lease_count",
    )
    .bind(now.to_rfc3339())
    .fetch_all(&mut *conn)
    .await?;
    let mut staled = Vec::with_capacity(rows.len());
    for row in rows {
        let old: TaskStatus = row
            .try_get::<String, _>("old_status")?
            .parse()
            .map_err(|e| StoreError::Corrupt(format!("status: {e}")))?;
        // The SQL guard already allowed it; the state machine must agree (else roll back).
        old.transition(TaskEvent::Expire)?;
        let task_id: String = row.try_get("task_id")?;
        let exp: Option<String> = row.try_get("lease_expires_at")?;
        staled.push(StaleTask {
            task_id: TaskId::parse(&task_id)
                .map_err(|e| StoreError::Corrupt(format!("task_id: {e}")))?,
            lease_owner: row.try_get("lease_owner")?,
            lease_expires_at: exp.as_deref().map(ts).transpose()?,
            lease_count: row.try_get("lease_count")?,
        });
    }
    Ok(staled)
}
