//! Renew (§4.4) and report (§4.5): transitions only the lease's current holder may make, checked
//! against the locked row and again in the guarded `UPDATE`.

use rakuten_types::order::{RenewAck, ReportAck};
use rakuten_types::{TaskEvent, Timestamp};

use super::super::{Conn, grants};
use super::row::{load_task_locked, worker_touch};
use crate::store::operator::GrantEnd;
use crate::store::sql::holder::{check_holder, lease_changed_concurrently};
use crate::store::{NewReport, RenewRequest, StoreError};

fn changed_concurrently(rows_affected: u64) -> Result<(), StoreError> {
    if rows_affected == 1 {
        Ok(())
    } else {
        Err(lease_changed_concurrently())
    }
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
    if !duplicate {
        // A new state takes the next `seq`: it is the task's latest (D-latest-state-on-the-task).
        sqlx::query("UPDATE tasks SET latest_state = $1 WHERE task_id = $2")
            .bind(r.state.as_str())
            .bind(r.task_id.as_str())
            .execute(&mut *conn)
            .await?;
    }
    worker_touch(conn, &r.worker_id, now).await?;
    Ok(ReportAck {
        task_id: r.task_id,
        status,
        state: r.state,
        duplicate,
    })
}
