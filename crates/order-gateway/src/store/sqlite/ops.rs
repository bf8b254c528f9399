//! The write transitions, each run by the writer inside its own SAVEPOINT of a group-commit
//! transaction (see [`super::writer`]). Each one decides with [`TaskStatus::transition`] and then
//! repeats the guard in SQL (`UPDATE … WHERE status IN (…) AND lease_owner = ? … RETURNING`), so a
//! lost race is a typed error, never a silent no-op.

use rakuten_types::order::{LeaseGrant, RenewAck, ReportAck, SubmitOrderAck};
use rakuten_types::{OrderState, TaskEvent, TaskId, TaskStatus, Timestamp, WorkerId};
use sqlx::{Row, SqliteConnection};
use uuid::Uuid;

use super::rows::{TASK_COLUMNS, TaskRow, order_state, ts};
use crate::settings::LeaseScope;
use crate::store::{
    LeaseAttempt, LeaseRequest, NewReport, NewTask, ReclaimRequest, RenewRequest, StaleTask,
    StoreError,
};

fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.kind() == sqlx::error::ErrorKind::UniqueViolation)
}

async fn load_task(
    conn: &mut SqliteConnection,
    task_id: &TaskId,
) -> Result<Option<TaskRow>, StoreError> {
    let sql = format!("SELECT {TASK_COLUMNS} FROM tasks t WHERE t.task_id = ?");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(task_id.as_str())
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(TaskRow::decode).transpose()
}

async fn latest_state(
    conn: &mut SqliteConnection,
    task_id: &str,
) -> Result<Option<OrderState>, StoreError> {
    let s: Option<String> = sqlx::query_scalar(
        "SELECT state FROM task_reports WHERE task_id = ? ORDER BY seq DESC LIMIT 1",
    )
    .bind(task_id)
    .fetch_optional(&mut *conn)
    .await?;
    s.as_deref().map(order_state).transpose()
}

async fn worker_touch(
    conn: &mut SqliteConnection,
    worker_id: &WorkerId,
    now: Timestamp,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO workers (worker_id, last_seen_at) VALUES (?, ?) \
         ON CONFLICT (worker_id) DO UPDATE SET last_seen_at = excluded.last_seen_at",
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
    conn: &mut SqliteConnection,
    task: NewTask,
    now: Timestamp,
) -> Result<SubmitOrderAck, StoreError> {
    let now_s = now.to_rfc3339();
    let inserted = sqlx::query(
        "INSERT INTO tasks (task_id, site, intent_json, status, lease_count, created_at, updated_at) \
         VALUES (?, ?, ?, 'queued', 0, ?, ?) ON CONFLICT (task_id) DO NOTHING",
    )
    .bind(task.task_id.as_str())
    .bind(&task.site)
    .bind(&task.intent_json)
    .bind(&now_s)
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
    let existing = load_task(conn, &task.task_id)
        .await?
        .ok_or_else(|| StoreError::TaskNotFound(task.task_id.clone()))?;
    // Same write op as the insert: the row's site and intent never change after insert.
    crate::store::check_same_task(&task, &existing.site, &existing.intent_json)?;
    Ok(SubmitOrderAck {
        task_id: existing.task_id,
        status: existing.status,
        created: false,
    })
}

/// Sets a fresh grant on a task already selected and checked by the caller. `guard` is the SQL
/// condition the row must still meet.
#[allow(clippy::too_many_arguments)]
async fn grant(
    conn: &mut SqliteConnection,
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
        "UPDATE tasks SET status = 'leased', lease_owner = ?, lease_expires_at = ?, \
         lease_count = lease_count + 1, lease_token = ?, gate_key = ?, updated_at = ? \
         WHERE task_id = ? AND {guard} RETURNING lease_count"
    );
    let mut q = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql))
        .bind(worker_id.as_str())
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

