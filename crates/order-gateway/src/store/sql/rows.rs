//! The order task rows and their decoders, one set for both engines: generic over the sqlx row
//! type (the columns have the same names and Rust types on both: fixed-width UTC text
//! timestamps, SQLite INTEGER / PostgreSQL BIGINT as `i64`).

use rakuten_types::intent::{IntentJson, IntentSummary};
use rakuten_types::order::{ReportView, TaskDetail, TaskSummary};
use rakuten_types::{OrderState, Outcome, TaskId, TaskStatus, Timestamp};
use sqlx::{ColumnIndex, Decode, Row, Type};

use crate::store::StoreError;

/// The columns of `tasks` a task's detail and its transitions select, the whole intent included,
/// plus `latest_state`.
pub(crate) const TASK_COLUMNS: &str = "t.task_id, t.site, t.intent_json, t.intent_summary, \
    t.intent_bytes, t.status, t.lease_owner, \
    t.lease_expires_at, t.lease_count, t.created_at, t.updated_at, t.outcome, t.lease_token, \
    t.set_aside_reason, t.not_after, (SELECT r.state FROM task_reports r WHERE r.task_id = t.task_id ORDER BY r.seq DESC LIMIT 1) \
    AS latest_state";

/// [`TASK_COLUMNS`] without the intent's text (`intent_json` is NULL): what every list reads, so
/// a page costs the same whatever the intents hold (D-list-pages-bounded).
pub(crate) const TASK_LIST_COLUMNS: &str = "t.task_id, t.site, CAST(NULL AS TEXT) AS intent_json, \
    t.intent_summary, t.intent_bytes, t.status, t.lease_owner, \
    t.lease_expires_at, t.lease_count, t.created_at, t.updated_at, t.outcome, t.lease_token, \
    t.set_aside_reason, t.not_after, (SELECT r.state FROM task_reports r WHERE r.task_id = t.task_id ORDER BY r.seq DESC LIMIT 1) \
    AS latest_state";

/// One `tasks` row.
#[derive(Debug, Clone)]
pub(crate) struct TaskRow {
    pub task_id: TaskId,
    pub site: String,
    /// The intent's text as received; `None` when the query did not select it (a list).
    pub intent_json: Option<String>,
    /// The summary written at submit (JSON of [`IntentSummary`]).
    pub intent_summary: Option<String>,
    pub intent_bytes: i64,
    pub status: TaskStatus,
    pub lease_owner: Option<String>,
    pub lease_expires_at: Option<Timestamp>,
    pub lease_count: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub outcome: Option<Outcome>,
    pub lease_token: Option<String>,
    pub latest_state: Option<OrderState>,
    pub set_aside_reason: Option<String>,
    pub not_after: Option<Timestamp>,
}

/// A stored value that does not parse back into its Rust type.
pub(crate) fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {e}"))
}

/// A stored task id.
pub(crate) fn task_id(s: &str) -> Result<TaskId, StoreError> {
    TaskId::parse(s).map_err(|e| corrupt("task_id", e))
}

pub(crate) fn ts(s: &str) -> Result<Timestamp, StoreError> {
    Timestamp::parse(s).map_err(|e| corrupt("timestamp", e))
}

pub(crate) fn decode_ts(s: Option<String>) -> Result<Option<Timestamp>, StoreError> {
    s.as_deref().map(ts).transpose()
}

pub(crate) fn order_state(s: &str) -> Result<OrderState, StoreError> {
    s.parse().map_err(|e| corrupt("state", e))
}

