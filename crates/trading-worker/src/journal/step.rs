//! One step's record ([`StepRecord`]) and what it leaves: [`Journal::step_record`] writes, in one
//! transaction, the order row's new state (guarded by the local status the record's mode needs),
//! the evidence index row, the `order_events` row, the intents it resolves and, when asked, the
//! report in the outbox. Also the evidence numbering ([`Journal::evidence_seq`]) and the events
//! read back ([`Journal::events`]).

use rakuten_types::order::ReportState;
use rakuten_types::{OrderState, Outcome, TaskId, Timestamp, WorkerId};
use sqlx::Row;

use super::intents::{IntentResolution, resolve_in};
use super::orders::{OrderRow, order_from_row};
use super::outbox::outbox_enqueue;
use super::{Journal, JournalError, Result};
use crate::evidence::{EvidenceEntry, EvidenceOf};

type Tx = sqlx::Transaction<'static, sqlx::Sqlite>;

/// Which rows a step may touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordMode {
    /// An executing task (order steps, recovery).
    Executing,
    /// A finished task under post-payment monitoring.
    Monitoring,
    /// A finished task re-reported from the journal (idempotency gate).
    Rereport,
}

/// Everything one step writes, in one transaction: the event, the evidence index row, the order
/// row's new state, an optional intent resolution and an optional outbox report.
#[derive(Debug, Clone)]
pub struct StepRecord {
    /// Task.
    pub task_id: TaskId,
    /// Step name (`cart-add`, `verify`, …).
    pub step: String,
    /// Evidence written for it (already fsynced on disk).
    pub evidence: Option<EvidenceEntry>,
    /// New local order state.
    pub state: OrderState,
    /// Site order id learned.
    pub site_order_id: Option<String>,
    /// Payable amount learned, yen.
    pub payable_yen: Option<i64>,
    /// Pay deadline learned.
    pub pay_deadline: Option<Timestamp>,
    /// Payment method learned.
    pub payment_method: Option<String>,
    /// Detail text (event and report).
    pub detail: Option<String>,
    /// Terminal outcome and error code: finishes the task locally.
    pub finish: Option<(Outcome, Option<i32>)>,
    /// Error code carried by a non-terminal report.
    pub error_code: Option<i32>,
    /// Turn monitoring on/off.
    pub monitoring: Option<bool>,
    /// Pending intents to resolve.
    pub intents: Vec<IntentResolution>,
    /// Enqueue a report of this step.
    pub report: bool,
    /// Which rows may be touched.
    pub mode: RecordMode,
    /// When.
    pub at: Timestamp,
}

impl StepRecord {
    /// What the evidence of this step records besides the page, under number `seq`.
    pub fn evidence_of(&self, seq: i64) -> EvidenceOf {
        EvidenceOf {
            task_id: self.task_id.clone(),
            seq,
            step: self.step.clone(),
            local_state: self.state,
            note: self.detail.clone(),
            at: self.at,
        }
    }

    /// A record with only the essentials set; the rest default to "nothing new".
    pub fn new(task_id: &TaskId, step: &str, state: OrderState, at: Timestamp) -> Self {
        StepRecord {
            task_id: task_id.clone(),
            step: step.to_owned(),
            evidence: None,
            state,
            site_order_id: None,
            payable_yen: None,
            pay_deadline: None,
            payment_method: None,
            detail: None,
            finish: None,
            error_code: None,
            monitoring: None,
            intents: Vec::new(),
            report: true,
            mode: RecordMode::Executing,
            at,
        }
    }
}

/// One `order_events` row.
#[derive(Debug, Clone)]
pub struct EventRow {
    /// Step name.
    pub step: String,
    /// State before.
    pub from_state: Option<String>,
    /// State after.
    pub to_state: String,
    /// Evidence.
    pub evidence_ref: Option<String>,
    /// Detail.
    pub detail: Option<String>,
}

impl Journal {
    /// The evidence sequence number for a step: `preferred` (the §6.1 number of a main step) when
    /// that file name is still unused, else the task's next free number (≥ 6).
    ///
    /// # Errors
    /// Database errors.
    pub async fn evidence_seq(
        &self,
        task_id: &TaskId,
        preferred: Option<i64>,
        step: &str,
    ) -> Result<i64> {
        if let Some(p) = preferred {
            let r = format!("{}/{p:02}-{step}", task_id.as_str());
            let used: Option<i64> =
                sqlx::query_scalar("SELECT 1 FROM evidence WHERE evidence_ref = ?")
                    .bind(&r)
                    .fetch_optional(&self.pool)
                    .await?;
            if used.is_none() {
                return Ok(p);
            }
        }
        let seq: i64 = sqlx::query_scalar(
            "UPDATE orders SET next_seq = next_seq + 1 WHERE task_id = ? RETURNING next_seq - 1",
        )
        .bind(task_id.as_str())
        .fetch_one(&self.pool)
        .await?;
        Ok(seq)
    }

    /// Records one step (see [`StepRecord`]) in one transaction and returns the outbox row id,
    /// if a report was enqueued.
    ///
    /// # Errors
    /// [`JournalError::Conflict`] when the order is not in the status `mode` needs (e.g. already
    /// finished) or the intent is not pending.
    pub async fn step_record(&self, rec: &StepRecord, worker_id: &WorkerId) -> Result<Option<i64>> {
        let at = rec.at.to_rfc3339();
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let before: Option<String> =
            sqlx::query_scalar("SELECT state FROM orders WHERE task_id = ?")
                .bind(rec.task_id.as_str())
                .fetch_optional(&mut *tx)
                .await?;
        let order = order_update(&mut tx, rec, &at).await?;
        if let Some(e) = &rec.evidence {
            evidence_insert(&mut tx, &rec.task_id, e).await?;
        }
        event_insert(&mut tx, rec, before, &at).await?;
        for res in &rec.intents {
            resolve_in(
                &mut tx,
                &rec.task_id,
                res,
                order.site_order_id.as_deref(),
                rec.at,
            )
            .await?;
        }
        let mut outbox_id = None;
        if rec.report {
            let body = report_body(rec, &order, worker_id);
            outbox_id = Some(outbox_enqueue(&mut tx, &rec.task_id, &body, &at).await?);
        }
        tx.commit().await?;
        Ok(outbox_id)
    }

