//! The local SQLite journal (spec §6.1), the authority for what this worker executed: `orders`,
//! `order_events` (state transitions), `evidence` (index of files on disk), `intents` (write-ahead
//! entries for irreversible actions) and `outbox` (reports not yet acknowledged). Schema in
//! `migrations/sqlite`. WAL with `synchronous=FULL`: a committed row survives a crash or power
//! loss. Every write is one transaction started `BEGIN IMMEDIATE`, and every status change is a
//! guarded `UPDATE … WHERE status = …`; zero rows is a [`JournalError::Conflict`].

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use rakuten_types::order::{LeaseGrant, ReportState};
use rakuten_types::{OrderState, Outcome, TaskId, Timestamp, WorkerId};
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{Row, SqlSafeStr, SqlitePool};

use crate::evidence::{EvidenceEntry, EvidenceOf};

/// Journal failures.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// SQLite failed.
    #[error("journal database: {0}")]
    Db(#[from] sqlx::Error),
    /// Migrations failed.
    #[error("journal migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A guarded update matched no row: the record is not in the state the caller assumed.
    #[error("journal conflict: {0}")]
    Conflict(String),
    /// A stored value could not be read back.
    #[error("journal corrupt: {0}")]
    Corrupt(String),
}

type Result<T> = std::result::Result<T, JournalError>;

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

/// The migrations of `migrations/sqlite`, embedded at compile time (built by hand: `sqlx::migrate!`
/// needs sqlx's `macros` feature, see D-embedded-migrations).
pub fn migrator() -> Migrator {
    Migrator::with_migrations(rakuten_cli::migrations::pin_released(embedded(), RELEASED))
}

fn embedded() -> Vec<Migration> {
    vec![Migration::new(
        1,
        "journal".into(),
        MigrationType::Simple,
        sqlx::AssertSqlSafe(include_str!("../migrations/sqlite/0001_journal.sql")).into_sql_str(),
        false,
    )]
}

/// Migrations whose comments were reworded after release (D-released-migrations-pinned).
const RELEASED: &[rakuten_cli::migrations::Released] = &[rakuten_cli::migrations::Released {
    version: 1,
    checksum: "328186efa9d83ce9a0e3ab3b8f57e577ae91482a904942aff31035f9050c110e7f44d330195028e1f7f764888e189cbf",
    statements: "00276db3efd70308346ae8aee899cf1d1e5d241cfb9486d4bbd3940c9f6559dc362b395fdf35029164eccfea00b05fd3",
}];

#[cfg(test)]
mod released_tests {
    #[test]
    fn released_migrations_keep_their_statements() {
        rakuten_cli::migrations::check_released(&super::embedded(), super::RELEASED).unwrap();
    }
}

/// The journal.
#[derive(Debug, Clone)]
pub struct Journal {
    pool: SqlitePool,
}

fn ts(s: Option<String>) -> Result<Option<Timestamp>> {
    s.map(|s| Timestamp::parse(&s).map_err(|e| JournalError::Corrupt(e.to_string())))
        .transpose()
}

fn order_from_row(r: &SqliteRow) -> Result<OrderRow> {
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
    /// Opens (creating the file and its directory if missing) and migrates the journal.
    ///
    /// # Errors
    /// The file cannot be opened or migrated.
    pub async fn open(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| JournalError::Db(sqlx::Error::Io(e)))?;
        }
        let opts = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(opts)
            .await?;
        migrator().run(&pool).await?;
        Ok(Journal { pool })
    }

    /// Clean stop: moves everything in the write-ahead log into the database file
    /// (`PRAGMA wal_checkpoint(TRUNCATE)`) and closes the connections, so that `trading.db` alone
    /// holds the whole journal afterwards (a file copy of it is then a complete backup; while the
    /// worker runs, use `VACUUM INTO`, see the README). A failed checkpoint is logged: SQLite
    /// replays the log at the next open, nothing is lost.
    pub async fn close(&self) {
        if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&self.pool)
            .await
        {
            tracing::warn!(error = %e, "journal checkpoint on shutdown failed; the WAL is replayed at the next start");
        }
        self.pool.close().await;
    }

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
        .bind(&at)
        .bind(rec.monitoring.map(i64::from))
        .bind(&at)
        .bind(rec.task_id.as_str())
        .bind(need)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            return Err(JournalError::Conflict(format!(
                "task {} is not {need} locally; step {} not recorded",
                rec.task_id, rec.step
            )));
        };
        let order = order_from_row(&row)?;
        if let Some(e) = &rec.evidence {
            sqlx::query(
                "INSERT OR REPLACE INTO evidence (evidence_ref, task_id, seq, step, url, method, http_status, has_html, has_png, at)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(&e.evidence_ref)
            .bind(rec.task_id.as_str())
            .bind(e.seq)
            .bind(&e.step)
            .bind(&e.url)
            .bind(&e.method)
            .bind(e.http_status.map(i64::from))
            .bind(e.has_html)
            .bind(e.has_png)
            .bind(e.at.to_rfc3339())
            .execute(&mut *tx)
            .await?;
        }
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
        .bind(&at)
        .execute(&mut *tx)
        .await?;
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
            let terminal = rec.finish.is_some() || rec.mode == RecordMode::Rereport;
            let body = ReportState {
                worker_id: Some(worker_id.clone()),
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
            };
            let id: i64 = sqlx::query_scalar(
                "INSERT INTO outbox (task_id, state, body_json, status, created_at) VALUES (?, ?, ?, 'pending', ?) RETURNING id",
            )
            .bind(rec.task_id.as_str())
            .bind(rec.state.as_str())
            .bind(serde_json::to_string(&body).map_err(|e| JournalError::Corrupt(e.to_string()))?)
            .bind(&at)
            .fetch_one(&mut *tx)
            .await?;
            outbox_id = Some(id);
        }
        tx.commit().await?;
        Ok(outbox_id)
    }

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

