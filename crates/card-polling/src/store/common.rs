//! Database-independent Rust of the store, generic over `sqlx::Database`: row decoding, the
//! timestamp bind format, the item-list filter and pagination, and the embedded migration source.
//! Placeholders in built queries are written by sqlx's `QueryBuilder` (`?` or `$n`).

use sqlx::{ColumnIndex, Database, Decode, Encode, QueryBuilder, Row, Type};

use rakuten_types::Timestamp;

use crate::domain::account::Account;
use crate::domain::{Role, Scope, TokenHash};
use crate::priority::TriggerType;
use crate::priority::item_status::ItemStatus;
use crate::store::{
    ExceptionCondition, ItemEventView, ItemFilter, ItemView, LogView, StoreError, StoreResult,
};

/// Bindable text of a timestamp.
pub(crate) fn t(ts: Timestamp) -> String {
    ts.to_rfc3339()
}

/// A stored value that does not parse back into its Rust type.
pub(crate) fn corrupt(what: &str) -> StoreError {
    StoreError::Db(std::sync::Arc::new(sqlx::Error::Decode(
        format!("stored value of {what} is invalid").into(),
    )))
}

/// A required timestamp column (stored as fixed-width RFC 3339 text).
pub(crate) fn ts<R>(row: &R, col: &str) -> StoreResult<Timestamp>
where
    R: Row,
    for<'c> &'c str: ColumnIndex<R>,
    String: for<'r> Decode<'r, R::Database> + Type<R::Database>,
{
    let s: String = row.try_get(col)?;
    Timestamp::parse(&s).map_err(|_| corrupt(col))
}

/// An optional timestamp column.
pub(crate) fn ts_opt<R>(row: &R, col: &str) -> StoreResult<Option<Timestamp>>
where
    R: Row,
    for<'c> &'c str: ColumnIndex<R>,
    String: for<'r> Decode<'r, R::Database> + Type<R::Database>,
{
    let s: Option<String> = row.try_get(col)?;
    s.map(|s| Timestamp::parse(&s).map_err(|_| corrupt(col)))
        .transpose()
}

/// Splits a `char(31)`-separated aggregate.
fn split(s: Option<String>) -> Vec<String> {
    s.map(|s| {
        s.split('\u{1f}')
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect()
    })
    .unwrap_or_default()
}

/// The reason an undecodable priority item is shown and set aside with.
pub(crate) const UNDECODABLE_ROW: &str = "undecodable row";

/// What is wrong with a stored value that did not decode (`stored value of enqueued_at is
/// invalid`), for the reason an undecodable row carries.
fn decode_detail(e: &StoreError) -> String {
    match e {
        StoreError::Db(db) => match &**db {
            sqlx::Error::Decode(d) => d.to_string(),
            other => other.to_string(),
        },
        other => other.to_string(),
    }
}

/// An item's trigger type columns (checked by [`undecodable_item`] and its synchronous twin).
pub(crate) const ITEM_TRIGGER_COLUMNS: [&str; 2] = ["trigger_type", "last_trigger_type"];
/// An item's required timestamp columns.
pub(crate) const ITEM_TIMESTAMPS: [&str; 3] = ["enqueued_at", "last_triggered_at", "next_run_at"];
/// An item's optional timestamp columns.
pub(crate) const ITEM_OPTIONAL_TIMESTAMPS: [&str; 4] = [
    "claim_expires_at",
    "started_at",
    "finished_at",
    "dequeued_at",
];

/// The text of an undecodable item's reason for the error `e` of its check.
pub(crate) fn undecodable_reason(e: &StoreError) -> String {
    format!("{UNDECODABLE_ROW}: {}", decode_detail(e))
}

/// Why an item row (`priority_items`, any select that has its columns) cannot be decoded, or
/// `None` when it can: the typed text columns (status, trigger types, timestamps).
pub(crate) fn undecodable_item<R>(row: &R) -> Option<String>
where
    R: Row,
    for<'c> &'c str: ColumnIndex<R>,
    String: for<'r> Decode<'r, R::Database> + Type<R::Database>,
{
    let check = || -> StoreResult<()> {
        let status: String = row.try_get("status")?;
        ItemStatus::parse(&status).ok_or_else(|| corrupt("status"))?;
        for col in ITEM_TRIGGER_COLUMNS {
            let s: String = row.try_get(col)?;
            TriggerType::parse(&s).ok_or_else(|| corrupt(col))?;
        }
        for col in ITEM_TIMESTAMPS {
            ts(row, col)?;
        }
        for col in ITEM_OPTIONAL_TIMESTAMPS {
            ts_opt(row, col)?;
        }
        Ok(())
    };
    check().err().map(|e| undecodable_reason(&e))
}