async fn grant_view(
    conn: &mut SqliteConnection,
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

/// One lease attempt (§4.3): heartbeat, then re-grant of the worker's own task, then a claim.
pub(crate) async fn task_lease(
    conn: &mut SqliteConnection,
    req: LeaseRequest,
    now: Timestamp,
) -> Result<LeaseAttempt, StoreError> {
    worker_touch(conn, &req.worker_id, now).await?;
    let now_s = now.to_rfc3339();
    let expires = now.plus(req.ttl);

    // (b) The worker's own unexpired active task comes back first, as a new grant: a reclaimed
    // task reaches a worker behind NAT this way, and so does a grant whose response was lost.
    let sql = format!(
        "SELECT {TASK_COLUMNS} FROM tasks t WHERE t.status IN ('leased','running') \
         AND t.lease_owner = ? AND t.lease_expires_at > ? ORDER BY t.created_at, t.rowid LIMIT 1"
    );
    let own = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(req.worker_id.as_str())
        .bind(&now_s)
        .fetch_optional(&mut *conn)
        .await?;
    if let Some(row) = own {
        let row = TaskRow::decode(&row)?;
        row.status.transition(TaskEvent::Regrant)?;
        let gate = req.scope.gate_key(&row.site);
        let granted = grant(
            conn,
            row.task_id.as_str(),
            &req.worker_id,
            &gate,
            "status IN ('leased','running') AND lease_owner = ? AND lease_expires_at > ?",
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
            // The gate key changed with the scope setting and another task holds the new one.
            Err(e) if is_unique_violation(&e) => Ok(LeaseAttempt::GateBusy),
            Err(e) => Err(e.into()),
        };
    }

    // (c) Claim the oldest queued task whose gate is free.
    let site = req.site.clone();
    let candidate = match req.scope {
        LeaseScope::Global => {
            let busy: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM tasks WHERE status IN ('leased','running'))",
            )
            .fetch_one(&mut *conn)
            .await?;
            if busy {
                None
            } else {
                let sql = format!(
                    "SELECT {TASK_COLUMNS} FROM tasks t WHERE t.status = 'queued' \
                     AND (? IS NULL OR t.site = ?) ORDER BY t.created_at, t.rowid LIMIT 1"
                );
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(site.clone())
                    .bind(site.clone())
                    .fetch_optional(&mut *conn)
                    .await?
            }
        }
        LeaseScope::Site => {
            let sql = format!(
                "SELECT {TASK_COLUMNS} FROM tasks t WHERE t.status = 'queued' \
                 AND (? IS NULL OR t.site = ?) AND NOT EXISTS (SELECT 1 FROM tasks a \
                 WHERE a.status IN ('leased','running') AND a.gate_key = t.site) \
                 ORDER BY t.created_at, t.rowid LIMIT 1"
            );
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(site.clone())
                .bind(site.clone())
                .fetch_optional(&mut *conn)
                .await?
        }
    };
    let Some(row) = candidate else {
        let queued: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM tasks WHERE status = 'queued' AND (? IS NULL OR site = ?))",
        )
        .bind(site.clone())
        .bind(site)
        .fetch_one(&mut *conn)
        .await?;
        return Ok(if queued {
            LeaseAttempt::GateBusy
        } else {
            LeaseAttempt::Empty
        });
    };
    let row = TaskRow::decode(&row)?;
    row.status.transition(TaskEvent::Lease)?;
    let gate = req.scope.gate_key(&row.site);
    match grant(
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
        // The partial unique index `one_active_task` is the last word on the gate.
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
    conn: &mut SqliteConnection,
    req: RenewRequest,
    now: Timestamp,
) -> Result<RenewAck, StoreError> {
    let row = load_task(conn, &req.task_id)
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
        "UPDATE tasks SET lease_expires_at = ?, updated_at = ? WHERE task_id = ? \
         AND status IN ('leased','running') AND lease_owner = ? AND lease_token = ? \
         AND lease_expires_at > ?",
    )
    .bind(expires.to_rfc3339())
    .bind(&now_s)
    .bind(req.task_id.as_str())
    .bind(req.worker_id.as_str())
    .bind(row.lease_token.clone())
    .bind(&now_s)
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
    conn: &mut SqliteConnection,
    r: NewReport,
    now: Timestamp,
) -> Result<ReportAck, StoreError> {
    let row = load_task(conn, &r.task_id)
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
            "UPDATE tasks SET status = ?, outcome = ?, updated_at = ? WHERE task_id = ? \
             AND status IN ('leased','running') AND lease_owner = ? AND lease_token = ? \
             AND lease_expires_at > ?",
        )
        .bind(next.as_str())
        .bind(r.outcome.map(|o| o.as_str()))
        .bind(&now_s)
        .bind(r.task_id.as_str())
        .bind(r.worker_id.as_str())
        .bind(row.lease_token.clone())
        .bind(&now_s)
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
        "SELECT EXISTS (SELECT 1 FROM task_reports WHERE task_id = ? AND state = ?)",
    )
    .bind(r.task_id.as_str())
    .bind(r.state.as_str())
    .fetch_one(&mut *conn)
    .await?;
    sqlx::query(
        "INSERT INTO task_reports (task_id, state, payable_yen, pay_deadline, site_order_id, \
         evidence_ref, detail, reported_at, error_code, worker_id, seq) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, \
                 (SELECT COALESCE(MAX(seq), 0) + 1 FROM task_reports WHERE task_id = ?)) \
         ON CONFLICT (task_id, state) DO UPDATE SET payable_yen = COALESCE(excluded.payable_yen, task_reports.payable_yen), \
         pay_deadline = COALESCE(excluded.pay_deadline, task_reports.pay_deadline), site_order_id = COALESCE(excluded.site_order_id, task_reports.site_order_id), \
         evidence_ref = COALESCE(excluded.evidence_ref, task_reports.evidence_ref), detail = COALESCE(excluded.detail, task_reports.detail), \
         error_code = COALESCE(excluded.error_code, task_reports.error_code), worker_id = excluded.worker_id",
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
    .bind(r.task_id.as_str())
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
    conn: &mut SqliteConnection,
    req: ReclaimRequest,
    now: Timestamp,
) -> Result<LeaseGrant, StoreError> {
    let row = load_task(conn, &req.task_id)
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
        "SELECT task_id FROM tasks WHERE status IN ('leased','running') AND gate_key = ? LIMIT 1",
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

/// The sweeper's transition (§5): every lapsed active lease → `stale`, never `queued`.
pub(crate) async fn task_mark_stale_expired(
    conn: &mut SqliteConnection,
    now: Timestamp,
) -> Result<Vec<StaleTask>, StoreError> {
    let now_s = now.to_rfc3339();
    let rows = sqlx::query(
        "SELECT task_id, status, lease_owner, lease_expires_at, lease_count FROM tasks \
         WHERE status IN ('leased','running') AND lease_expires_at <= ? LIMIT 1000",
    )
    .bind(&now_s)
    .fetch_all(&mut *conn)
    .await?;
    let mut staled = Vec::with_capacity(rows.len());
    for row in rows {
        let task_id: String = row.try_get("task_id")?;
        let status: TaskStatus = row
            .try_get::<String, _>("status")?
            .parse()
            .map_err(|e| StoreError::Corrupt(format!("status: {e}")))?;
        status.transition(TaskEvent::Expire)?;
        let done = sqlx::query(
            "UPDATE tasks SET status = 'stale', updated_at = ? WHERE task_id = ? \
             AND status IN ('leased','running') AND lease_expires_at <= ?",
        )
        .bind(&now_s)
        .bind(&task_id)
        .bind(&now_s)
        .execute(&mut *conn)
        .await?
        .rows_affected();
        if done == 1 {
            let exp: Option<String> = row.try_get("lease_expires_at")?;
            staled.push(StaleTask {
                task_id: TaskId::parse(&task_id)
                    .map_err(|e| StoreError::Corrupt(format!("task_id: {e}")))?,
                lease_owner: row.try_get("lease_owner")?,
                lease_expires_at: exp.as_deref().map(ts).transpose()?,
                lease_count: row.try_get("lease_count")?,
            });
        }
    }
    Ok(staled)
}
