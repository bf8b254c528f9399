//! Audited operator actions on tasks: resolve and cancel (conditional updates decided by
//! `TaskStatus::transition`, 6003 from any other status) and the `operator_actions` rows that
//! every operator action writes in its own transaction (reclaim's in [`super::reclaim`], a
//! worker's retirement in [`super::workers`]).

use rakuten_types::alert::{OperatorActionAck, OperatorActionKind, OperatorActionView};
use rakuten_types::{OrderState, Outcome, TaskEvent, TaskId, TaskStatus, Timestamp};
use sqlx::Row;

use super::{Conn, Db, grants};
use crate::store::StoreError;
use crate::store::operator::{CancelRequest, GrantEnd, ResolveRequest};
use crate::store::sql::rows::{corrupt, task_id, ts};

type DbRow = <Db as sqlx::Database>::Row;

/// One `operator_actions` row to write: what was done, by whom and why, to which task or worker,
/// and the status move it made.
pub(crate) struct ActionRecord<'a> {
    pub action: OperatorActionKind,
    pub actor: &'a str,
    pub reason: &'a str,
    pub task: Option<&'a TaskId>,
    pub worker_id: Option<&'a str>,
    pub from: Option<TaskStatus>,
    pub to: Option<TaskStatus>,
    pub detail: serde_json::Value,
}

