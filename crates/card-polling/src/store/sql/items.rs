//! Item transitions: claim (and takeover), attempt counting, finish, close, expiry. Each is a
//! guarded update; finishing requires the claim token.

use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;

use super::SqlStore;
use crate::store::ClaimStore;

use sqlx::Row;

use rakuten_types::Timestamp;

use super::enqueue::{Sqlx, audit, audit_system, shop_in_scope, system_fact};
use super::{Conn, Pool, dialect, t};
use crate::domain::Scope;
use crate::store::common::undecodable_item;
use crate::store::hot::{self, SystemFact, VALIDITY_PASSED};
use crate::priority::item_status::{ItemEvent, ItemStatus};
use crate::store::{CardScope, ClaimedItem, DueItem, Finish, NewLog, StoreError, StoreResult};

/// Claimable items and their task types: two index range scans, due pending items, then running
/// items whose lease passed.
pub(crate) async fn due(pool: &Pool, now: Timestamp, limit: i64) -> StoreResult<Vec<DueItem>> {
    let rows: Vec<(i64, String)> = sqlx::query_as(
        "SELECT id, task_type FROM (SELECT id, task_type FROM priority_items \
            WHERE status = 'pending' AND next_run_at <= $1 ORDER BY next_run_at LIMIT $2) AS p \
         UNION ALL \
         SELECT id, task_type FROM (SELECT id, task_type FROM priority_items \
            WHERE status = 'running' AND claim_expires_at <= $1 ORDER BY claim_expires_at LIMIT $2) AS r \
         LIMIT $2",
    )
    .bind(t(now))
    .bind(limit)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, task_type)| DueItem { id, task_type })
        .collect())
}

impl hot::ClaimStatements for Sqlx<'_> {
    async fn before_claim(&mut self, id: i64) -> StoreResult<Option<hot::BeforeClaim>> {
        let row: Option<(String, Option<String>, String)> = sqlx::query_as(concat!(
            hot::sql::claim_read!(),
            dialect::lock_row_skip_locked!()
        ))
        .bind(id)
        .fetch_optional(&mut *self.0)
        .await?;
        Ok(row.map(|(status, claim_token, enqueued_at)| hot::BeforeClaim {
            status,
            claim_token,
            enqueued_at,
        }))
    }

    async fn expire_at_claim(&mut self, id: i64, now: &str, cutoff: &str) -> StoreResult<bool> {
        let expired: Option<i64> = sqlx::query_scalar(hot::sql::EXPIRE_AT_CLAIM)
            .bind(now)
            .bind(id)
            .bind(cutoff)
            .fetch_optional(&mut *self.0)
            .await?;
        Ok(expired.is_some())
    }

    async fn claim_row(
        &mut self,
        id: i64,
        token: &str,
        now: &str,
        lease_end: &str,
    ) -> StoreResult<Option<hot::ClaimedRow>> {
        let row = sqlx::query(hot::sql::CLAIM)
            .bind(token)
            .bind(now)
            .bind(lease_end)
            .bind(id)
            .fetch_optional(&mut *self.0)
            .await?;
        let Some(row) = row else { return Ok(None) };
        if let Some(reason) = undecodable_item(&row) {
            return Ok(Some(hot::ClaimedRow::Undecodable(reason)));
        }
        Ok(Some(hot::ClaimedRow::Row {
            iccid: row.try_get("iccid")?,
            task_type: row.try_get("task_type")?,
            attempts: row.try_get("attempts")?,
            max_attempts: row.try_get("max_attempts")?,
        }))
    }

    async fn set_aside(
        &mut self,
        id: i64,
        now: &str,
        result: &str,
        reason: &str,
    ) -> StoreResult<()> {
        sqlx::query(hot::sql::SET_ASIDE)
            .bind(now)
            .bind(result)
            .bind(reason)
            .bind(id)
            .execute(&mut *self.0)
            .await?;
        Ok(())
    }

    async fn audit_system(&mut self, fact: SystemFact<'_>) -> StoreResult<()> {
        system_fact(self.0, fact).await
    }
}

