//! Alert records (table `alerts`): one sync raises the alerts whose cause appeared
//! ([`super::alert_causes`]) and clears those whose cause is gone, at most one open alert per
//! `(kind, subject)` (the partial unique index `one_open_alert` decides when two instances raise
//! at once), and writes each event's outbox rows in the same transaction; the alert list and the
//! evidence queries linked to `task_stale` alerts.

use std::collections::HashMap;

use rakuten_types::alert::{AlertEvent, AlertKind, AlertState, AlertView};
use rakuten_types::order::Page;
use rakuten_types::{QueryId, TaskId, Timestamp};
use sqlx::Row;

use super::outbox::outbox_enqueue;
use super::{Conn, Db, alert_causes};
use crate::store::StoreError;
use crate::store::operator::{AlertFilter, AlertSyncOutcome, AlertSyncRequest, StaleEvidence};
use crate::store::sql::rows::{corrupt, decode_ts, task_id, ts};

type DbRow = <Db as sqlx::Database>::Row;

pub(crate) const ALERT_COLUMNS: &str = "alert_id, kind, subject, state, summary, task_id, \
    worker_id, query_id, raised_at, cleared_at";

pub(crate) fn decode_alert(row: &DbRow) -> Result<AlertView, StoreError> {
    Ok(AlertView {
        alert_id: row.try_get("alert_id")?,
        kind: row
            .try_get::<String, _>("kind")?
            .parse()
            .map_err(|e| corrupt("kind", e))?,
        subject: row.try_get("subject")?,
        state: row
            .try_get::<String, _>("state")?
            .parse()
            .map_err(|e| corrupt("state", e))?,
        summary: row.try_get("summary")?,
        task_id: row
            .try_get::<Option<String>, _>("task_id")?
            .as_deref()
            .map(task_id)
            .transpose()?,
        worker_id: row.try_get("worker_id")?,
        query_id: row
            .try_get::<Option<String>, _>("query_id")?
            .as_deref()
            .map(|q| QueryId::parse(q).map_err(|e| corrupt("query_id", e)))
            .transpose()?,
        raised_at: ts(&row.try_get::<String, _>("raised_at")?)?,
        cleared_at: decode_ts(row.try_get("cleared_at")?)?,
    })
}

pub(crate) async fn alert_sync(
    conn: &mut Conn,
    req: AlertSyncRequest,
    now: Timestamp,
) -> Result<AlertSyncOutcome, StoreError> {
    let sql = format!("SELECT {ALERT_COLUMNS} FROM alerts WHERE state = 'open'");
    let open: HashMap<(AlertKind, String), AlertView> = sqlx::query(sqlx::AssertSqlSafe(sql))
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|r| decode_alert(r).map(|a| ((a.kind, a.subject.clone()), a)))
        .collect::<Result<_, _>>()?;
    // Forgotten before the causes are read, so a pruned worker's alert clears in this sync.
    super::worker_offline::prune(conn, now.minus(req.worker_retention)).await?;
    let causes = alert_causes::causes(conn, &req, now).await?;
    let mut out = AlertSyncOutcome::default();
    let mut present = std::collections::HashSet::new();
    for c in causes {
        present.insert((c.kind, c.subject.clone()));
        if let Some(a) = open.get(&(c.kind, c.subject.clone())) {
            super::worker_offline::refresh_open(conn, a, &c).await?;
            continue;
        }
        let alert = AlertView {
            alert_id: uuid::Uuid::now_v7().to_string(),
            kind: c.kind,
            subject: c.subject,
            state: AlertState::Open,
            summary: c.summary,
            task_id: c.task_id.as_deref().map(task_id).transpose()?,
            worker_id: c.worker_id,
            query_id: None,
            raised_at: now,
            cleared_at: None,
        };
        // The partial unique index decides when two instances raise at once.
        let inserted = sqlx::query(
            "INSERT INTO alerts (alert_id, kind, subject, state, summary, task_id, \
             worker_id, raised_at) VALUES ($1, $2, $3, 'open', $4, $5, $6, $7) \
             ON CONFLICT (kind, subject) WHERE state = 'open' DO NOTHING",
        )
        .bind(&alert.alert_id)
        .bind(alert.kind.as_str())
        .bind(&alert.subject)
        .bind(&alert.summary)
        .bind(alert.task_id.as_ref().map(|t| t.as_str().to_owned()))
        .bind(alert.worker_id.clone())
        .bind(now.to_rfc3339())
        .execute(&mut *conn)
        .await?
        .rows_affected();
        if inserted == 1 {
            outbox_enqueue(conn, &alert, AlertState::Open, &req.webhook_urls, now).await?;
            out.raised.push(alert);
        }
    }
    let mut gone: Vec<AlertView> = open
        .into_iter()
        .filter(|(k, _)| !present.contains(k))
        .map(|(_, a)| a)
        .collect();
    gone.sort_by(|a, b| a.alert_id.cmp(&b.alert_id));
    for mut alert in gone {
        let next = alert
            .state
            .transition(AlertEvent::Clear)
            .map_err(|e| corrupt("alert", e))?;
        let done = sqlx::query(
            "UPDATE alerts SET state = 'cleared', cleared_at = $1 \
             WHERE alert_id = $2 AND state = 'open'",
        )
        .bind(now.to_rfc3339())
        .bind(&alert.alert_id)
        .execute(&mut *conn)
        .await?
        .rows_affected();
        if done == 1 {
            alert.state = next;
            alert.cleared_at = Some(now);
            outbox_enqueue(conn, &alert, next, &req.webhook_urls, now).await?;
            out.cleared.push(alert);
        }
    }
    Ok(out)
}

