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
    StoreError::Db(sqlx::Error::Decode(
        format!("stored value of {what} is invalid").into(),
    ))
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

/// Decodes an item row selected with the driver's `ITEM_COLUMNS` (`i.*` plus the `sources` and
/// `chain` aggregates, each `char(31)`-separated).
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
    let status: String = row.try_get("status")?;
    let status = ItemStatus::parse(&status).ok_or_else(|| corrupt("status"))?;
    let trig = |col: &str| -> StoreResult<TriggerType> {
        let s: String = row.try_get(col)?;
        TriggerType::parse(&s).ok_or_else(|| corrupt(col))
    };
    let enqueued_at = ts(row, "enqueued_at")?;
    Ok(ItemView {
        id: row.try_get("id")?,
        asset_type: row.try_get("asset_type")?,
        asset_id: row.try_get("asset_id")?,
        device_no: row.try_get("device_no")?,
        iccid: row.try_get("iccid")?,
        shop_id: row.try_get("shop_id")?,
        agent_chain: split(row.try_get("chain")?),
        task_type: row.try_get("task_type")?,
        status,
        trigger_type: trig("trigger_type")?,
        last_trigger_type: trig("last_trigger_type")?,
        trigger_sources: split(row.try_get("sources")?),
        trigger_count: row.try_get("trigger_count")?,
        last_triggered_at: ts(row, "last_triggered_at")?,
        attempts: row.try_get("attempts")?,
        max_attempts: row.try_get("max_attempts")?,
        started_at: ts_opt(row, "started_at")?,
        finished_at: ts_opt(row, "finished_at")?,
        duration_ms: row.try_get("duration_ms")?,
        next_run_at: if status.is_active() {
            Some(ts(row, "next_run_at")?)
        } else {
            None
        },
        claim_expires_at: ts_opt(row, "claim_expires_at")?,
        enqueued_at,
        dequeued_at: ts_opt(row, "dequeued_at")?,
        valid_until: enqueued_at.max(feature_enabled_at).plus(validity),
        result: row.try_get("result")?,
        failure_reason: row.try_get("failure_reason")?,
        last_log_id: row.try_get("last_log_id")?,
        operator: row.try_get("operator")?,
        reason: row.try_get("reason")?,
        retriggered_from: row.try_get("retriggered_from")?,
        closed_by: row.try_get("closed_by")?,
        close_reason: row.try_get("close_reason")?,
    })
}

/// Decodes a row of `priority_item_events` (`id, kind, trigger_type, source, operator, reason,
/// result, at`).
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

/// Appends the item-list conditions after `… FROM priority_items i WHERE 1 = 1`: scope, filter,
/// then `ORDER BY i.id DESC LIMIT`.
pub(crate) fn push_item_list_filter<DB>(qb: &mut QueryBuilder<DB>, scope: &Scope, f: &ItemFilter)
where
    DB: Database,
    String: for<'t> Encode<'t, DB> + Type<DB>,
    &'static str: for<'t> Encode<'t, DB> + Type<DB>,
    i64: for<'t> Encode<'t, DB> + Type<DB>,
{
    push_scope(qb, scope);
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
    if !f.exceptions.is_empty() {
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
    if let Some(before) = f.before_id {
        qb.push(" AND i.id < ").push_bind(before);
    }
    qb.push(" ORDER BY i.id DESC LIMIT ").push_bind(f.limit);
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
/// `macros` feature, so `sqlx::migrate!` is not available; this source is its equivalent).
#[derive(Debug)]
pub(crate) struct Embedded(pub(crate) &'static [MigrationFile]);

impl sqlx::migrate::MigrationSource<'static> for Embedded {
    fn resolve(
        self,
    ) -> futures::future::BoxFuture<
        'static,
        Result<Vec<sqlx::migrate::Migration>, sqlx::error::BoxDynError>,
    > {
        Box::pin(async move {
            Ok(self
                .0
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
                .collect())
        })
    }
}
