//! Retention: one batch of old rows of one table deleted per call, inside the
//! caller's write transaction. Rows of an active item are never deleted; an ended item's audit
//! facts and trigger events go together, once the item ended before the cutoff, and the item
//! itself with its source rows once nothing refers to it any more (D-retention-batches).
//!
//! Several instances prune at once on PostgreSQL: each batch is picked with `SKIP LOCKED`, so
//! they delete disjoint batches (D-poll-postgres-concurrent-writes). A row is prunable for good once it is (items only move
//! from active to ended), so a read that is a moment old never deletes a row it should keep.

use async_trait::async_trait;
use futures::FutureExt;

use super::SqlStore;
use crate::store::RetentionStore;
use rakuten_types::Timestamp;

use super::{Conn, dialect, placeholders, t};
use crate::store::{PruneTable, StoreResult};

/// Interaction logs older than `$1`, unless their item is still active (ordinary polls have none).
const PRUNE_LOGS: &str = concat!("DELETE FROM integration_logs WHERE id IN ( \
       SELECT l.id FROM integration_logs l WHERE l.at < $1 \
         AND (l.item_id IS NULL OR NOT EXISTS (SELECT 1 FROM priority_items i \
              WHERE i.id = l.item_id AND i.status IN ('pending', 'running'))) \
       ORDER BY l.at LIMIT $2", dialect::delete_skip_locked_of!("l"), ")");

/// Audit facts of items that ended before `$1`. Every fact of an item is at or before its end, so
/// `e.at < $1` is the index range and the item's end decides.
const PRUNE_AUDIT: &str = concat!("DELETE FROM priority_item_events WHERE id IN ( \
       SELECT e.id FROM priority_item_events e JOIN priority_items i ON i.id = e.item_id \
       WHERE e.at < $1 AND i.status NOT IN ('pending', 'running') AND i.dequeued_at < $1 \
       ORDER BY e.at LIMIT $2", dialect::delete_skip_locked_of!("e"), ")");

/// Trigger events (replay memory) of items that ended before `$1`.
const PRUNE_TRIGGER_EVENTS: &str = concat!("DELETE FROM priority_trigger_events WHERE (event_id, iccid, task_type) IN ( \
       SELECT te.event_id, te.iccid, te.task_type FROM priority_trigger_events te \
         JOIN priority_items i ON i.id = te.item_id \
       WHERE te.at < $1 AND i.status NOT IN ('pending', 'running') AND i.dequeued_at < $1 \
       ORDER BY te.at LIMIT $2", dialect::delete_skip_locked_of!("te"), ")");

/// Ordinary manual triggers requested before `$1` that are done (executed or refused); a queued
/// one is still owed its poll.
const PRUNE_MANUAL_TRIGGERS: &str = concat!("DELETE FROM manual_triggers WHERE id IN ( \
       SELECT id FROM manual_triggers WHERE requested_at < $1 AND status <> 'queued' \
       ORDER BY requested_at LIMIT $2", dialect::delete_skip_locked_of!("manual_triggers"), ")");

/// The ended items to delete, up to `$2`, oldest end first: not active, and dequeued before `$1`
/// (only an ended item has a `dequeued_at`, a CHECK of the schema; the index
/// `priority_items_dequeued` is the range read). The status test is `NOT IN`, which no index
/// serves, on purpose: SQLite would otherwise read every ended item through `priority_items_status`
/// and sort them. Nothing may still refer to the item:
/// - its audit facts and trigger events are gone (the job's earlier stages delete them by the same
///   cutoff; this keeps a fact or an event from ever naming a missing item, and the foreign keys
///   from failing the batch when one was left behind);
/// - no later item retriggers it: `retriggered_from` always names a row that exists, so a
///   retrigger reads and links to its predecessor for as long as it is kept itself; the
///   predecessor goes in a run after it (D-retrigger-predecessor-kept).
///
/// Locked `SKIP LOCKED` on PostgreSQL: another instance's batch is skipped, and so is an item a
/// retrigger is reading (it locks the item, `enqueue::retrigger`), which then gains its successor.
const PICK_ITEMS: &str = concat!("SELECT i.id FROM priority_items i \
       WHERE i.status NOT IN ('pending', 'running') AND i.dequeued_at < $1 \
         AND NOT EXISTS (SELECT 1 FROM priority_items n WHERE n.retriggered_from = i.id) \
         AND NOT EXISTS (SELECT 1 FROM priority_item_events e WHERE e.item_id = i.id) \
         AND NOT EXISTS (SELECT 1 FROM priority_trigger_events te WHERE te.item_id = i.id) \
       ORDER BY i.dequeued_at LIMIT $2", dialect::delete_skip_locked_of!("i"));

/// Item ids per `IN (…)` list, far below SQLite's 32,766 and PostgreSQL's 65,535 parameters (a
/// batch may be up to 100,000).
const IDS_PER_STATEMENT: usize = 500;

/// Deletes up to `batch` rows of `table` older than `cutoff`; returns how many.
pub(crate) async fn prune(
    tx: &mut Conn,
    table: PruneTable,
    cutoff: rakuten_types::Timestamp,
    batch: i64,
) -> StoreResult<u64> {
    let sql = match table {
        PruneTable::Items => return prune_items(tx, cutoff, batch).await,
        PruneTable::InteractionLogs => PRUNE_LOGS,
        PruneTable::AuditFacts => PRUNE_AUDIT,
        PruneTable::TriggerEvents => PRUNE_TRIGGER_EVENTS,
        PruneTable::ManualTriggers => PRUNE_MANUAL_TRIGGERS,
    };
    let done = sqlx::query(sql)
        .bind(t(cutoff))
        .bind(batch)
        .execute(&mut *tx)
        .await?;
    Ok(done.rows_affected())
}

/// Deletes up to `batch` ended items ([`PICK_ITEMS`]) with their source rows, sources first (their
/// foreign key names the item); returns the items deleted. The ids are read once and bound, so
/// every statement of the batch deletes the rows of exactly the items picked.
async fn prune_items(
    tx: &mut Conn,
    cutoff: rakuten_types::Timestamp,
    batch: i64,
) -> StoreResult<u64> {
    let ids: Vec<i64> = sqlx::query_scalar(PICK_ITEMS)
        .bind(t(cutoff))
        .bind(batch)
        .fetch_all(&mut *tx)
        .await?;
    let mut items = 0;
    for chunk in ids.chunks(IDS_PER_STATEMENT) {
        let list = placeholders(chunk.len());
        let of_chunk = |head: &str| {
            chunk.iter().fold(
                sqlx::query(sqlx::AssertSqlSafe(format!("{head} IN ({list})"))),
                |q, id| q.bind(*id),
            )
        };
        of_chunk("DELETE FROM priority_item_sources WHERE item_id")
            .execute(&mut *tx)
            .await?;
        items += of_chunk("DELETE FROM priority_items WHERE id")
            .execute(&mut *tx)
            .await?
            .rows_affected();
    }
    Ok(items)
}

#[async_trait]
impl RetentionStore for SqlStore {
    async fn retention_prune(
        &self,
        table: PruneTable,
        cutoff: Timestamp,
        batch: i64,
    ) -> StoreResult<u64> {
        self.write((table, cutoff, batch), |c, (table, cutoff, batch)| {
            prune(c, *table, *cutoff, *batch).boxed()
        })
        .await
    }
}