impl TaskRow {
    /// Decodes a row selected with [`TASK_COLUMNS`] (either engine).
    pub fn decode<R>(row: &R) -> Result<Self, StoreError>
    where
        R: Row,
        for<'c> &'c str: ColumnIndex<R>,
        String: for<'r> Decode<'r, R::Database> + Type<R::Database>,
        i64: for<'r> Decode<'r, R::Database> + Type<R::Database>,
    {
        let task_id: String = row.try_get("task_id")?;
        let status: String = row.try_get("status")?;
        let outcome: Option<String> = row.try_get("outcome")?;
        let latest: Option<String> = row.try_get("latest_state")?;
        Ok(TaskRow {
            task_id: TaskId::parse(&task_id).map_err(|e| corrupt("task_id", e))?,
            site: row.try_get("site")?,
            intent_json: row.try_get("intent_json")?,
            intent_summary: row.try_get("intent_summary")?,
            intent_bytes: row.try_get("intent_bytes")?,
            status: status.parse().map_err(|e| corrupt("status", e))?,
            lease_owner: row.try_get("lease_owner")?,
            lease_expires_at: decode_ts(row.try_get("lease_expires_at")?)?,
            lease_count: row.try_get("lease_count")?,
            created_at: ts(&row.try_get::<String, _>("created_at")?)?,
            updated_at: ts(&row.try_get::<String, _>("updated_at")?)?,
            outcome: outcome
                .map(|o| o.parse().map_err(|e| corrupt("outcome", e)))
                .transpose()?,
            lease_token: row.try_get("lease_token")?,
            latest_state: latest.as_deref().map(order_state).transpose()?,
            set_aside_reason: row.try_get("set_aside_reason")?,
            not_after: decode_ts(row.try_get("not_after")?)?,
        })
    }

    /// The intent, its text as received (a row selected with [`TASK_COLUMNS`]).
    pub fn intent(&self) -> Result<IntentJson, StoreError> {
        let text = self
            .intent_json
            .clone()
            .ok_or_else(|| corrupt("intent_json", "not selected"))?;
        IntentJson::from_text(text).map_err(|e| corrupt("intent_json", e))
    }

    /// The stored summary; `None` when there is none or it does not read (a list line still
    /// shows the task).
    fn summary_of_intent(&self) -> Option<IntentSummary> {
        serde_json::from_str(self.intent_summary.as_deref()?).ok()
    }

    /// The wire summary.
    pub fn into_summary(self) -> TaskSummary {
        TaskSummary {
            intent: self.summary_of_intent(),
            task_id: self.task_id,
            site: self.site,
            intent_bytes: self.intent_bytes,
            status: self.status,
            lease_owner: self.lease_owner,
            lease_expires_at: self.lease_expires_at,
            lease_count: self.lease_count,
            outcome: self.outcome,
            latest_state: self.latest_state,
            created_at: self.created_at,
            updated_at: self.updated_at,
            not_after: self.not_after,
            set_aside_reason: self.set_aside_reason,
        }
    }

    /// The wire detail, without its history and audit (the caller adds them).
    pub fn into_detail(self) -> Result<TaskDetail, StoreError> {
        Ok(TaskDetail {
            intent: self.intent()?,
            task_id: self.task_id,
            site: self.site,
            intent_bytes: self.intent_bytes,
            status: self.status,
            lease_owner: self.lease_owner,
            lease_expires_at: self.lease_expires_at,
            lease_count: self.lease_count,
            outcome: self.outcome,
            latest_state: self.latest_state,
            created_at: self.created_at,
            updated_at: self.updated_at,
            not_after: self.not_after,
            set_aside_reason: self.set_aside_reason,
            history: Vec::new(),
            operator_actions: Vec::new(),
            evidence_queries: Vec::new(),
        })
    }

    /// Decodes a row selected with [`TASK_LIST_COLUMNS`] into its wire summary; a row that does
    /// not decode (a poison row) is still shown, as far as it can be read, with
    /// `set_aside_reason` saying so, so that one bad row never fails a whole list.
    pub fn summary_or_undecodable<R>(row: &R) -> Result<TaskSummary, StoreError>
    where
        R: Row,
        for<'c> &'c str: ColumnIndex<R>,
        String: for<'r> Decode<'r, R::Database> + Type<R::Database>,
        i64: for<'r> Decode<'r, R::Database> + Type<R::Database>,
    {
        match Self::decode(row) {
            Ok(r) => Ok(r.into_summary()),
            Err(e) => undecodable(row, &e),
        }
    }