pub(crate) async fn alert_list(
    conn: &mut Conn,
    f: AlertFilter,
) -> Result<Page<AlertView>, StoreError> {
    let open = i32::from(f.open_only);
    let kind = f.kind.map(|k| k.as_str());
    let filter = "(CAST($1 AS INTEGER) = 0 OR state = 'open') \
                  AND (CAST($2 AS TEXT) IS NULL OR kind = $2)";
    let total: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT COUNT(*) FROM alerts WHERE {filter}"
    )))
    .bind(open)
    .bind(kind)
    .fetch_one(&mut *conn)
    .await?;
    let items = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {ALERT_COLUMNS} FROM alerts WHERE {filter} \
         ORDER BY raised_at DESC, alert_id DESC LIMIT $3 OFFSET $4"
    )))
    .bind(open)
    .bind(kind)
    .bind(f.limit)
    .bind(f.offset)
    .fetch_all(&mut *conn)
    .await?
    .iter()
    .map(decode_alert)
    .collect::<Result<Vec<_>, _>>()?;
    Ok(Page {
        items,
        total,
        limit: f.limit,
        offset: f.offset,
    })
}

pub(crate) async fn alert_stale_without_evidence(
    conn: &mut Conn,
) -> Result<Vec<StaleEvidence>, StoreError> {
    sqlx::query(
        "SELECT a.alert_id, a.task_id, t.site, t.created_at, \
         (SELECT p.query_id FROM alerts p JOIN account_queries q ON q.query_id = p.query_id \
          WHERE p.task_id = a.task_id AND p.alert_id <> a.alert_id \
          AND q.status IN ('queued', 'leased') ORDER BY p.raised_at DESC LIMIT 1) AS pending_query \
         FROM alerts a \
         JOIN tasks t ON t.task_id = a.task_id WHERE a.kind = 'task_stale' \
         AND a.state = 'open' AND a.query_id IS NULL ORDER BY a.raised_at LIMIT 100",
    )
    .fetch_all(&mut *conn)
    .await?
    .iter()
    .map(|r| {
        Ok(StaleEvidence {
            alert_id: r.try_get("alert_id")?,
            task_id: task_id(&r.try_get::<String, _>("task_id")?)?,
            site: r.try_get("site")?,
            created_at: ts(&r.try_get::<String, _>("created_at")?)?,
            pending_query: r
                .try_get::<Option<String>, _>("pending_query")?
                .map(|q| {
                    QueryId::parse(&q).map_err(|e| StoreError::Corrupt(format!("query_id: {e}")))
                })
                .transpose()?,
        })
    })
    .collect()
}

pub(crate) async fn alert_set_evidence(
    conn: &mut Conn,
    alert_id: String,
    query_id: QueryId,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE alerts SET query_id = $1 WHERE alert_id = $2 AND query_id IS NULL")
        .bind(query_id.as_str())
        .bind(alert_id)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

pub(crate) async fn task_evidence_queries(
    conn: &mut Conn,
    task: TaskId,
) -> Result<Vec<QueryId>, StoreError> {
    let ids: Vec<String> = sqlx::query_scalar(
        "SELECT query_id FROM alerts WHERE task_id = $1 AND query_id IS NOT NULL \
         ORDER BY raised_at, alert_id",
    )
    .bind(task.as_str())
    .fetch_all(&mut *conn)
    .await?;
    // A later alert of the task may link the query an earlier one asked for (still waiting):
    // each query once, in the order first asked.
    let mut seen = std::collections::HashSet::new();
    ids.iter()
        .filter(|q| seen.insert(q.as_str()))
        .map(|q| QueryId::parse(q).map_err(|e| corrupt("query_id", e)))
        .collect()
}