/// A claim through sqlx (`hot::claim`): the claimed item, or the reason its row was set aside.
pub(crate) async fn claim(
    tx: &mut Conn,
    instance: &str,
    id: i64,
    token: &str,
    now: Timestamp,
    lease: std::time::Duration,
    expired_before: Option<Timestamp>,
) -> StoreResult<(Option<ClaimedItem>, Option<String>)> {
    hot::claim(&mut Sqlx(tx), instance, id, token, now, lease, expired_before).await
}

pub(crate) async fn card_polling_scope(pool: &Pool, iccid: &str) -> StoreResult<CardScope> {
    let code: Option<i64> = sqlx::query_scalar(concat!(
        "SELECT ",
        dialect::card_scope_code!("$1")
    ))
    .bind(iccid)
    .fetch_one(pool)
    .await?;
    Ok(CardScope::from_code(code))
}

pub(crate) async fn begin_attempt(
    conn: &mut Conn,
    claim: &ClaimedItem,
    now: Timestamp,
) -> StoreResult<ClaimedItem> {
    let attempts: Option<i64> = sqlx::query_scalar(
        "UPDATE priority_items SET attempts = attempts + 1, started_at = $1, finished_at = NULL, duration_ms = NULL \
         WHERE id = $2 AND status = 'running' AND claim_token = $3 AND attempts < max_attempts RETURNING attempts",
    )
    .bind(t(now))
    .bind(claim.id)
    .bind(&claim.token)
    .fetch_optional(&mut *conn)
    .await?;
    let attempts = attempts.ok_or(StoreError::ClaimLost)?;
    Ok(ClaimedItem {
        attempts,
        ..claim.clone()
    })
}

/// Ends an attempt of `claim` (its token must still hold); audit facts name `instance` and the
/// claim token's fingerprint.
pub(crate) async fn finish(
    tx: &mut Conn,
    instance: &str,
    claim: &ClaimedItem,
    finish: &Finish,
    logs: &[NewLog],
    now: Timestamp,
) -> StoreResult<Option<ItemStatus>> {
    let mut last_log: Option<i64> = None;
    for log in logs {
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO integration_logs (item_id, iccid, task_type, operation, request_summary, \
               response_summary, latency_ms, outcome, at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
        )
        .bind(claim.id)
        .bind(&claim.iccid)
        .bind(&claim.task_type)
        .bind(&log.operation)
        .bind(&log.request_summary)
        .bind(&log.response_summary)
        .bind(log.latency_ms)
        .bind(&log.outcome)
        .bind(t(now))
        .fetch_one(&mut *tx)
        .await?;
        last_log = Some(id);
    }
    let event = match finish {
        Finish::Completed { .. } => ItemEvent::Succeed,
        Finish::Retry { .. } => ItemEvent::Retry,
        Finish::Failed { .. } => ItemEvent::Fail,
    };
    let next = ItemStatus::Running
        .transition(event)
        .map_err(|e| StoreError::Conflict(e.to_string()))?;
    let (result, reason, next_run_at) = match finish {
        Finish::Completed { result } => (result.clone(), None, None),
        Finish::Retry {
            reason,
            next_run_at,
        } => (
            "retry_scheduled".to_owned(),
            Some(reason.clone()),
            Some(t(*next_run_at)),
        ),
        Finish::Failed { reason, result, .. } => (result.clone(), Some(reason.clone()), None),
    };
    let dequeued = (!next.is_active()).then(|| t(now));
    let hit = sqlx::query(concat!(
        "UPDATE priority_items SET status = $1, claim_token = NULL, claim_expires_at = NULL, \
           finished_at = $2, \
           duration_ms = CASE WHEN started_at IS NULL THEN NULL ELSE ",
        dialect::millis_between!("started_at", "$2"),
        " END, \
           dequeued_at = $3, result = $4, \
           failure_reason = COALESCE($5, failure_reason), \
           next_run_at = COALESCE($6, next_run_at), \
           last_log_id = COALESCE($7, last_log_id) \
         WHERE id = $8 AND status = 'running' AND claim_token = $9"
    ))
    .bind(next.as_str())
    .bind(t(now))
    .bind(dequeued)
    .bind(&result)
    .bind(&reason)
    .bind(next_run_at.as_deref())
    .bind(last_log)
    .bind(claim.id)
    .bind(&claim.token)
    .execute(&mut *tx)
    .await?;
    if hit.rows_affected() != 1 {
        // The claim no longer holds; the log rows of the calls made are still kept.
        return Ok(None);
    }
    let token = Some(claim.token.as_str());
    match finish {
        Finish::Completed { result } => {
            audit_system(
                tx,
                claim.id,
                "complete",
                instance,
                token,
                None,
                Some(result),
                now,
            )
            .await?;
        }
        Finish::Retry {
            reason,
            next_run_at,
        } => {
            audit_system(
                tx,
                claim.id,
                "failure",
                instance,
                token,
                Some(reason),
                Some("recoverable"),
                now,
            )
            .await?;
            let at = format!("next_run_at={}", t(*next_run_at));
            audit_system(tx, claim.id, "retry", instance, token, None, Some(&at), now).await?;
        }
        Finish::Failed {
            reason,
            result,
            after_call,
        } => {
            if *after_call {
                audit_system(
                    tx,
                    claim.id,
                    "failure",
                    instance,
                    token,
                    Some(reason),
                    Some(result),
                    now,
                )
                .await?;
            }
            audit_system(
                tx,
                claim.id,
                "fail_dequeue",
                instance,
                token,
                Some(reason),
                Some(result),
                now,
            )
            .await?;
        }
    }
    Ok(Some(next))
}