/// Writes one `operator_actions` row.
pub(crate) async fn action_insert(
    conn: &mut Conn,
    record: ActionRecord<'_>,
    now: Timestamp,
) -> Result<OperatorActionView, StoreError> {
    let ActionRecord {
        action,
        actor,
        reason,
        task,
        worker_id,
        from,
        to,
        detail,
    } = record;
    let action_id = uuid::Uuid::now_v7().to_string();
    sqlx::query(
        "INSERT INTO operator_actions (action_id, action, actor, reason, task_id, \
         worker_id, from_status, to_status, detail_json, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(&action_id)
    .bind(action.as_str())
    .bind(actor)
    .bind(reason)
    .bind(task.map(|t| t.as_str().to_owned()))
    .bind(worker_id.map(str::to_owned))
    .bind(from.map(|s| s.as_str()))
    .bind(to.map(|s| s.as_str()))
    .bind(detail.to_string())
    .bind(now.to_rfc3339())
    .execute(&mut *conn)
    .await?;
    Ok(OperatorActionView {
        action_id,
        action,
        actor: actor.to_owned(),
        reason: reason.to_owned(),
        task_id: task.cloned(),
        worker_id: worker_id.map(str::to_owned),
        from_status: from,
        to_status: to,
        detail,
        at: now,
    })
}

const ACTION_COLUMNS: &str = "action_id, action, actor, reason, task_id, worker_id, \
    from_status, to_status, detail_json, created_at";

fn decode_action(row: &DbRow) -> Result<OperatorActionView, StoreError> {
    let status = |s: Option<String>| -> Result<Option<TaskStatus>, StoreError> {
        s.map(|s| s.parse().map_err(|e| corrupt("status", e)))
            .transpose()
    };
    let detail: String = row.try_get("detail_json")?;
    Ok(OperatorActionView {
        action_id: row.try_get("action_id")?,
        action: row
            .try_get::<String, _>("action")?
            .parse()
            .map_err(|e| corrupt("action", e))?,
        actor: row.try_get("actor")?,
        reason: row.try_get("reason")?,
        task_id: row
            .try_get::<Option<String>, _>("task_id")?
            .as_deref()
            .map(task_id)
            .transpose()?,
        worker_id: row.try_get("worker_id")?,
        from_status: status(row.try_get("from_status")?)?,
        to_status: status(row.try_get("to_status")?)?,
        detail: serde_json::from_str(&detail).map_err(|e| corrupt("detail_json", e))?,
        at: ts(&row.try_get::<String, _>("created_at")?)?,
    })
}

/// The task's status and site, or 6001.
async fn status_of(conn: &mut Conn, task: &TaskId) -> Result<TaskStatus, StoreError> {
    Ok(status_and_set_aside(conn, task).await?.0)
}

/// The task's status and whether it was set aside as undecodable, or 6001.
async fn status_and_set_aside(
    conn: &mut Conn,
    task: &TaskId,
) -> Result<(TaskStatus, bool), StoreError> {
    let row = sqlx::query("SELECT status, set_aside_reason FROM tasks WHERE task_id = $1")
        .bind(task.as_str())
        .fetch_optional(&mut *conn)
        .await?
        .ok_or_else(|| StoreError::TaskNotFound(task.clone()))?;
    let status = row
        .try_get::<String, _>("status")?
        .parse()
        .map_err(|e| corrupt("status", e))?;
    let set_aside: Option<String> = row.try_get("set_aside_reason")?;
    Ok((status, set_aside.is_some()))
}

/// Moves `task` from `from` to `to` with `event`'s outcome, guarded in SQL; 6003 when
/// the status changed since it was read.
async fn guarded_finish(
    conn: &mut Conn,
    task: &TaskId,
    from: TaskStatus,
    to: TaskStatus,
    now: Timestamp,
) -> Result<(), StoreError> {
    let done = sqlx::query(
        "UPDATE tasks SET status = $1, outcome = $1, updated_at = $2 \
         WHERE task_id = $3 AND status = $4",
    )
    .bind(to.as_str())
    .bind(now.to_rfc3339())
    .bind(task.as_str())
    .bind(from.as_str())
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if done == 1 {
        return Ok(());
    }
    let status = status_of(conn, task).await?;
    Err(StoreError::StateConflict {
        status,
        reason: "the task changed concurrently".into(),
    })
}

pub(crate) async fn task_resolve(
    conn: &mut Conn,
    req: ResolveRequest,
    now: Timestamp,
) -> Result<OperatorActionAck, StoreError> {
    let (from, set_aside) = status_and_set_aside(conn, &req.task_id).await?;
    if set_aside {
        // Its stored row cannot be decoded (D-poison-row-set-aside): it stays needs_human for the schema too.
        return Err(StoreError::StateConflict {
            status: from,
            reason: "the task was set aside as an undecodable row; it cannot be resolved here"
                .into(),
        });
    }
    if matches!(from, TaskStatus::Succeeded | TaskStatus::Failed) {
        return correct_verdict(conn, req, from, now).await;
    }
    let to = from
        .transition(TaskEvent::Resolve(req.outcome))
        .map_err(|_| StoreError::StateConflict {
            status: from,
            reason: "only a stale or needs_human task can be resolved, to succeeded or \
                     failed"
                .into(),
        })?;
    if req.state.is_none() {
        // Without a state of their own, the person's verdict stands beside the worker's latest
        // report in the mirror the upstream reads; `failed` beside `paid` would say both.
        // Only a state that implies the other verdict is refused: a latest
        // `in_cart` is the usual stale task whose order went through unreported, and the
        // operator who found it on the site resolves `succeeded`. With a state,
        // `Outcome::check_fits_state` has already judged the pair.
        let latest: Option<String> = sqlx::query_scalar(
            "SELECT state FROM task_reports WHERE task_id = $1 ORDER BY seq DESC LIMIT 1",
        )
        .bind(req.task_id.as_str())
        .fetch_optional(&mut *conn)
        .await?;
        if let Some(latest) = latest.and_then(|s| s.parse::<OrderState>().ok())
            && let Some(implied) = Outcome::implied_by(latest)
            && implied != req.outcome
        {
            return Err(StoreError::Contradicts(format!(
                "outcome {} contradicts the latest reported state {latest}, which makes the task \
                 {}: send the state you saw on the site (state) with the outcome",
                req.outcome.as_str(),
                implied.as_str()
            )));
        }
    }
    guarded_finish(conn, &req.task_id, from, to, now).await?;
    grants::grant_ended(conn, &req.task_id, GrantEnd::Resolved, now).await?;
    record_resolve(conn, req, from, to, None, now).await
}

/// What every resolve records once its status is set: the person's state joins the mirror, and
/// the action is audited with what they saw (`corrects`: the verdict a correction replaces).
async fn record_resolve(
    conn: &mut Conn,
    req: ResolveRequest,
    from: TaskStatus,
    to: TaskStatus,
    corrects: Option<Outcome>,
    now: Timestamp,
) -> Result<OperatorActionAck, StoreError> {
    if let Some(state) = req.state {
        mirror_operator_state(conn, &req, state, now).await?;
    }
    let mut detail = serde_json::json!({
        "outcome": req.outcome,
        "site_order_id": req.site_order_id,
        "state": req.state,
    });
    if let Some(corrects) = corrects {
        detail["corrects"] = serde_json::json!(corrects);
    }
    let action = action_insert(
        conn,
        ActionRecord {
            action: OperatorActionKind::Resolve,
            actor: &req.actor,
            reason: &req.reason,
            task: Some(&req.task_id),
            worker_id: None,
            from: Some(from),
            to: Some(to),
            detail,
        },
        now,
    )
    .await?;
    Ok(OperatorActionAck {
        task_id: req.task_id,
        status: to,
        action,
    })
}

/// The person's observation joins the state mirror, marked with the operator, as the latest state:
/// what a person saw on the site is the newest observation of the order. An existing row for that
/// state keeps the worker's evidence and first time, gains the mark and moves to the end of the
/// order (D-resolve-and-cancel), so a correction that names a state already reported clears the
/// contradiction it answers (D-late-report-contradiction-alert).
async fn mirror_operator_state(
    conn: &mut Conn,
    req: &ResolveRequest,
    state: OrderState,
    now: Timestamp,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO task_reports (task_id, state, site_order_id, detail, \
         reported_at, operator, seq) VALUES ($1, $2, $3, $4, $5, $6, \
         (SELECT COALESCE(MAX(seq), 0) + 1 FROM task_reports WHERE task_id = $1)) \
         ON CONFLICT (task_id, state) DO UPDATE SET operator = excluded.operator, \
         seq = excluded.seq, \
         site_order_id = COALESCE(excluded.site_order_id, task_reports.site_order_id)",
    )
    .bind(req.task_id.as_str())
    .bind(state.as_str())
    .bind(req.site_order_id.clone())
    .bind(format!(
        "resolved by operator {}: {}",
        req.actor, req.reason
    ))
    .bind(now.to_rfc3339())
    .bind(&req.actor)
    .execute(&mut *conn)
    .await?;
    sqlx::query("UPDATE tasks SET latest_state = $1 WHERE task_id = $2")
        .bind(state.as_str())
        .bind(req.task_id.as_str())
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// A resolve of a task that ended `succeeded` or `failed`: allowed only while its latest reported
/// state contradicts that verdict (a report appended after the end), and the new verdict must fit
/// the state the person gives or, without one, that latest state
/// (D-late-report-contradiction-alert). The `task_state_contradicts_outcome` alert clears at the
/// next alert run, its cause gone.
async fn correct_verdict(
    conn: &mut Conn,
    req: ResolveRequest,
    from: TaskStatus,
    now: Timestamp,
) -> Result<OperatorActionAck, StoreError> {
    let latest: Option<OrderState> = sqlx::query_scalar::<_, String>(
        "SELECT state FROM task_reports WHERE task_id = $1 ORDER BY seq DESC LIMIT 1",
    )
    .bind(req.task_id.as_str())
    .fetch_optional(&mut *conn)
    .await?
    .and_then(|s| s.parse().ok());
    let current = match from {
        TaskStatus::Succeeded => Outcome::Succeeded,
        _ => Outcome::Failed,
    };
    if current.check_fits_state(latest).is_ok() {
        return Err(StoreError::StateConflict {
            status: from,
            reason: "only a stale or needs_human task can be resolved; an ended task only while \
                     its latest reported state contradicts its outcome"
                .into(),
        });
    }
    let to = from
        .transition(TaskEvent::Correct(req.outcome))
        .map_err(|_| StoreError::StateConflict {
            status: from,
            reason: "a verdict is succeeded or failed".into(),
        })?;
    if req.state.is_none()
        && let Err(msg) = req.outcome.check_fits_state(latest)
    {
        return Err(StoreError::Contradicts(format!(
            "{msg}: send the state you saw on the site (state) with the outcome"
        )));
    }
    if to != from {
        guarded_finish(conn, &req.task_id, from, to, now).await?;
    }
    record_resolve(conn, req, from, to, Some(current), now).await
}

pub(crate) async fn task_cancel(
    conn: &mut Conn,
    req: CancelRequest,
    now: Timestamp,
) -> Result<OperatorActionAck, StoreError> {
    let from = status_of(conn, &req.task_id).await?;
    let to = from
        .transition(TaskEvent::Cancel)
        .map_err(|_| StoreError::StateConflict {
            status: from,
            reason: "only a queued task can be cancelled".into(),
        })?;
    // Only `queued` cancels (the transition above), and a queued task has never been granted:
    // there is no open lease grant to end (D-lease-grant-history).
    guarded_finish(conn, &req.task_id, from, to, now).await?;
    let action = action_insert(
        conn,
        ActionRecord {
            action: OperatorActionKind::Cancel,
            actor: &req.actor,
            reason: &req.reason,
            task: Some(&req.task_id),
            worker_id: None,
            from: Some(from),
            to: Some(to),
            detail: serde_json::json!({}),
        },
        now,
    )
    .await?;
    Ok(OperatorActionAck {
        task_id: req.task_id,
        status: to,
        action,
    })
}

pub(crate) async fn task_operator_actions(
    conn: &mut Conn,
    task: TaskId,
) -> Result<Vec<OperatorActionView>, StoreError> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {ACTION_COLUMNS} FROM operator_actions WHERE task_id = $1 \
         ORDER BY created_at, action_id"
    )))
    .bind(task.as_str())
    .fetch_all(&mut *conn)
    .await?
    .iter()
    .map(decode_action)
    .collect()
}
