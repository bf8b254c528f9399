//! The webhook outbox (table `alert_outbox`): each alert event is written with one row per
//! receiver in the transaction that raised or cleared the alert, then delivered per receiver in
//! `sequence` order (D-webhook-per-receiver-queues, D-webhook-per-alert-order), at least once.

use rakuten_types::Timestamp;
use rakuten_types::alert::{AlertState, AlertView, DeliveryEvent, DeliveryState};
use sqlx::Row;

use super::Conn;
use crate::store::StoreError;
use crate::store::operator::{DeliveryAttempt, OutboxItem, event_id, notice};
use crate::store::sql::rows::corrupt;

/// Writes an alert event: its `alert_events` row, whose `seq` the database gives as the event is
/// written (the wire's `sequence`, D-webhook-event-sequence), and one outbox row per receiver.
pub(crate) async fn outbox_enqueue(
    conn: &mut Conn,
    alert: &AlertView,
    state: AlertState,
    urls: &[String],
    now: Timestamp,
) -> Result<(), StoreError> {
    let event = event_id(alert, state);
    let now_s = now.to_rfc3339();
    let seq: Option<i64> = sqlx::query_scalar(
        "INSERT INTO alert_events (event_id, alert_id, created_at) VALUES ($1, $2, $3) \
         ON CONFLICT (event_id) DO NOTHING RETURNING seq",
    )
    .bind(&event)
    .bind(&alert.alert_id)
    .bind(&now_s)
    .fetch_optional(&mut *conn)
    .await?;
    let seq = match seq {
        Some(s) => s,
        None => {
            sqlx::query_scalar("SELECT seq FROM alert_events WHERE event_id = $1")
                .bind(&event)
                .fetch_one(&mut *conn)
                .await?
        }
    };
    let n = notice(alert, state, now, seq);
    let body = serde_json::to_string(&n).map_err(|e| corrupt("notice", e))?;
    for url in urls {
        sqlx::query(
            "INSERT INTO alert_outbox (event_id, url, alert_id, body_json, state, \
             attempts, next_attempt_at, created_at, seq) \
             VALUES ($1, $2, $3, $4, 'pending', 0, $5, $5, $6) \
             ON CONFLICT (event_id, url) DO NOTHING",
        )
        .bind(&n.event_id)
        .bind(url)
        .bind(&alert.alert_id)
        .bind(&body)
        .bind(&now_s)
        .bind(seq)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

pub(crate) async fn outbox_receivers_due(
    conn: &mut Conn,
    now: Timestamp,
    limit: i64,
) -> Result<Vec<String>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT DISTINCT url FROM alert_outbox WHERE state = 'pending' AND next_attempt_at <= $1 \
         ORDER BY url LIMIT $2",
    )
    .bind(now.to_rfc3339())
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?)
}

pub(crate) async fn outbox_due(
    conn: &mut Conn,
    url: &str,
    now: Timestamp,
    limit: i64,
) -> Result<Vec<OutboxItem>, StoreError> {
    // A later event of an alert waits while an earlier one to the same receiver is pending
    // (D-webhook-per-alert-order): the receiver sees the alert's events in the order they happened.
    sqlx::query(
        "SELECT o.event_id, o.seq, o.alert_id, o.url, o.body_json, o.attempts FROM alert_outbox o \
         WHERE o.state = 'pending' AND o.url = $1 AND o.next_attempt_at <= $2 \
         AND NOT EXISTS (SELECT 1 FROM alert_outbox p WHERE p.url = o.url \
           AND p.alert_id = o.alert_id AND p.state = 'pending' AND p.seq < o.seq) \
         ORDER BY o.seq, o.event_id LIMIT $3",
    )
    .bind(url)
    .bind(now.to_rfc3339())
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?
    .iter()
    .map(|r| {
        Ok(OutboxItem {
            event_id: r.try_get("event_id")?,
            sequence: r.try_get("seq")?,
            alert_id: r.try_get("alert_id")?,
            url: r.try_get("url")?,
            body_json: r.try_get("body_json")?,
            attempts: r.try_get("attempts")?,
        })
    })
    .collect()
}

pub(crate) async fn outbox_drop_unconfigured(
    conn: &mut Conn,
    configured: Vec<String>,
) -> Result<Vec<(String, u64)>, StoreError> {
    let pending: Vec<String> =
        sqlx::query_scalar("SELECT DISTINCT url FROM alert_outbox WHERE state = 'pending'")
            .fetch_all(&mut *conn)
            .await?;
    let mut dropped = Vec::new();
    for url in pending.into_iter().filter(|u| !configured.contains(u)) {
        let n = sqlx::query("DELETE FROM alert_outbox WHERE url = $1 AND state = 'pending'")
            .bind(&url)
            .execute(&mut *conn)
            .await?
            .rows_affected();
        dropped.push((url, n));
    }
    Ok(dropped)
}

pub(crate) async fn outbox_record(
    conn: &mut Conn,
    a: DeliveryAttempt,
    now: Timestamp,
) -> Result<(), StoreError> {
    // Only pending rows are selected for delivery; a row delivered meanwhile (another
    // instance) is left as it is: at-least-once.
    let next = DeliveryState::Pending
        .transition(a.event)
        .map_err(|e| corrupt("delivery", e))?;
    let error: Option<String> = a.error.map(|e| e.chars().take(500).collect());
    match next {
        DeliveryState::Delivered => sqlx::query(
            "UPDATE alert_outbox SET state = 'delivered', delivered_at = $1, \
             attempts = attempts + 1, last_error = NULL \
             WHERE event_id = $2 AND url = $3 AND state = 'pending'",
        )
        .bind(now.to_rfc3339()),
        DeliveryState::Pending => sqlx::query(
            "UPDATE alert_outbox SET next_attempt_at = $1, attempts = attempts + 1, \
             last_error = $4 WHERE event_id = $2 AND url = $3 AND state = 'pending'",
        )
        .bind(a.next_attempt_at.to_rfc3339()),
    }
    .bind(a.event_id)
    .bind(a.url)
    .bind(error)
    .execute(&mut *conn)
    .await?;
    debug_assert!(matches!(
        a.event,
        DeliveryEvent::Delivered | DeliveryEvent::Failed
    ));
    Ok(())
}