pub(crate) async fn close(
    tx: &mut Conn,
    scope: &Scope,
    id: i64,
    operator: &str,
    reason: &str,
    now: Timestamp,
) -> StoreResult<()> {
    // Locked (PostgreSQL, waiting for a claim or finish in flight) so the 409 names the status
    // the item really has when the close is decided (D-poll-postgres-concurrent-writes).
    let row = sqlx::query(concat!(
        "SELECT shop_id, status, last_trigger_type, last_trigger_source FROM priority_items WHERE id = $1",
        dialect::lock_row!()
    ))
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(StoreError::NotFound)?;
    let shop: String = row.try_get("shop_id")?;
    if !shop_in_scope(tx, scope, &shop).await? {
        return Err(StoreError::NotFound);
    }
    let status: String = row.try_get("status")?;
    let from = ItemStatus::parse(&status).unwrap_or(ItemStatus::Completed);
    from.transition(ItemEvent::Close).map_err(|_| {
        StoreError::Conflict(format!("item is {status}, only active items can be closed"))
    })?;
    let hit = sqlx::query(
        "UPDATE priority_items SET status = 'closed', claim_token = NULL, claim_expires_at = NULL, \
           dequeued_at = $1, closed_by = $2, close_reason = $3 \
         WHERE id = $4 AND status IN ('pending', 'running')",
    )
    .bind(t(now))
    .bind(operator)
    .bind(reason)
    .bind(id)
    .execute(&mut *tx)
    .await?;
    if hit.rows_affected() != 1 {
        return Err(StoreError::Conflict("item is no longer active".into()));
    }
    // The close names the trigger it ends, as every fact does (D-audit-system-facts-trigger).
    let trigger_type: String = row.try_get("last_trigger_type")?;
    let source: Option<String> = row.try_get("last_trigger_source")?;
    audit(
        tx,
        id,
        "close",
        Some(&trigger_type),
        source.as_deref(),
        Some(operator),
        Some(reason),
        Some("closed"),
        now,
    )
    .await
}

/// Expires up to `batch` active items enqueued at or before `cutoff`; each gets an `expire` fact
/// naming `instance` and, for a running item, the fingerprint of the claim it ends.
pub(crate) async fn mark_expired(
    tx: &mut Conn,
    instance: &str,
    now: Timestamp,
    cutoff: Timestamp,
    batch: i64,
) -> StoreResult<u64> {
    // The batch is picked and locked in one read (PostgreSQL: rows another transaction holds are
    // skipped, a claim or finish in flight settles them), so the tokens read here are the ones
    // the updates below clear, and two instances expiring at once take disjoint batches (D-poll-postgres-concurrent-writes).
    let held: Vec<(i64, Option<String>)> = sqlx::query_as(concat!(
        "SELECT id, claim_token FROM priority_items WHERE status IN ('pending', 'running') \
           AND enqueued_at <= $1 ORDER BY enqueued_at LIMIT $2",
        dialect::lock_row_skip_locked!()
    ))
    .bind(t(cutoff))
    .bind(batch)
    .fetch_all(&mut *tx)
    .await?;
    let tokens: std::collections::HashMap<i64, Option<String>> = held.iter().cloned().collect();
    let mut ids = Vec::with_capacity(held.len());
    for (id, _) in &held {
        // Still guarded: the row is ours (locked), but the guard keeps the transition honest.
        let hit: Option<i64> = sqlx::query_scalar(
            "UPDATE priority_items SET status = 'expired', claim_token = NULL, claim_expires_at = NULL, dequeued_at = $1 \
             WHERE id = $2 AND status IN ('pending', 'running') RETURNING id",
        )
        .bind(t(now))
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        ids.extend(hit);
    }
    for id in &ids {
        let token = tokens.get(id).and_then(|t| t.as_deref());
        audit_system(
            tx,
            *id,
            "expire",
            instance,
            token,
            None,
            Some(VALIDITY_PASSED),
            now,
        )
        .await?;
    }
    Ok(ids.len() as u64)
}