/// Decodes an item row selected with the engine's `ITEM_COLUMNS` (`i.*` plus the `sources` and
/// `chain` aggregates, each `char(31)`-separated). A row that does not decode (a poison row: a bad
/// manual edit, a disk fault) is still shown, as far as it can be read, with `failure_reason`
/// saying why, so one bad row never fails a whole list or detail; its
/// unreadable fields show as empty, the epoch, or `failed` / `manual_trigger`.
pub(crate) fn item_view<R>(
    row: &R,
    feature_enabled_at: Timestamp,
    validity: std::time::Duration,
) -> StoreResult<ItemView>
where
    R: Row,
    for<'c> &'c str: ColumnIndex<R>,
    String: for<'r> Decode<'r, R::Database> + Type<R::Database>,
    i64: for<'r> Decode<'r, R::Database> + Type<R::Database>,
{
    let text = |c: &str| row.try_get::<Option<String>, _>(c).ok().flatten();
    let num = |c: &str| row.try_get::<Option<i64>, _>(c).ok().flatten();
    let when = |c: &str| text(c).and_then(|s| Timestamp::parse(&s).ok());
    let trig = |c: &str| text(c).and_then(|s| TriggerType::parse(&s));
    let status = text("status")
        .and_then(|s| ItemStatus::parse(&s))
        .unwrap_or(ItemStatus::Failed);
    let enqueued_at = when("enqueued_at").unwrap_or(Timestamp::from_millis(0));
    Ok(ItemView {
        id: row.try_get("id")?,
        asset_type: text("asset_type").unwrap_or_default(),
        asset_id: text("asset_id").unwrap_or_default(),
        device_no: text("device_no"),
        iccid: text("iccid").unwrap_or_default(),
        shop_id: text("shop_id").unwrap_or_default(),
        agent_chain: split(text("chain")),
        task_type: text("task_type").unwrap_or_default(),
        status,
        trigger_type: trig("trigger_type").unwrap_or(TriggerType::ManualTrigger),
        last_trigger_type: trig("last_trigger_type").unwrap_or(TriggerType::ManualTrigger),
        trigger_sources: split(text("sources")),
        trigger_count: num("trigger_count").unwrap_or(0),
        last_triggered_at: when("last_triggered_at").unwrap_or(enqueued_at),
        attempts: num("attempts").unwrap_or(0),
        max_attempts: num("max_attempts").unwrap_or(0),
        started_at: when("started_at"),
        finished_at: when("finished_at"),
        duration_ms: num("duration_ms"),
        next_run_at: when("next_run_at").filter(|_| status.is_active()),
        claim_expires_at: when("claim_expires_at"),
        enqueued_at,
        dequeued_at: when("dequeued_at"),
        valid_until: enqueued_at.max(feature_enabled_at).plus(validity),
        result: text("result"),
        failure_reason: undecodable_item(row).or_else(|| text("failure_reason")),
        last_log_id: num("last_log_id"),
        operator: text("operator"),
        reason: text("reason"),
        retriggered_from: num("retriggered_from"),
        closed_by: text("closed_by"),
        close_reason: text("close_reason"),
    })
}

/// Decodes a row of `priority_item_events` (`id, kind, trigger_type, source, operator, reason,
/// result, at, actor, claim_fingerprint`).
pub(crate) fn item_event_view<R>(r: &R) -> StoreResult<ItemEventView>
where
    R: Row,
    for<'c> &'c str: ColumnIndex<R>,
    String: for<'x> Decode<'x, R::Database> + Type<R::Database>,
    i64: for<'x> Decode<'x, R::Database> + Type<R::Database>,
{
    Ok(ItemEventView {
        id: r.try_get("id")?,
        kind: r.try_get("kind")?,
        trigger_type: r.try_get("trigger_type")?,
        source: r.try_get("source")?,
        operator: r.try_get("operator")?,
        reason: r.try_get("reason")?,
        result: r.try_get("result")?,
        at: ts(r, "at")?,
        actor: r.try_get("actor")?,
        claim_fingerprint: r.try_get("claim_fingerprint")?,
    })
}

