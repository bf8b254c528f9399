//! Reports not yet acknowledged by the gateway: a step's report is enqueued in the step's
//! transaction ([`super::StepRecord::report`]) and leaves from here, oldest first, until the
//! gateway acknowledges it or refuses it for good.

use rakuten_types::order::ReportState;
use rakuten_types::{TaskId, Timestamp};
use sqlx::Row;

use super::{Journal, JournalError, Result};

/// One pending `outbox` row.
#[derive(Debug, Clone)]
pub struct OutboxRow {
    /// Row id.
    pub id: i64,
    /// Task.
    pub task_id: TaskId,
    /// The report (token attached at send time).
    pub body: ReportState,
}

impl Journal {
    /// Pending reports of a task, oldest first.
    ///
    /// # Errors
    /// Database errors.
    pub async fn outbox_pending(&self, task_id: &TaskId) -> Result<Vec<OutboxRow>> {
        let rows = sqlx::query("SELECT id, task_id, body_json FROM outbox WHERE task_id = ? AND status = 'pending' ORDER BY id")
            .bind(task_id.as_str())
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                let body: String = r.try_get("body_json")?;
                Ok(OutboxRow {
                    id: r.try_get("id")?,
                    task_id: task_id.clone(),
                    body: serde_json::from_str(&body)
                        .map_err(|e| JournalError::Corrupt(e.to_string()))?,
                })
            })
            .collect()
    }

    /// Tasks with pending reports whose order is finished locally (flushed at start-up and by the
    /// monitor; an executing task's rows go out with its next grant).
    ///
    /// # Errors
    /// Database errors.
    pub async fn outbox_finished_tasks(&self) -> Result<Vec<TaskId>> {
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT DISTINCT o.task_id FROM outbox o JOIN orders r ON r.task_id = o.task_id
             WHERE o.status = 'pending' AND r.status = 'finished' ORDER BY o.task_id",
        )
        .fetch_all(&self.pool)
        .await?;
        ids.iter()
            .map(|s| TaskId::parse(s).map_err(|e| JournalError::Corrupt(e.to_string())))
            .collect()
    }

    /// Marks a report acknowledged.
    ///
    /// # Errors
    /// Database errors.
    pub async fn outbox_ack(&self, id: i64, now: Timestamp) -> Result<()> {
        sqlx::query("UPDATE outbox SET status = 'acked', attempts = attempts + 1, done_at = ? WHERE id = ? AND status = 'pending'")
            .bind(now.to_rfc3339())
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Records a failed delivery; `final_` rejects the row for good (a 4xx other than 6002).
    ///
    /// # Errors
    /// Database errors.
    pub async fn outbox_fail(
        &self,
        id: i64,
        error: &str,
        final_: bool,
        now: Timestamp,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE outbox SET attempts = attempts + 1, last_error = ?,
                 status = CASE WHEN ? THEN 'rejected' ELSE status END,
                 done_at = CASE WHEN ? THEN ? ELSE done_at END
             WHERE id = ? AND status = 'pending'",
        )
        .bind(error.chars().take(1000).collect::<String>())
        .bind(final_)
        .bind(final_)
        .bind(now.to_rfc3339())
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}

/// Enqueues `body` as a pending report of `task_id`, inside the step's transaction; returns the
/// row id.
pub(super) async fn outbox_enqueue(
    tx: &mut sqlx::Transaction<'static, sqlx::Sqlite>,
    task_id: &TaskId,
    body: &ReportState,
    at: &str,
) -> Result<i64> {
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO outbox (task_id, state, body_json, status, created_at) VALUES (?, ?, ?, 'pending', ?) RETURNING id",
    )
    .bind(task_id.as_str())
    .bind(body.state.as_str())
    .bind(serde_json::to_string(body).map_err(|e| JournalError::Corrupt(e.to_string()))?)
    .bind(at)
    .fetch_one(&mut **tx)
    .await?;
    Ok(id)
}