#[async_trait]
impl ClaimStore for SqlStore {
    async fn item_due(&self, now: Timestamp, limit: i64) -> StoreResult<Vec<i64>> {
        let due = due(&self.pool, now, limit).await?;
        Ok(due.into_iter().map(|d| d.id).collect())
    }

    async fn item_due_typed(&self, now: Timestamp, limit: i64) -> StoreResult<Vec<DueItem>> {
        due(&self.pool, now, limit).await
    }

    async fn item_claim(
        &self,
        id: i64,
        token: &str,
        now: Timestamp,
        lease: Duration,
    ) -> StoreResult<Option<ClaimedItem>> {
        // max(enqueued_at, feature_enabled_at) <= cutoff  ⇔  both are; the second is a constant.
        let feature = self.feature().await?;
        let cutoff = now.minus(crate::priority::VALIDITY);
        let expired_before = (feature <= cutoff).then_some(cutoff);
        let (claimed, set_aside) = self
            .writer
            .write_hot(
                (
                    self.instance.clone(),
                    id,
                    token.to_owned(),
                    now,
                    lease,
                    expired_before,
                ),
                |c, (instance, id, token, now, lease, expired_before)| {
                    claim(
                        c,
                        instance,
                        *id,
                        token,
                        *now,
                        *lease,
                        *expired_before,
                    )
                    .boxed()
                },
                crate::store::sqlite_sync::claim,
            )
            .await?;
        // Counted and logged once committed, here on the caller's side of the writer.
        if let Some(reason) = set_aside {
            self.set_aside
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::error!(
                item = id,
                %reason,
                "priority item set aside as failed: its stored row cannot be decoded (repair the row, then retrigger)"
            );
        }
        Ok(claimed)
    }

    async fn card_polling_scope(&self, iccid: &str) -> StoreResult<CardScope> {
        card_polling_scope(&self.pool, iccid).await
    }

    async fn item_begin_attempt(
        &self,
        claim: &ClaimedItem,
        now: Timestamp,
    ) -> StoreResult<ClaimedItem> {
        self.write((claim.clone(), now), |c, (claim, now)| {
            begin_attempt(c, claim, *now).boxed()
        })
        .await
    }

    async fn item_finish(
        &self,
        claim: &ClaimedItem,
        finish: &Finish,
        logs: &[NewLog],
        now: Timestamp,
    ) -> StoreResult<ItemStatus> {
        let out: Option<ItemStatus> = self
            .write(
                (
                    self.instance.clone(),
                    claim.clone(),
                    finish.clone(),
                    logs.to_vec(),
                    now,
                ),
                |c, (instance, claim, finish, logs, now)| {
                    self::finish(c, instance, claim, finish, logs, *now).boxed()
                },
            )
            .await?;
        out.ok_or(StoreError::ClaimLost)
    }

    async fn item_mark_expired(
        &self,
        now: Timestamp,
        validity: Duration,
        batch: i64,
    ) -> StoreResult<u64> {
        let feature = self.feature().await?;
        let cutoff = now.minus(validity);
        // max(enqueued_at, feature_enabled_at) <= cutoff  ⇔  both are; the second is a constant.
        if feature > cutoff {
            return Ok(0);
        }
        self.write(
            (self.instance.clone(), now, cutoff, batch),
            |c, (instance, now, cutoff, batch)| {
                mark_expired(c, instance, *now, *cutoff, *batch).boxed()
            },
        )
        .await
    }
}