    /// Every state transition of a task, oldest first.
    ///
    /// # Errors
    /// Database errors.
    pub async fn events(&self, task_id: &TaskId) -> Result<Vec<EventRow>> {
        let rows = sqlx::query("SELECT * FROM order_events WHERE task_id = ? ORDER BY id")
            .bind(task_id.as_str())
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(EventRow {
                    step: r.try_get("step")?,
                    from_state: r.try_get("from_state")?,
                    to_state: r.try_get("to_state")?,
                    evidence_ref: r.try_get("evidence_ref")?,
                    detail: r.try_get("detail")?,
                })
            })
            .collect()
    }
}

/// The order row's new state: each field the record learned, the outcome when it finishes the
/// task, guarded by the local status its mode needs (`executing` for a step of the normal path,
/// `finished` for monitoring and re-reports). Returns the row as updated.
async fn order_update(tx: &mut Tx, rec: &StepRecord, at: &str) -> Result<OrderRow> {
    let need = match rec.mode {
        RecordMode::Executing => "executing",
        RecordMode::Monitoring | RecordMode::Rereport => "finished",
    };
    let finishing = rec.finish.is_some();
    let row = sqlx::query(
        "UPDATE orders SET
            state = ?,
            site_order_id = COALESCE(?, site_order_id),
            payable_yen = COALESCE(?, payable_yen),
            pay_deadline = COALESCE(?, pay_deadline),
            payment_method = COALESCE(?, payment_method),
            detail = COALESCE(?, detail),
            last_evidence_ref = COALESCE(?, last_evidence_ref),
            status = CASE WHEN ? THEN 'finished' ELSE status END,
            outcome = COALESCE(?, outcome),
            error_code = CASE WHEN ? THEN ? ELSE error_code END,
            finished_at = CASE WHEN ? THEN ? ELSE finished_at END,
            monitoring = COALESCE(?, monitoring),
            updated_at = ?
         WHERE task_id = ? AND status = ?
         RETURNING *",
    )
    .bind(rec.state.as_str())
    .bind(&rec.site_order_id)
    .bind(rec.payable_yen)
    .bind(rec.pay_deadline.map(|t| t.to_rfc3339()))
    .bind(&rec.payment_method)
    .bind(&rec.detail)
    .bind(rec.evidence.as_ref().map(|e| e.evidence_ref.clone()))
    .bind(finishing)
    .bind(rec.finish.map(|(o, _)| o.as_str()))
    .bind(finishing)
    .bind(rec.finish.and_then(|(_, c)| c))
    .bind(finishing)
    .bind(at)
    .bind(rec.monitoring.map(i64::from))
    .bind(at)
    .bind(rec.task_id.as_str())
    .bind(need)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(row) = row else {
        return Err(JournalError::Conflict(format!(
            "task {} is not {need} locally; step {} not recorded",
            rec.task_id, rec.step
        )));
    };
    order_from_row(&row)
}

/// The evidence index row of files already fsynced on disk.
async fn evidence_insert(tx: &mut Tx, task_id: &TaskId, e: &EvidenceEntry) -> Result<()> {
    sqlx::query(
        "INSERT OR REPLACE INTO evidence (evidence_ref, task_id, seq, step, url, method, http_status, has_html, has_png, at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&e.evidence_ref)
    .bind(task_id.as_str())
    .bind(e.seq)
    .bind(&e.step)
    .bind(&e.url)
    .bind(&e.method)
    .bind(e.http_status.map(i64::from))
    .bind(e.has_html)
    .bind(e.has_png)
    .bind(e.at.to_rfc3339())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The `order_events` row: the transition from `before` to the record's state.
async fn event_insert(
    tx: &mut Tx,
    rec: &StepRecord,
    before: Option<String>,
    at: &str,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO order_events (task_id, step, from_state, to_state, evidence_ref, detail, at)
         VALUES (?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(rec.task_id.as_str())
    .bind(&rec.step)
    .bind(before)
    .bind(rec.state.as_str())
    .bind(rec.evidence.as_ref().map(|e| e.evidence_ref.clone()))
    .bind(&rec.detail)
    .bind(at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The report of a step, from the record and the order row as updated: terminal when the step
/// finishes the task or re-reports a finished one, which then carries the stored outcome and,
/// on a re-report, the stored error code.
fn report_body(rec: &StepRecord, order: &OrderRow, worker_id: &WorkerId) -> ReportState {
    let terminal = rec.finish.is_some() || rec.mode == RecordMode::Rereport;
    ReportState {
        worker_id: worker_id.clone(),
        lease_token: None,
        state: rec.state,
        payable_yen: order.payable_yen,
        pay_deadline: order.pay_deadline,
        site_order_id: order.site_order_id.clone(),
        evidence_ref: rec
            .evidence
            .as_ref()
            .map(|e| e.evidence_ref.clone())
            .or(order.last_evidence_ref.clone()),
        detail: rec.detail.clone(),
        error_code: rec.finish.and_then(|(_, c)| c).or(rec.error_code).or(
            if rec.mode == RecordMode::Rereport {
                order.error_code
            } else {
                None
            },
        ),
        terminal,
        outcome: if terminal { order.outcome } else { None },
    }
}
