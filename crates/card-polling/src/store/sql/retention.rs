//! Retention (issue #14 item 5): one batch of old rows of one table deleted per call, inside the
//! caller's write transaction. Rows of an active item are never deleted; an ended item's audit
//! facts and trigger events go together, once the item ended before the cutoff.
//!
//! Several instances prune at once on PostgreSQL: each batch is picked with `SKIP LOCKED`, so
//! they delete disjoint batches (D-pg-9). A row is prunable for good once it is (items only move
//! from active to ended), so a read that is a moment old never deletes a row it should keep.

use super::{Conn, dialect, t};
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

/// Deletes up to `batch` rows of `table` older than `cutoff`; returns how many.
pub(crate) async fn prune(
    tx: &mut Conn,
    table: PruneTable,
    cutoff: rakuten_types::Timestamp,
    batch: i64,
) -> StoreResult<u64> {
    let sql = match table {
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