    /// Decodes a row selected with [`TASK_COLUMNS`] into its wire detail; a row that does not
    /// decode, its intent included, is shown as far as it can be read (`intent: null`,
    /// `set_aside_reason` saying why).
    pub fn detail_or_undecodable<R>(row: &R) -> Result<TaskDetail, StoreError>
    where
        R: Row,
        for<'c> &'c str: ColumnIndex<R>,
        String: for<'r> Decode<'r, R::Database> + Type<R::Database>,
        i64: for<'r> Decode<'r, R::Database> + Type<R::Database>,
    {
        let e = match Self::decode(row).and_then(Self::into_detail) {
            Ok(d) => return Ok(d),
            Err(e) => e,
        };
        let s = undecodable(row, &e)?;
        Ok(TaskDetail {
            task_id: s.task_id,
            site: s.site,
            intent: IntentJson::null(),
            intent_bytes: s.intent_bytes,
            status: s.status,
            lease_owner: s.lease_owner,
            lease_expires_at: s.lease_expires_at,
            lease_count: s.lease_count,
            outcome: s.outcome,
            latest_state: s.latest_state,
            created_at: s.created_at,
            updated_at: s.updated_at,
            not_after: s.not_after,
            set_aside_reason: s.set_aside_reason,
            history: Vec::new(),
            operator_actions: Vec::new(),
            evidence_queries: Vec::new(),
        })
    }
}

/// Most characters of an undecodable row's reason (its error may quote stored text).
const UNDECODABLE_REASON_CHARS: usize = 300;

/// What can be read of a row that does not decode, `set_aside_reason` naming the cause.
fn undecodable<R>(row: &R, e: &StoreError) -> Result<TaskSummary, StoreError>
where
    R: Row,
    for<'c> &'c str: ColumnIndex<R>,
    String: for<'r> Decode<'r, R::Database> + Type<R::Database>,
    i64: for<'r> Decode<'r, R::Database> + Type<R::Database>,
{
    let text = |c: &str| row.try_get::<Option<String>, _>(c).ok().flatten();
    let when = |c: &str| text(c).and_then(|s| Timestamp::parse(&s).ok());
    let task_id: String = row.try_get("task_id")?;
    let epoch = Timestamp::from_millis(0);
    let reason: String = format!("{UNDECODABLE_ROW}: {e}")
        .chars()
        .take(UNDECODABLE_REASON_CHARS)
        .collect();
    Ok(TaskSummary {
        task_id: TaskId::parse(&task_id).map_err(|_| e.clone())?,
        site: text("site").unwrap_or_default(),
        intent: text("intent_summary").and_then(|s| serde_json::from_str(&s).ok()),
        intent_bytes: row.try_get("intent_bytes").unwrap_or(0),
        status: text("status")
            .and_then(|s| s.parse().ok())
            .unwrap_or(TaskStatus::NeedsHuman),
        lease_owner: text("lease_owner"),
        lease_expires_at: when("lease_expires_at"),
        lease_count: row.try_get("lease_count").unwrap_or(0),
        outcome: text("outcome").and_then(|s| s.parse().ok()),
        latest_state: text("latest_state").and_then(|s| s.parse().ok()),
        created_at: when("created_at").unwrap_or(epoch),
        updated_at: when("updated_at").unwrap_or(epoch),
        not_after: when("not_after"),
        set_aside_reason: Some(reason),
    })
}

/// The reason a poison row is set aside with.
pub(crate) const UNDECODABLE_ROW: &str = "undecodable row";

/// Decodes a `task_reports` row (either engine).
pub(crate) fn decode_report<R>(row: &R) -> Result<ReportView, StoreError>
where
    R: Row,
    for<'c> &'c str: ColumnIndex<R>,
    String: for<'r> Decode<'r, R::Database> + Type<R::Database>,
    i64: for<'r> Decode<'r, R::Database> + Type<R::Database>,
    i32: for<'r> Decode<'r, R::Database> + Type<R::Database>,
{
    Ok(ReportView {
        state: order_state(&row.try_get::<String, _>("state")?)?,
        payable_yen: row.try_get("payable_yen")?,
        pay_deadline: decode_ts(row.try_get("pay_deadline")?)?,
        site_order_id: row.try_get("site_order_id")?,
        evidence_ref: row.try_get("evidence_ref")?,
        detail: row.try_get("detail")?,
        error_code: row.try_get("error_code")?,
        worker_id: row.try_get("worker_id")?,
        operator: row.try_get("operator")?,
        reported_at: ts(&row.try_get::<String, _>("reported_at")?)?,
    })
}
