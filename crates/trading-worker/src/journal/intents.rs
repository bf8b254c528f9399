//! Write-ahead intents of the irreversible actions (submit, pay): pending is committed before
//! the site is called, then resolved done or aborted, inside the step's transaction or alone
//! ([`Journal::intent_resolve`]). A pending intent found later forces the verification branch.

use rakuten_types::{TaskId, Timestamp};
use sqlx::Row;

use super::{Journal, JournalError, Result, ts};

/// Irreversible actions guarded by a write-ahead entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Order submission.
    Submit,
    /// Payment.
    Pay,
}

impl Action {
    /// Stored name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Action::Submit => "submit",
            Action::Pay => "pay",
        }
    }
}

/// One `intents` row.
#[derive(Debug, Clone)]
pub struct IntentRow {
    /// Action.
    pub action: String,
    /// `pending`, `done` or `aborted`.
    pub status: String,
    /// Why it was aborted (or what was found).
    pub reason: Option<String>,
    /// Site order id, when known.
    pub site_order_id: Option<String>,
    /// Written.
    pub created_at: Timestamp,
}

/// How to resolve a pending intent inside a step's transaction.
#[derive(Debug, Clone)]
pub struct IntentResolution {
    /// Which action.
    pub action: Action,
    /// `true` = done, `false` = aborted.
    pub done: bool,
    /// Reason or remark.
    pub reason: Option<String>,
}

impl Journal {
    /// Writes a pending intent, committed before the caller acts.
    ///
    /// # Errors
    /// [`JournalError::Conflict`] when one is already pending or done for this action.
    pub async fn intent_begin(
        &self,
        task_id: &TaskId,
        action: Action,
        now: Timestamp,
    ) -> Result<()> {
        let done: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM intents WHERE task_id = ? AND action = ? AND status = 'done'",
        )
        .bind(task_id.as_str())
        .bind(action.as_str())
        .fetch_optional(&self.pool)
        .await?;
        if done.is_some() {
            return Err(JournalError::Conflict(format!(
                "{} already done for {task_id}",
                action.as_str()
            )));
        }
        sqlx::query(
            "INSERT INTO intents (task_id, action, status, created_at) VALUES (?, ?, 'pending', ?)",
        )
        .bind(task_id.as_str())
        .bind(action.as_str())
        .bind(now.to_rfc3339())
        .execute(&self.pool)
        .await
        .map_err(|e| match e {
            sqlx::Error::Database(d) if d.is_unique_violation() => {
                JournalError::Conflict(format!("{} already pending for {task_id}", action.as_str()))
            }
            e => JournalError::Db(e),
        })?;
        Ok(())
    }

    /// Resolves a pending intent outside a step (e.g. aborted because the lease was lost).
    ///
    /// # Errors
    /// [`JournalError::Conflict`] when none is pending.
    pub async fn intent_resolve(
        &self,
        task_id: &TaskId,
        res: &IntentResolution,
        site_order_id: Option<&str>,
        now: Timestamp,
    ) -> Result<()> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        resolve_in(&mut tx, task_id, res, site_order_id, now).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Every intent of a task, oldest first.
    ///
    /// # Errors
    /// Database errors.
    pub async fn intents(&self, task_id: &TaskId) -> Result<Vec<IntentRow>> {
        let rows = sqlx::query("SELECT * FROM intents WHERE task_id = ? ORDER BY id")
            .bind(task_id.as_str())
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(IntentRow {
                    action: r.try_get("action")?,
                    status: r.try_get("status")?,
                    reason: r.try_get("reason")?,
                    site_order_id: r.try_get("site_order_id")?,
                    created_at: ts(Some(r.try_get("created_at")?))?.unwrap_or(Timestamp::EPOCH),
                })
            })
            .collect()
    }
}

pub(super) async fn resolve_in(
    tx: &mut sqlx::Transaction<'static, sqlx::Sqlite>,
    task_id: &TaskId,
    res: &IntentResolution,
    site_order_id: Option<&str>,
    now: Timestamp,
) -> Result<()> {
    let n = sqlx::query(
        "UPDATE intents SET status = ?, reason = ?, site_order_id = COALESCE(?, site_order_id), resolved_at = ?
         WHERE task_id = ? AND action = ? AND status = 'pending'",
    )
    .bind(if res.done { "done" } else { "aborted" })
    .bind(&res.reason)
    .bind(site_order_id)
    .bind(now.to_rfc3339())
    .bind(task_id.as_str())
    .bind(res.action.as_str())
    .execute(&mut **tx)
    .await?
    .rows_affected();
    if n == 0 {
        return Err(JournalError::Conflict(format!(
            "no pending {} intent for {task_id}",
            res.action.as_str()
        )));
    }
    Ok(())
}
