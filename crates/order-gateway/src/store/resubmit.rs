//! The idempotency check of a resubmission: a reused `task_id`/`query_id` is answered with its
//! stored row only when the body is the same; otherwise a 409 naming the first field that differs.

use super::error::StoreError;
use super::types::task::NewTask;

/// The first field where a resubmitted body differs from the stored one, as a dotted path under
/// `prefix` (`intent.quantity`), or `None` when they are equal. Both sides are compared as parsed
/// JSON, so key order and whitespace don't matter; `1` and `1.0` do (the intent is passed through
/// as sent).
pub(crate) fn json_difference(
    prefix: &str,
    stored: &serde_json::Value,
    sent: &serde_json::Value,
) -> Option<String> {
    use serde_json::Value;
    if stored == sent {
        return None;
    }
    if let (Value::Object(a), Value::Object(b)) = (stored, sent) {
        let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
        keys.sort();
        keys.dedup();
        for k in keys {
            if a.get(k) != b.get(k) {
                let name: String = k.chars().take(64).collect();
                return Some(format!("{prefix}.{name}"));
            }
        }
    }
    Some(prefix.to_owned())
}

/// The 409 for a reused idempotency key: `key` is `task_id`/`query_id`, `field` what differs.
pub(crate) fn idempotency_mismatch(key: &str, id: &str, field: &str) -> StoreError {
    StoreError::IdempotencyMismatch(format!(
        "{key} {id} already exists with a different {field}; reuse a {key} only for an identical \
         resubmit"
    ))
}

/// Checks a resubmitted order against the stored row (site, then intent). The intent is the same
/// when it is the same JSON value, numbers as written (D-intent-resubmit-same-value): key order,
/// spacing and string escapes may differ, and the first submit's text is the one kept.
pub(crate) fn check_same_task(
    task: &NewTask,
    stored_site: &str,
    stored_intent_json: &str,
) -> Result<(), StoreError> {
    use rakuten_types::intent::IntentJson;
    let id = task.task_id.as_str();
    if stored_site != task.site {
        return Err(idempotency_mismatch("task_id", id, "site"));
    }
    let text = |t: &str| {
        IntentJson::from_text(t.to_owned())
            .map_err(|e| StoreError::Corrupt(format!("intent_json: {e}")))
    };
    let (stored, sent) = (text(stored_intent_json)?, text(&task.intent_json)?);
    match stored.first_difference(&sent, "intent") {
        Some(f) => Err(idempotency_mismatch("task_id", id, &f)),
        None => Ok(()),
    }
}
