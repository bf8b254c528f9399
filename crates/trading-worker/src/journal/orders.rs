//! The `orders` row of a task: inserted when its first grant is accepted, then updated by every
//! step ([`super::StepRecord`]); read back by recovery, the idempotency gate and the monitor.

use std::str::FromStr;

use rakuten_types::order::LeaseGrant;
use rakuten_types::{OrderState, Outcome, TaskId, Timestamp};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use super::{Journal, JournalError, Result, ts};

/// Local execution status of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalStatus {
    /// Steps may still run.
    Executing,
    /// Done here; a new lease only re-reports (the idempotency gate, §6).
    Finished,
}

/// One `orders` row.
#[derive(Debug, Clone)]
pub struct OrderRow {
    /// Task.
    pub task_id: TaskId,
    /// Site.
    pub site: String,
    /// The intent as leased.
    pub intent_json: String,
    /// Local execution status.
    pub status: LocalStatus,
    /// Where the order stands, as far as this worker knows.
    pub state: OrderState,
    /// Terminal outcome (finished only).
    pub outcome: Option<Outcome>,
    /// Error code of the stop, if any.
    pub error_code: Option<i32>,
    /// Last detail text.
    pub detail: Option<String>,
    /// The scraper's purchase block (JSON).
    pub purchase_json: Option<String>,
    /// Site order id once known.
    pub site_order_id: Option<String>,
    /// Payable, yen.
    pub payable_yen: Option<i64>,
    /// Pay deadline.
    pub pay_deadline: Option<Timestamp>,
    /// Payment method.
    pub payment_method: Option<String>,
    /// Latest evidence.
    pub last_evidence_ref: Option<String>,
    /// Token of the latest grant.
    pub lease_token: Option<String>,
    /// Latest grant's lease count.
    pub lease_count: i64,
    /// Whether post-payment monitoring watches it.
    pub monitoring: bool,
    /// Whether the pay-deadline warning was given.
    pub deadline_alerted: bool,
    /// First accepted.
    pub created_at: Timestamp,
}

pub(super) fn order_from_row(r: &SqliteRow) -> Result<OrderRow> {
    let corrupt = |e: String| JournalError::Corrupt(e);
    let status: String = r.try_get("status")?;
    Ok(OrderRow {
        task_id: TaskId::parse(&r.try_get::<String, _>("task_id")?)
            .map_err(|e| corrupt(e.to_string()))?,
        site: r.try_get("site")?,
        intent_json: r.try_get("intent_json")?,
        status: if status == "finished" {
            LocalStatus::Finished
        } else {
            LocalStatus::Executing
        },
        state: OrderState::from_str(&r.try_get::<String, _>("state")?)
            .map_err(|e| corrupt(e.to_string()))?,
        outcome: r
            .try_get::<Option<String>, _>("outcome")?
            .map(|o| Outcome::from_str(&o).map_err(|e| corrupt(e.to_string())))
            .transpose()?,
        error_code: r.try_get::<Option<i64>, _>("error_code")?.map(|c| c as i32),
        detail: r.try_get("detail")?,
        purchase_json: r.try_get("purchase_json")?,
        site_order_id: r.try_get("site_order_id")?,
        payable_yen: r.try_get("payable_yen")?,
        pay_deadline: ts(r.try_get("pay_deadline")?)?,
        payment_method: r.try_get("payment_method")?,
        last_evidence_ref: r.try_get("last_evidence_ref")?,
        lease_token: r.try_get("lease_token")?,
        lease_count: r.try_get("lease_count")?,
        monitoring: r.try_get::<i64, _>("monitoring")? == 1,
        deadline_alerted: r.try_get::<i64, _>("deadline_alerted")? == 1,
        created_at: ts(Some(r.try_get("created_at")?))?.unwrap_or(Timestamp::EPOCH),
    })
}

impl Journal {
    /// One task's row.
    ///
    /// # Errors
    /// Database errors.
    pub async fn order_get(&self, task_id: &TaskId) -> Result<Option<OrderRow>> {
        let row = sqlx::query("SELECT * FROM orders WHERE task_id = ?")
            .bind(task_id.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(order_from_row).transpose()
    }

    /// Records a grant: inserts the task (state `created`) on first sight, else stores the new
    /// lease token and count. Returns the row and whether it was inserted now.
    ///
    /// # Errors
    /// Database errors.
    pub async fn order_accept(
        &self,
        grant: &LeaseGrant,
        now: Timestamp,
    ) -> Result<(OrderRow, bool)> {
        let now_s = now.to_rfc3339();
        let existed = self.order_get(&grant.task_id).await?.is_some();
        sqlx::query(
            "INSERT INTO orders (task_id, site, intent_json, status, state, lease_token, lease_count, created_at, updated_at)
             VALUES (?, ?, ?, 'executing', 'created', ?, ?, ?, ?)
             ON CONFLICT (task_id) DO UPDATE SET lease_token = excluded.lease_token,
                 lease_count = excluded.lease_count, updated_at = excluded.updated_at",
        )
        .bind(grant.task_id.as_str())
        .bind(&grant.site)
        .bind(grant.intent.to_string())
        .bind(&grant.lease_token)
        .bind(grant.lease_count)
        .bind(&now_s)
        .bind(&now_s)
        .execute(&self.pool)
        .await?;
        let row = self
            .order_get(&grant.task_id)
            .await?
            .ok_or_else(|| JournalError::Conflict("order row vanished after insert".into()))?;
        Ok((row, !existed))
    }

    /// Stores the item's purchase block.
    ///
    /// # Errors
    /// Database errors.
    pub async fn order_set_purchase(&self, task_id: &TaskId, purchase_json: &str) -> Result<()> {
        sqlx::query("UPDATE orders SET purchase_json = ? WHERE task_id = ?")
            .bind(purchase_json)
            .bind(task_id.as_str())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Marks the pay-deadline warning as given.
    ///
    /// # Errors
    /// Database errors.
    pub async fn order_mark_deadline_alerted(&self, task_id: &TaskId) -> Result<()> {
        sqlx::query("UPDATE orders SET deadline_alerted = 1 WHERE task_id = ?")
            .bind(task_id.as_str())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The tasks this journal attributes site order `site_order_id` to: the task whose row holds
    /// it, and any task whose submit or pay intent was resolved with it. Every order this worker
    /// placed is recorded here in the same transaction as its submit step (D-recovery-verdicts).
    ///
    /// # Errors
    /// Database errors, or a stored task id that does not parse.
    pub async fn order_tasks_by_site_order_id(&self, site_order_id: &str) -> Result<Vec<TaskId>> {
        let rows = sqlx::query(
            "SELECT task_id FROM orders WHERE site_order_id = ?1
             UNION SELECT task_id FROM intents WHERE site_order_id = ?1
             ORDER BY task_id",
        )
        .bind(site_order_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                TaskId::parse(&r.try_get::<String, _>("task_id")?)
                    .map_err(|e| JournalError::Corrupt(e.to_string()))
            })
            .collect()
    }

    /// Orders under post-payment monitoring.
    ///
    /// # Errors
    /// Database errors.
    pub async fn orders_monitored(&self) -> Result<Vec<OrderRow>> {
        let rows = sqlx::query("SELECT * FROM orders WHERE monitoring = 1 ORDER BY created_at")
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(order_from_row).collect()
    }
}