async fn resolve_in(
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    async fn journal_with_task() -> (tempfile::TempDir, Journal, TaskId) {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(&dir.path().join("t.db")).await.unwrap();
        let id = TaskId::parse("po-1").unwrap();
        let grant = LeaseGrant {
            task_id: id.clone(),
            site: "rakuten".into(),
            intent: json!({"item_url": "u"}).into(),
            lease_expires_at: Timestamp::EPOCH,
            lease_count: 1,
            known_state: None,
            lease_token: "tok".into(),
        };
        let (_, inserted) = j.order_accept(&grant, Timestamp::EPOCH).await.unwrap();
        assert!(inserted);
        (dir, j, id)
    }

    #[tokio::test]
    async fn an_intent_cannot_be_begun_twice_or_after_it_was_done() {
        let (_d, j, id) = journal_with_task().await;
        j.intent_begin(&id, Action::Submit, Timestamp::EPOCH)
            .await
            .unwrap();
        assert!(matches!(
            j.intent_begin(&id, Action::Submit, Timestamp::EPOCH).await,
            Err(JournalError::Conflict(_))
        ));
        let done = IntentResolution {
            action: Action::Submit,
            done: true,
            reason: None,
        };
        j.intent_resolve(&id, &done, Some("n-1"), Timestamp::EPOCH)
            .await
            .unwrap();
        assert!(matches!(
            j.intent_resolve(&id, &done, None, Timestamp::EPOCH).await,
            Err(JournalError::Conflict(_))
        ));
        assert!(matches!(
            j.intent_begin(&id, Action::Submit, Timestamp::EPOCH).await,
            Err(JournalError::Conflict(_))
        ));
        let rows = j.intents(&id).await.unwrap();
        assert_eq!(
            (
                rows.len(),
                rows[0].status.as_str(),
                rows[0].site_order_id.as_deref()
            ),
            (1, "done", Some("n-1"))
        );
    }

    #[tokio::test]
    async fn a_finished_task_refuses_execution_steps_and_keeps_its_outbox_row() {
        let (_d, j, id) = journal_with_task().await;
        let w = WorkerId::parse("w").unwrap();
        let mut fin = StepRecord::new(&id, "payment", OrderState::Paid, Timestamp::EPOCH);
        fin.finish = Some((Outcome::Succeeded, None));
        let outbox = j.step_record(&fin, &w).await.unwrap();
        assert!(outbox.is_some());
        let row = j.order_get(&id).await.unwrap().unwrap();
        assert_eq!(
            (row.status, row.outcome),
            (LocalStatus::Finished, Some(Outcome::Succeeded))
        );
        let late = StepRecord::new(&id, "cart-add", OrderState::InCart, Timestamp::EPOCH);
        assert!(matches!(
            j.step_record(&late, &w).await,
            Err(JournalError::Conflict(_))
        ));
        let pending = j.outbox_pending(&id).await.unwrap();
        assert_eq!(pending.len(), 1);
        assert!(pending[0].body.terminal);
        assert_eq!(pending[0].body.outcome, Some(Outcome::Succeeded));
        assert_eq!(j.outbox_finished_tasks().await.unwrap(), vec![id.clone()]);
        j.outbox_ack(pending[0].id, Timestamp::EPOCH).await.unwrap();
        assert!(j.outbox_pending(&id).await.unwrap().is_empty());
    }
}