/// Decodes a row of `integration_logs` (`id, operation, request_summary, response_summary,
/// latency_ms, outcome, at`).
pub(crate) fn log_view<R>(r: &R) -> StoreResult<LogView>
where
    R: Row,
    for<'c> &'c str: ColumnIndex<R>,
    String: for<'x> Decode<'x, R::Database> + Type<R::Database>,
    i64: for<'x> Decode<'x, R::Database> + Type<R::Database>,
{
    Ok(LogView {
        id: r.try_get("id")?,
        operation: r.try_get("operation")?,
        request_summary: r.try_get("request_summary")?,
        response_summary: r.try_get("response_summary")?,
        latency_ms: r.try_get("latency_ms")?,
        outcome: r.try_get("outcome")?,
        at: ts(r, "at")?,
    })
}

/// Restricts a query on `priority_items i` to the caller's scope, in SQL (closure-table join).
pub(crate) fn push_scope<DB>(qb: &mut QueryBuilder<DB>, scope: &Scope)
where
    DB: Database,
    String: for<'t> Encode<'t, DB> + Type<DB>,
{
    if let Scope::ShopTree(root) = scope {
        qb.push(" AND i.shop_id IN (SELECT descendant_id FROM shop_closure WHERE ancestor_id = ")
            .push_bind(root.clone())
            .push(")");
    }
}

/// The exceptions view's condition when it asks for all four of them: written exactly as the
/// predicate of the partial index `priority_items_exceptions` (migration 0005), so both engines
/// see that the index covers the query and walk it instead of the whole table.
pub(crate) const ALL_EXCEPTIONS: &str = "(i.status IN ('failed', 'expired') OR i.attempts >= i.max_attempts OR i.failure_reason IS NOT NULL)";

/// Appends the item-list conditions after `… FROM priority_items i WHERE 1 = 1`: scope, shop,
/// filter, cursor, then the keyset order and `LIMIT` (`ORDER BY i.id DESC`, or `ASC` from an
/// `after_id` cursor: the caller reverses that page).
pub(crate) fn push_item_list_filter<DB>(qb: &mut QueryBuilder<DB>, scope: &Scope, f: &ItemFilter)
where
    DB: Database,
    String: for<'t> Encode<'t, DB> + Type<DB>,
    &'static str: for<'t> Encode<'t, DB> + Type<DB>,
    i64: for<'t> Encode<'t, DB> + Type<DB>,
{
    push_item_conditions(qb, scope, f);
    match (f.before_id, f.after_id) {
        (Some(before), _) => {
            qb.push(" AND i.id < ").push_bind(before);
            qb.push(" ORDER BY i.id DESC LIMIT ");
        }
        (None, Some(after)) => {
            qb.push(" AND i.id > ").push_bind(after);
            qb.push(" ORDER BY i.id ASC LIMIT ");
        }
        (None, None) => {
            qb.push(" ORDER BY i.id DESC LIMIT ");
        }
    }
    qb.push_bind(f.limit);
}

