//! Scoped reads. The scope is part of the SQL (closure-table join), never a filter after loading;
//! an item out of scope is simply not found.

use async_trait::async_trait;
use futures::FutureExt;

use super::SqlStore;
use crate::domain::asset::AssetRef;
use crate::store::{Demand, EnqueuedItem, ItemStore};

use sqlx::QueryBuilder;

use rakuten_types::Timestamp;

use super::dialect::ITEM_COLUMNS;
use crate::store::common::item_view;
use super::{Db, Pool};
use crate::domain::Scope;
use crate::priority::VALIDITY;
use crate::store::common::{
    item_event_view, log_view, push_item_conditions, push_item_list_filter, push_scope,
};
use crate::store::{COUNT_CAP, ItemDetail, ItemFilter, ItemView, StoreResult};

/// A shop filter folded into the scope: the shop's tree when the shop lies within `scope` (one
/// `shop_closure` probe), `None` when it does not — then nothing matches, exactly as for a shop
/// that does not exist. One `IN (…)` instead of two intersected ones: PostgreSQL walked the table
/// to find that two disjoint trees share no item (30 ms at 100,000 items, D-console-keyset-paging).
async fn narrow(pool: &Pool, scope: &Scope, f: &ItemFilter) -> StoreResult<Option<(Scope, ItemFilter)>> {
    let Some(shop) = &f.shop else {
        return Ok(Some((scope.clone(), f.clone())));
    };
    if let Scope::ShopTree(root) = scope {
        let within: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM shop_closure WHERE ancestor_id = $1 AND descendant_id = $2",
        )
        .bind(root)
        .bind(shop)
        .fetch_one(pool)
        .await?;
        if within == 0 {
            return Ok(None);
        }
    }
    let narrowed = ItemFilter {
        shop: None,
        ..f.clone()
    };
    Ok(Some((Scope::ShopTree(shop.clone()), narrowed)))
}

pub(crate) async fn list(
    pool: &Pool,
    feature: Timestamp,
    scope: &Scope,
    f: &ItemFilter,
) -> StoreResult<Vec<ItemView>> {
    let Some((scope, f)) = narrow(pool, scope, f).await? else {
        return Ok(Vec::new());
    };
    let (scope, f) = (&scope, &f);
    let mut qb = QueryBuilder::<Db>::new(format!(
        "SELECT {ITEM_COLUMNS} FROM priority_items i WHERE 1 = 1"
    ));
    push_item_list_filter(&mut qb, scope, f);
    let rows = qb.build().fetch_all(pool).await?;
    let mut items = rows
        .iter()
        .map(|r| item_view(r, feature, VALIDITY))
        .collect::<StoreResult<Vec<_>>>()?;
    if f.before_id.is_none() && f.after_id.is_some() {
        // The newer page is walked oldest first from the cursor; the list is newest first.
        items.reverse();
    }
    Ok(items)
}

pub(crate) async fn count(pool: &Pool, scope: &Scope, f: &ItemFilter) -> StoreResult<i64> {
    let Some((scope, f)) = narrow(pool, scope, f).await? else {
        return Ok(0);
    };
    let (scope, f) = (&scope, &f);
    let mut qb = QueryBuilder::<Db>::new("SELECT COUNT(*) FROM (SELECT 1 FROM priority_items i WHERE 1 = 1");
    push_item_conditions(&mut qb, scope, f);
    qb.push(" LIMIT ").push_bind(COUNT_CAP + 1).push(") AS capped");
    Ok(qb.build_query_scalar::<i64>().fetch_one(pool).await?)
}

pub(crate) async fn get(
    pool: &Pool,
    feature: Timestamp,
    scope: &Scope,
    id: i64,
) -> StoreResult<Option<ItemDetail>> {
    let mut qb = QueryBuilder::<Db>::new(format!(
        "SELECT {ITEM_COLUMNS} FROM priority_items i WHERE i.id = "
    ));
    qb.push_bind(id);
    push_scope(&mut qb, scope);
    let Some(row) = qb.build().fetch_optional(pool).await? else {
        return Ok(None);
    };
    let item = item_view(&row, feature, VALIDITY)?;
    let events = sqlx::query(
        "SELECT id, kind, trigger_type, source, operator, reason, result, at, actor, claim_fingerprint \
         FROM (SELECT * FROM priority_item_events WHERE item_id = $1 ORDER BY id DESC LIMIT 1000) AS e ORDER BY id",
    )
    .bind(id)
    .fetch_all(pool)
    .await?
    .iter()
    .map(item_event_view)
    .collect::<StoreResult<Vec<_>>>()?;
    let logs = sqlx::query(
        "SELECT id, operation, request_summary, response_summary, latency_ms, outcome, at \
         FROM (SELECT * FROM integration_logs WHERE item_id = $1 ORDER BY id DESC LIMIT 100) AS l ORDER BY id",
    )
    .bind(id)
    .fetch_all(pool)
    .await?
    .iter()
    .map(log_view)
    .collect::<StoreResult<Vec<_>>>()?;
    Ok(Some(ItemDetail { item, events, logs }))
}

#[async_trait]
impl ItemStore for SqlStore {
    async fn item_enqueue_manual(
        &self,
        scope: &Scope,
        asset: &AssetRef,
        demand: &Demand,
        now: Timestamp,
    ) -> StoreResult<Vec<EnqueuedItem>> {
        self.writer
            .write_hot(
                (scope.clone(), asset.clone(), demand.clone(), now),
                |c, (scope, asset, demand, now)| {
                    super::enqueue::manual(c, scope, asset, demand, *now).boxed()
                },
                crate::store::sqlite_sync::manual,
            )
            .await
    }

    async fn item_retrigger(
        &self,
        scope: &Scope,
        item_id: i64,
        operator: &str,
        reason: &str,
        now: Timestamp,
    ) -> StoreResult<EnqueuedItem> {
        self.write(
            (
                scope.clone(),
                item_id,
                operator.to_owned(),
                reason.to_owned(),
                now,
            ),
            |c, (scope, item_id, operator, reason, now)| {
                super::enqueue::retrigger(c, scope, *item_id, operator, reason, *now).boxed()
            },
        )
        .await
    }

    async fn item_close(
        &self,
        scope: &Scope,
        id: i64,
        operator: &str,
        reason: &str,
        now: Timestamp,
    ) -> StoreResult<()> {
        self.write(
            (scope.clone(), id, operator.to_owned(), reason.to_owned(), now),
            |c, (scope, id, operator, reason, now)| {
                super::items::close(c, scope, *id, operator, reason, *now).boxed()
            },
        )
        .await
    }

    async fn item_list(&self, scope: &Scope, filter: &ItemFilter) -> StoreResult<Vec<ItemView>> {
        list(&self.pool, self.feature().await?, scope, filter).await
    }

    async fn item_count(&self, scope: &Scope, filter: &ItemFilter) -> StoreResult<i64> {
        count(&self.pool, scope, filter).await
    }

    async fn item_get(&self, scope: &Scope, id: i64) -> StoreResult<Option<ItemDetail>> {
        get(&self.pool, self.feature().await?, scope, id).await
    }
}
