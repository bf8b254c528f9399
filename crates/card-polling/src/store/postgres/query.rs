//! Scoped reads. The scope is part of the SQL (closure-table join), never a filter after loading;
//! an item out of scope is simply not found.

use sqlx::{PgPool, Postgres, QueryBuilder, Row};

use rakuten_types::Timestamp;

use super::rows::{ITEM_COLUMNS, item_view, ts};
use super::t;
use crate::domain::Scope;
use crate::priority::VALIDITY;
use crate::store::{
    ExceptionCondition, ItemDetail, ItemEventView, ItemFilter, ItemView, LogView, StoreResult,
};

fn push_scope(qb: &mut QueryBuilder<Postgres>, scope: &Scope) {
    if let Scope::ShopTree(root) = scope {
        qb.push(" AND i.shop_id IN (SELECT descendant_id FROM shop_closure WHERE ancestor_id = ")
            .push_bind(root.clone())
            .push(")");
    }
}

pub(crate) async fn list(
    pool: &PgPool,
    feature: Timestamp,
    scope: &Scope,
    f: &ItemFilter,
) -> StoreResult<Vec<ItemView>> {
    let mut qb = QueryBuilder::<Postgres>::new(format!(
        "SELECT {ITEM_COLUMNS} FROM priority_items i WHERE 1 = 1"
    ));
    push_scope(&mut qb, scope);
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
        qb.push(" AND (FALSE");
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
    let rows = qb.build().fetch_all(pool).await?;
    rows.iter()
        .map(|r| item_view(r, feature, VALIDITY))
        .collect()
}

pub(crate) async fn get(
    pool: &PgPool,
    feature: Timestamp,
    scope: &Scope,
    id: i64,
) -> StoreResult<Option<ItemDetail>> {
    let mut qb = QueryBuilder::<Postgres>::new(format!(
        "SELECT {ITEM_COLUMNS} FROM priority_items i WHERE i.id = "
    ));
    qb.push_bind(id);
    push_scope(&mut qb, scope);
    let Some(row) = qb.build().fetch_optional(pool).await? else {
        return Ok(None);
    };
    let item = item_view(&row, feature, VALIDITY)?;
    let events = sqlx::query(
        "SELECT id, kind, trigger_type, source, operator, reason, result, at \
         FROM (SELECT * FROM priority_item_events WHERE item_id = $1 ORDER BY id DESC LIMIT 1000) AS e ORDER BY id",
    )
    .bind(id)
    .fetch_all(pool)
    .await?
    .iter()
    .map(|r| {
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
    })
    .collect::<StoreResult<Vec<_>>>()?;
    let logs = sqlx::query(
        "SELECT id, operation, request_summary, response_summary, latency_ms, outcome, at \
         FROM (SELECT * FROM integration_logs WHERE item_id = $1 ORDER BY id DESC LIMIT 100) AS l ORDER BY id",
    )
    .bind(id)
    .fetch_all(pool)
    .await?
    .iter()
    .map(|r| {
        Ok(LogView {
            id: r.try_get("id")?,
            operation: r.try_get("operation")?,
            request_summary: r.try_get("request_summary")?,
            response_summary: r.try_get("response_summary")?,
            latency_ms: r.try_get("latency_ms")?,
            outcome: r.try_get("outcome")?,
            at: ts(r, "at")?,
        })
    })
    .collect::<StoreResult<Vec<_>>>()?;
    Ok(Some(ItemDetail { item, events, logs }))
}
