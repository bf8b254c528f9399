//! Submit (§4.2): insert a task, or find the one a resubmission names.

use rakuten_types::order::SubmitOrderAck;
use rakuten_types::{TaskStatus, Timestamp};

use super::super::Conn;
use super::row::load_task;
use crate::store::{NewTask, StoreError};

/// `POST /api/orders` (§4.2): insert or find. A new task is inserted only while its `not_after`
/// (if any) lies ahead of `now`, decided in the same statement, so the retry of a submit whose
/// answer was lost still finds its task after the deadline (D-task-not-after-expired).
pub(crate) async fn task_insert(
    conn: &mut Conn,
    task: NewTask,
    now: Timestamp,
) -> Result<SubmitOrderAck, StoreError> {
    let before_deadline = task.not_after.is_none_or(|t| t > now);
    // What lists show of the intent, written once (D-list-pages-bounded); none for a text that is
    // not a checked intent (only a store-level caller can send one).
    let summary = rakuten_types::intent::IntentJson::from_text(task.intent_json.clone())
        .ok()
        .and_then(|i| rakuten_types::intent::OrderIntent::parse_json(&i).ok())
        .and_then(|i| serde_json::to_string(&i.summary()).ok());
    let bytes = i64::try_from(task.intent_json.len()).unwrap_or(i64::MAX);
    let inserted = sqlx::query(
        "INSERT INTO tasks (task_id, site, intent_json, intent_summary, intent_bytes, status, \
         lease_count, created_at, updated_at, not_after) \
         SELECT $1, $2, $3, $4, $5, 'queued', 0, $6, $6, $7 WHERE $8 = 1 \
         ON CONFLICT (task_id) DO NOTHING",
    )
    .bind(task.task_id.as_str())
    .bind(&task.site)
    .bind(&task.intent_json)
    .bind(summary)
    .bind(bytes)
    .bind(now.to_rfc3339())
    .bind(task.not_after.map(|t| t.to_rfc3339()))
    .bind(i32::from(before_deadline))
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if inserted == 1 {
        return Ok(SubmitOrderAck {
            task_id: task.task_id,
            status: TaskStatus::Queued,
            created: true,
        });
    }
    let Some(existing) = load_task(conn, &task.task_id, false).await? else {
        return Err(match task.not_after {
            Some(not_after) if !before_deadline => StoreError::DeadlinePassed { not_after, now },
            _ => StoreError::TaskNotFound(task.task_id.clone()),
        });
    };
    // Same transaction as the insert: the row's site, intent and deadline never change after
    // insert.
    let stored = existing.intent_json.as_deref().unwrap_or_default();
    crate::store::check_same_task(&task, &existing.site, stored)?;
    if existing.not_after != task.not_after {
        return Err(crate::store::idempotency_mismatch(
            "task_id",
            task.task_id.as_str(),
            "not_after",
        ));
    }
    Ok(SubmitOrderAck {
        task_id: existing.task_id,
        status: existing.status,
        created: false,
    })
}