/// Appends the conditions of `f` but its cursors (scope, shop, status, task type, trigger,
/// ICCID, enqueue window, exceptions) after `… FROM priority_items i WHERE 1 = 1`.
pub(crate) fn push_item_conditions<DB>(qb: &mut QueryBuilder<DB>, scope: &Scope, f: &ItemFilter)
where
    DB: Database,
    String: for<'t> Encode<'t, DB> + Type<DB>,
    &'static str: for<'t> Encode<'t, DB> + Type<DB>,
    i64: for<'t> Encode<'t, DB> + Type<DB>,
{
    push_scope(qb, scope);
    if let Some(shop) = &f.shop {
        // Intersected with the scope above: a shop outside it leaves nothing.
        qb.push(" AND i.shop_id IN (SELECT descendant_id FROM shop_closure WHERE ancestor_id = ")
            .push_bind(shop.clone())
            .push(")");
    }
    if let Some(s) = f.status {
        qb.push(" AND i.status = ").push_bind(s.as_str());
    }
    if let Some(tt) = &f.task_type {
        qb.push(" AND i.task_type = ").push_bind(tt.clone());
    }
    if let Some(tr) = f.trigger_type {
        qb.push(" AND i.trigger_type = ").push_bind(tr.as_str());
    }
    if let Some(iccid) = &f.iccid {
        qb.push(" AND i.iccid = ").push_bind(iccid.clone());
    }
    if let Some(from) = f.enqueued_from {
        qb.push(" AND i.enqueued_at >= ").push_bind(t(from));
    }
    if let Some(to) = f.enqueued_to {
        qb.push(" AND i.enqueued_at < ").push_bind(t(to));
    }
    let all = [
        ExceptionCondition::Failed,
        ExceptionCondition::Expired,
        ExceptionCondition::AttemptsAtMax,
        ExceptionCondition::HasFailureReason,
    ];
    if all.iter().all(|c| f.exceptions.contains(c)) {
        qb.push(" AND ").push(ALL_EXCEPTIONS);
    } else if !f.exceptions.is_empty() {
        // `1 = 0` is false on both engines (SQLite has no boolean type, PostgreSQL no `0` boolean).
        qb.push(" AND (1 = 0");
        for c in &f.exceptions {
            qb.push(match c {
                ExceptionCondition::Failed => " OR i.status = 'failed'",
                ExceptionCondition::Expired => " OR i.status = 'expired'",
                ExceptionCondition::AttemptsAtMax => " OR i.attempts >= i.max_attempts",
                ExceptionCondition::HasFailureReason => " OR i.failure_reason IS NOT NULL",
            });
        }
        qb.push(")");
    }
}

/// Decodes an `accounts` row found by token hash (`id, role, shop_id, token_sha256,
/// perm_manual_trigger, perm_card_data`). The stored hash is compared again in constant time;
/// a mismatch or an unknown role is no account.
pub(crate) fn account_from_row<R>(row: &R, hash: &TokenHash) -> StoreResult<Option<Account>>
where
    R: Row,
    for<'c> &'c str: ColumnIndex<R>,
    String: for<'x> Decode<'x, R::Database> + Type<R::Database>,
    Vec<u8>: for<'x> Decode<'x, R::Database> + Type<R::Database>,
    bool: for<'x> Decode<'x, R::Database> + Type<R::Database>,
{
    let stored: Vec<u8> = row.try_get("token_sha256")?;
    if !hash.ct_eq(&stored) {
        return Ok(None);
    }
    let role: String = row.try_get("role")?;
    let Some(role) = Role::parse(&role) else {
        return Ok(None);
    };
    Ok(Some(Account {
        id: row.try_get("id")?,
        role,
        shop_id: row.try_get("shop_id")?,
        perm_manual_trigger: row.try_get("perm_manual_trigger")?,
        perm_card_data: row.try_get("perm_card_data")?,
    }))
}

/// (version, description, SQL) of one embedded migration.
pub(crate) type MigrationFile = (i64, &'static str, &'static str);

/// The migrations of one engine's folder, embedded in the binary (the workspace's sqlx has no
/// `macros` feature, so `sqlx::migrate!` is not available; this source is its equivalent), and
/// those of them whose comments were reworded after release (D-released-migrations-pinned).
#[derive(Debug)]
pub(crate) struct Embedded(
    pub(crate) &'static [MigrationFile],
    pub(crate) &'static [rakuten_cli::migrations::Released],
);

impl Embedded {
    /// The migrations as the files have them today, without pinned checksums.
    pub(crate) fn files(&self) -> Vec<sqlx::migrate::Migration> {
        self.0
            .iter()
            .map(|(v, d, sql)| {
                sqlx::migrate::Migration::new(
                    *v,
                    (*d).into(),
                    sqlx::migrate::MigrationType::Simple,
                    sqlx::SqlSafeStr::into_sql_str(*sql),
                    false,
                )
            })
            .collect()
    }
}

impl sqlx::migrate::MigrationSource<'static> for Embedded {
    fn resolve(
        self,
    ) -> futures::future::BoxFuture<
        'static,
        Result<Vec<sqlx::migrate::Migration>, sqlx::error::BoxDynError>,
    > {
        Box::pin(async move { Ok(rakuten_cli::migrations::pin_released(self.files(), self.1)) })
    }
}
