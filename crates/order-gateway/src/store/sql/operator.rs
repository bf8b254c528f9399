//! The one implementation of [`OperatorStore`]: alerts and their webhook outbox,
//! operator actions (resolve, cancel, retire; the reclaim's audit row and its pending grant),
//! workers. Compiled once per engine like the rest of `store/sql` (see its module docs): plain
//! sqlx over `Conn`/`Db`/`Store`, `$n` placeholders, `CAST(… AS TEXT)` for NULL-able filters,
//! timestamps as fixed-width UTC text, `ON CONFLICT … DO NOTHING` on the partial unique index
//! `one_open_alert`. Writes run through the engine's `write` (SQLite: the group-commit writer;
//! PostgreSQL: one transaction), reads on its read pool.

use std::collections::{BTreeMap, HashMap};

use rakuten_types::alert::{
    AlertEvent, AlertKind, AlertState, AlertView, DeliveryEvent, DeliveryState,
    OperatorActionAck, OperatorActionKind, OperatorActionView,
};
use rakuten_types::order::Page;
use rakuten_types::{OrderState, Outcome, QueryId, TaskEvent, TaskId, TaskStatus, Timestamp};
use sqlx::Row;

use crate::store::operator::{
    AlertFilter, AlertSyncOutcome, AlertSyncRequest, CancelRequest, DeliveryAttempt,
    GrantEnd, LeaseGrantRecord, OutboxItem, ResolveRequest, RetireRequest, StaleEvidence,
    WorkerRow,
};
use super::{Conn, Db, Store, grants};
use crate::store::dialect::Dialect;
use crate::store::operator::{
    Cause, LOGGED_OUT, OperatorStore, TASK_EXPIRED_SHOWN, WATCHED_SITE, event_id,
    needs_human_summary, notice, stale_advice, webhook_host,
};
use crate::store::sql::rows::{decode_ts, ts};
use crate::store::{CLOCK_JUMP_QUIET, Seek, SeekPage, StoreError, clock_signal_fresh};

type DbRow = <Db as sqlx::Database>::Row;

fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {e}"))
}

fn task_id(s: &str) -> Result<TaskId, StoreError> {
    TaskId::parse(s).map_err(|e| corrupt("task_id", e))
}

/// Writes one `operator_actions` row.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn action_insert(
    conn: &mut Conn,
    action: OperatorActionKind,
    actor: &str,
    reason: &str,
    task: Option<&TaskId>,
    worker_id: Option<&str>,
    from: Option<TaskStatus>,
    to: Option<TaskStatus>,
    detail: serde_json::Value,
    now: Timestamp,
) -> Result<OperatorActionView, StoreError> {
    let action_id = uuid::Uuid::now_v7().to_string();
    sqlx::query(
        "INSERT INTO operator_actions (action_id, action, actor, reason, task_id, \
         worker_id, from_status, to_status, detail_json, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(&action_id)
    .bind(action.as_str())
    .bind(actor)
    .bind(reason)
    .bind(task.map(|t| t.as_str().to_owned()))
    .bind(worker_id.map(str::to_owned))
    .bind(from.map(|s| s.as_str()))
    .bind(to.map(|s| s.as_str()))
    .bind(detail.to_string())
    .bind(now.to_rfc3339())
    .execute(&mut *conn)
    .await?;
    Ok(OperatorActionView {
        action_id,
        action,
        actor: actor.to_owned(),
        reason: reason.to_owned(),
        task_id: task.cloned(),
        worker_id: worker_id.map(str::to_owned),
        from_status: from,
        to_status: to,
        detail,
        at: now,
    })
}

/// After a reclaim's grant: marks it as not yet received by its worker, so the worker's
/// next poll receives this very grant, and audits the reclaim.
pub(crate) async fn reclaim_recorded(
    conn: &mut Conn,
    task: &TaskId,
    worker_id: &str,
    lease_count: i64,
    actor: &str,
    reason: &str,
    now: Timestamp,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE tasks SET reclaim_pending = 1 WHERE task_id = $1 AND status = 'leased'")
        .bind(task.as_str())
        .execute(&mut *conn)
        .await?;
    action_insert(
        conn,
        OperatorActionKind::Reclaim,
        actor,
        reason,
        Some(task),
        Some(worker_id),
        Some(TaskStatus::Stale),
        Some(TaskStatus::Leased),
        serde_json::json!({ "lease_count": lease_count }),
        now,
    )
    .await?;
    Ok(())
}

/// The first poll of a reclaimed task's worker: the reclaim's own grant (same token and
/// count; the lease runs `ttl` from now), or `None`. Returns `(task_id, lease_count,
/// lease_token)`.
#[allow(dead_code, reason = "compiled for both engines; SQLite leases in store/sqlite_sync.rs")]
pub(crate) async fn reclaimed_grant_take(
    conn: &mut Conn,
    worker_id: &str,
    expires: Timestamp,
    now: Timestamp,
) -> Result<Option<(String, i64, String)>, StoreError> {
    let row = sqlx::query(
        "UPDATE tasks SET reclaim_pending = 0, lease_expires_at = $1, updated_at = $2 \
         WHERE status = 'leased' AND reclaim_pending = 1 AND lease_owner = $3 \
         AND lease_expires_at > $2 RETURNING task_id, lease_count, lease_token",
    )
    .bind(expires.to_rfc3339())
    .bind(now.to_rfc3339())
    .bind(worker_id)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(match row {
        Some(r) => Some((r.try_get("task_id")?, r.try_get("lease_count")?, r.try_get("lease_token")?)),
        None => None,
    })
}

const ACTION_COLUMNS: &str = "action_id, action, actor, reason, task_id, worker_id, \
    from_status, to_status, detail_json, created_at";

fn decode_action(row: &DbRow) -> Result<OperatorActionView, StoreError> {
    let status = |s: Option<String>| -> Result<Option<TaskStatus>, StoreError> {
        s.map(|s| s.parse().map_err(|e| corrupt("status", e))).transpose()
    };
    let detail: String = row.try_get("detail_json")?;
    Ok(OperatorActionView {
        action_id: row.try_get("action_id")?,
        action: row
            .try_get::<String, _>("action")?
            .parse()
            .map_err(|e| corrupt("action", e))?,
        actor: row.try_get("actor")?,
        reason: row.try_get("reason")?,
        task_id: row
            .try_get::<Option<String>, _>("task_id")?
            .as_deref()
            .map(task_id)
            .transpose()?,
        worker_id: row.try_get("worker_id")?,
        from_status: status(row.try_get("from_status")?)?,
        to_status: status(row.try_get("to_status")?)?,
        detail: serde_json::from_str(&detail).map_err(|e| corrupt("detail_json", e))?,
        at: ts(&row.try_get::<String, _>("created_at")?)?,
    })
}

const ALERT_COLUMNS: &str = "alert_id, kind, subject, state, summary, task_id, \
    worker_id, query_id, raised_at, cleared_at";

fn decode_alert(row: &DbRow) -> Result<AlertView, StoreError> {
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

/// Every alert cause at `now`.
async fn causes(
    conn: &mut Conn,
    req: &AlertSyncRequest,
    now: Timestamp,
) -> Result<Vec<Cause>, StoreError> {
    let mut out = Vec::new();
    for row in sqlx::query(
        "SELECT worker_id, last_seen_at FROM workers WHERE retired_at IS NULL \
         AND last_seen_at < $1 LIMIT 1000",
    )
    .bind(now.minus(req.worker_offline).to_rfc3339())
    .fetch_all(&mut *conn)
    .await?
    {
        let w: String = row.try_get("worker_id")?;
        let seen = ts(&row.try_get::<String, _>("last_seen_at")?)?;
        out.push(Cause {
            kind: AlertKind::WorkerOffline,
            summary: format!(
                "worker {w} has not polled since {seen} ({:.0} s)",
                now.seconds_since(seen)
            ),
            subject: w.clone(),
            task_id: None,
            worker_id: Some(w),
        });
    }
    for row in sqlx::query(
        "SELECT task_id, created_at FROM tasks WHERE status = 'queued' \
         AND created_at < $1 ORDER BY created_at LIMIT 1000",
    )
    .bind(now.minus(req.queued).to_rfc3339())
    .fetch_all(&mut *conn)
    .await?
    {
        let t: String = row.try_get("task_id")?;
        let created = ts(&row.try_get::<String, _>("created_at")?)?;
        out.push(Cause {
            kind: AlertKind::TaskQueuedTooLong,
            summary: format!(
                "task {t} queued for {:.0} s without a lease; is a worker polling?",
                now.seconds_since(created)
            ),
            subject: t.clone(),
            task_id: Some(t),
            worker_id: None,
        });
    }
    for row in sqlx::query(
        "SELECT t.task_id, t.lease_owner, t.lease_count, \
         (SELECT r.state FROM task_reports r WHERE r.task_id = t.task_id \
          ORDER BY r.seq DESC LIMIT 1) AS latest_state, \
         (SELECT r.site_order_id FROM task_reports r WHERE r.task_id = t.task_id \
          AND r.site_order_id IS NOT NULL ORDER BY r.seq DESC LIMIT 1) AS site_order_id \
         FROM tasks t WHERE t.status = 'stale' ORDER BY t.updated_at LIMIT 1000",
    )
    .fetch_all(&mut *conn)
    .await?
    {
        let t: String = row.try_get("task_id")?;
        let owner: Option<String> = row.try_get("lease_owner")?;
        let count: i64 = row.try_get("lease_count")?;
        let latest: Option<OrderState> = row
            .try_get::<Option<String>, _>("latest_state")?
            .map(|s| s.parse().map_err(|e| corrupt("state", e)))
            .transpose()?;
        let order: Option<String> = row.try_get("site_order_id")?;
        out.push(Cause {
            kind: AlertKind::TaskStale,
            // What the worker last reported decides the advice (D-stale-words-follow-the-latest-report).
            summary: format!(
                "task {t} lease expired (owner {}, {count} {}). {}",
                owner.as_deref().unwrap_or("-"),
                if count == 1 { "grant" } else { "grants" },
                stale_advice(latest, order.as_deref())
            ),
            subject: t.clone(),
            task_id: Some(t),
            worker_id: owner,
        });
    }
    // A queued task that reached its deadline unleased: an event, open for TASK_EXPIRED_SHOWN
    // after the expiry (D-task-not-after-expired).
    for row in sqlx::query(
        "SELECT task_id, not_after, created_at, updated_at FROM tasks WHERE status = 'expired' \
         AND updated_at >= $1 ORDER BY updated_at LIMIT 1000",
    )
    .bind(now.minus(TASK_EXPIRED_SHOWN).to_rfc3339())
    .fetch_all(&mut *conn)
    .await?
    {
        let t: String = row.try_get("task_id")?;
        let not_after = decode_ts(row.try_get("not_after")?)?;
        let created = ts(&row.try_get::<String, _>("created_at")?)?;
        out.push(Cause {
            kind: AlertKind::TaskExpired,
            summary: format!(
                "task {t} expired: its not_after {} passed while it was queued ({:.0} s after \
                 submit), so it was never leased and nothing was ordered; the upstream sees \
                 status expired. Is a worker polling?",
                not_after.map_or_else(|| "-".to_owned(), |n| n.to_rfc3339()),
                not_after.map_or(0.0, |n| n.seconds_since(created))
            ),
            subject: t.clone(),
            task_id: Some(t),
            worker_id: None,
        });
    }
    for row in sqlx::query(
        "SELECT t.task_id, \
         (SELECT r.error_code FROM task_reports r WHERE r.task_id = t.task_id \
          AND r.error_code IS NOT NULL ORDER BY r.seq DESC LIMIT 1) AS error_code, \
         (SELECT r.detail FROM task_reports r WHERE r.task_id = t.task_id \
          ORDER BY r.seq DESC LIMIT 1) AS detail, t.set_aside_reason \
         FROM tasks t WHERE t.status = 'needs_human' ORDER BY t.updated_at LIMIT 1000",
    )
    .fetch_all(&mut *conn)
    .await?
    {
        let t: String = row.try_get("task_id")?;
        let code: Option<i32> = row.try_get("error_code")?;
        let detail: Option<String> = row.try_get("detail")?;
        let set_aside: Option<String> = row.try_get("set_aside_reason")?;
        out.push(Cause {
            kind: AlertKind::TaskNeedsHuman,
            summary: needs_human_summary(&t, code, detail.as_deref(), set_aside.as_deref()),
            subject: t.clone(),
            task_id: Some(t),
            worker_id: None,
        });
    }
    // The site session: the latest signal of either channel decides. A worker report
    // carries its error code (none: the session worked); an account query either
    // succeeded (logged in) or failed with 5001 (logged out); other failures say nothing.
    let report: Option<(Option<i32>, String)> = sqlx::query(
        "SELECT r.error_code, r.reported_at FROM task_reports r \
         JOIN tasks t ON t.task_id = r.task_id \
         WHERE t.site = $1 AND r.operator IS NULL ORDER BY r.reported_at DESC LIMIT 1",
    )
    .bind(WATCHED_SITE)
    .fetch_optional(&mut *conn)
    .await?
    .map(|r| Ok::<_, sqlx::Error>((r.try_get(0)?, r.try_get(1)?)))
    .transpose()?;
    let query: Option<(Option<i32>, String)> = sqlx::query(
        "SELECT error_code, finished_at FROM account_queries WHERE site = $1 \
         AND (status = 'succeeded' OR (status = 'failed' AND error_code = $2)) \
         ORDER BY finished_at DESC LIMIT 1",
    )
    .bind(WATCHED_SITE)
    .bind(LOGGED_OUT)
    .fetch_optional(&mut *conn)
    .await?
    .map(|r| Ok::<_, sqlx::Error>((r.try_get(0)?, r.try_get(1)?)))
    .transpose()?;
    let latest = match (report, query) {
        (Some(r), Some(q)) => Some(if q.1 >= r.1 { ("account query", q) } else { ("order report", r) }),
        (Some(r), None) => Some(("order report", r)),
        (None, Some(q)) => Some(("account query", q)),
        (None, None) => None,
    };
    if let Some((channel, (Some(LOGGED_OUT), at))) = latest {
        out.push(Cause {
            kind: AlertKind::AccountLoggedOut,
            subject: WATCHED_SITE.to_owned(),
            summary: format!(
                "the {WATCHED_SITE} session is logged out (5001 in an {channel} at {at}); \
                 log in again on the worker's browser"
            ),
            task_id: None,
            worker_id: None,
        });
    }
    let mut failing: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for row in sqlx::query(
        "SELECT url, attempts FROM alert_outbox WHERE state = 'pending' \
         AND attempts >= $1 LIMIT 10000",
    )
    .bind(req.webhook_failing_after)
    .fetch_all(&mut *conn)
    .await?
    {
        let url: String = row.try_get("url")?;
        let attempts: i64 = row.try_get("attempts")?;
        let e = failing.entry(webhook_host(&url)).or_default();
        e.0 += 1;
        e.1 = e.1.max(attempts);
    }
    // Clock signals of every instance: a skew while the instance still
    // reports, a jump until it has been quiet for CLOCK_JUMP_QUIET.
    for c in super::clocks::clock_signals(conn).await? {
        let fresh = clock_signal_fresh(&c, now);
        if c.skewed && fresh {
            let offset = c.offset_ms.unwrap_or_default();
            out.push(Cause {
                kind: AlertKind::ClockSkew,
                summary: format!(
                    "instance {}'s clock is {:.1} s {} the database's; it does not sweep leases \
                     until its clock is fixed (NTP)",
                    c.instance_id,
                    offset.unsigned_abs() as f64 / 1000.0,
                    if offset < 0 { "ahead of" } else { "behind" }
                ),
                subject: c.instance_id.clone(),
                task_id: None,
                worker_id: None,
            });
        }
        if let (Some(at), Some(detail)) = (c.last_jump_at, &c.last_jump_detail)
            && at >= now.minus(CLOCK_JUMP_QUIET)
        {
            out.push(Cause {
                kind: AlertKind::ClockJump,
                summary: format!("instance {}'s clock jumped at {at}: {detail}", c.instance_id),
                subject: c.instance_id,
                task_id: None,
                worker_id: None,
            });
        }
    }
    for (host, (events, attempts)) in failing {
        out.push(Cause {
            kind: AlertKind::WebhookFailing,
            summary: format!(
                "alert deliveries to {host} are failing: {events} {} undelivered \
                 after up to {attempts} attempts",
                if events == 1 { "event" } else { "events" }
            ),
            subject: host,
            task_id: None,
            worker_id: None,
        });
    }
    Ok(out)
}

/// Writes an alert event: its `alert_events` row, whose `seq` the database gives as the event is
/// written (the wire's `sequence`, D-webhook-event-sequence), and one outbox row per receiver.
async fn enqueue(
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

pub(crate) async fn alert_sync(
    conn: &mut Conn,
    req: AlertSyncRequest,
    now: Timestamp,
) -> Result<AlertSyncOutcome, StoreError> {
    let sql = format!("SELECT {ALERT_COLUMNS} FROM alerts WHERE state = 'open'");
    let open: HashMap<(AlertKind, String), AlertView> =
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .fetch_all(&mut *conn)
            .await?
            .iter()
            .map(|r| decode_alert(r).map(|a| ((a.kind, a.subject.clone()), a)))
            .collect::<Result<_, _>>()?;
    let causes = causes(conn, &req, now).await?;
    let mut out = AlertSyncOutcome::default();
    let mut present = std::collections::HashSet::new();
    for c in causes {
        present.insert((c.kind, c.subject.clone()));
        if open.contains_key(&(c.kind, c.subject.clone())) {
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
            enqueue(conn, &alert, AlertState::Open, &req.webhook_urls, now).await?;
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
        let next = alert.state.transition(AlertEvent::Clear).map_err(|e| corrupt("alert", e))?;
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
            enqueue(conn, &alert, next, &req.webhook_urls, now).await?;
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
    debug_assert!(matches!(a.event, DeliveryEvent::Delivered | DeliveryEvent::Failed));
    Ok(())
}

/// The task's status and site, or 6001.
async fn status_of(conn: &mut Conn, task: &TaskId) -> Result<TaskStatus, StoreError> {
    Ok(status_and_set_aside(conn, task).await?.0)
}

/// The task's status and whether it was set aside as undecodable, or 6001.
async fn status_and_set_aside(
    conn: &mut Conn,
    task: &TaskId,
) -> Result<(TaskStatus, bool), StoreError> {
    let row = sqlx::query("SELECT status, set_aside_reason FROM tasks WHERE task_id = $1")
        .bind(task.as_str())
        .fetch_optional(&mut *conn)
        .await?
        .ok_or_else(|| StoreError::TaskNotFound(task.clone()))?;
    let status = row
        .try_get::<String, _>("status")?
        .parse()
        .map_err(|e| corrupt("status", e))?;
    let set_aside: Option<String> = row.try_get("set_aside_reason")?;
    Ok((status, set_aside.is_some()))
}

/// Moves `task` from `from` to `to` with `event`'s outcome, guarded in SQL; 6003 when
/// the status changed since it was read.
async fn guarded_finish(
    conn: &mut Conn,
    task: &TaskId,
    from: TaskStatus,
    to: TaskStatus,
    now: Timestamp,
) -> Result<(), StoreError> {
    let done = sqlx::query(
        "UPDATE tasks SET status = $1, outcome = $1, updated_at = $2 \
         WHERE task_id = $3 AND status = $4",
    )
    .bind(to.as_str())
    .bind(now.to_rfc3339())
    .bind(task.as_str())
    .bind(from.as_str())
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if done == 1 {
        return Ok(());
    }
    let status = status_of(conn, task).await?;
    Err(StoreError::StateConflict {
        status,
        reason: "the task changed concurrently".into(),
    })
}

pub(crate) async fn task_resolve(
    conn: &mut Conn,
    req: ResolveRequest,
    now: Timestamp,
) -> Result<OperatorActionAck, StoreError> {
    let (from, set_aside) = status_and_set_aside(conn, &req.task_id).await?;
    if set_aside {
        // Its stored row cannot be decoded (D-poison-row-set-aside): it stays needs_human for the schema too.
        return Err(StoreError::StateConflict {
            status: from,
            reason: "the task was set aside as an undecodable row; it cannot be resolved here".into(),
        });
    }
    let to = from
        .transition(TaskEvent::Resolve(req.outcome))
        .map_err(|_| StoreError::StateConflict {
            status: from,
            reason: "only a stale or needs_human task can be resolved, to succeeded or \
                     failed"
                .into(),
        })?;
    if req.state.is_none() {
        // Without a state of their own, the person's verdict stands beside the worker's latest
        // report in the mirror the upstream reads; `failed` beside `paid` would say both.
        // Only a state that implies the other verdict is refused: a latest
        // `in_cart` is the usual stale task whose order went through unreported, and the
        // operator who found it on the site resolves `succeeded`. With a state,
        // `Outcome::check_resolve` has already judged the pair.
        let latest: Option<String> = sqlx::query_scalar(
            "SELECT state FROM task_reports WHERE task_id = $1 ORDER BY seq DESC LIMIT 1",
        )
        .bind(req.task_id.as_str())
        .fetch_optional(&mut *conn)
        .await?;
        if let Some(latest) = latest.and_then(|s| s.parse::<OrderState>().ok())
            && let Some(implied) = Outcome::implied_by(latest)
            && implied != req.outcome
        {
            return Err(StoreError::Contradicts(format!(
                "outcome {} contradicts the latest reported state {latest}, which makes the task \
                 {}: send the state you saw on the site (state) with the outcome",
                req.outcome.as_str(),
                implied.as_str()
            )));
        }
    }
    guarded_finish(conn, &req.task_id, from, to, now).await?;
    grants::grant_ended(conn, &req.task_id, GrantEnd::Resolved, now).await?;
    if let Some(state) = req.state {
        // The person's observation joins the state mirror, marked with the operator. An
        // existing row for that state keeps the worker's evidence and gains the mark.
        sqlx::query(
            "INSERT INTO task_reports (task_id, state, site_order_id, detail, \
             reported_at, operator, seq) VALUES ($1, $2, $3, $4, $5, $6, \
             (SELECT COALESCE(MAX(seq), 0) + 1 FROM task_reports WHERE task_id = $1)) \
             ON CONFLICT (task_id, state) DO UPDATE SET operator = excluded.operator, \
             site_order_id = COALESCE(excluded.site_order_id, task_reports.site_order_id)",
        )
        .bind(req.task_id.as_str())
        .bind(state.as_str())
        .bind(req.site_order_id.clone())
        .bind(format!("resolved by operator {}: {}", req.actor, req.reason))
        .bind(now.to_rfc3339())
        .bind(&req.actor)
        .execute(&mut *conn)
        .await?;
    }
    let detail = serde_json::json!({
        "outcome": req.outcome,
        "site_order_id": req.site_order_id,
        "state": req.state,
    });
    let action = action_insert(
        conn,
        OperatorActionKind::Resolve,
        &req.actor,
        &req.reason,
        Some(&req.task_id),
        None,
        Some(from),
        Some(to),
        detail,
        now,
    )
    .await?;
    Ok(OperatorActionAck {
        task_id: req.task_id,
        status: to,
        action,
    })
}

pub(crate) async fn task_cancel(
    conn: &mut Conn,
    req: CancelRequest,
    now: Timestamp,
) -> Result<OperatorActionAck, StoreError> {
    let from = status_of(conn, &req.task_id).await?;
    let to = from
        .transition(TaskEvent::Cancel)
        .map_err(|_| StoreError::StateConflict {
            status: from,
            reason: "only a queued task can be cancelled".into(),
        })?;
    // Only `queued` cancels (the transition above), and a queued task has never been granted:
    // there is no open lease grant to end (D-lease-grant-history).
    guarded_finish(conn, &req.task_id, from, to, now).await?;
    let action = action_insert(
        conn,
        OperatorActionKind::Cancel,
        &req.actor,
        &req.reason,
        Some(&req.task_id),
        None,
        Some(from),
        Some(to),
        serde_json::json!({}),
        now,
    )
    .await?;
    Ok(OperatorActionAck {
        task_id: req.task_id,
        status: to,
        action,
    })
}

pub(crate) async fn task_operator_actions(
    conn: &mut Conn,
    task: TaskId,
) -> Result<Vec<OperatorActionView>, StoreError> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {ACTION_COLUMNS} FROM operator_actions WHERE task_id = $1 \
         ORDER BY created_at, action_id"
    )))
    .bind(task.as_str())
    .fetch_all(&mut *conn)
    .await?
    .iter()
    .map(decode_action)
    .collect()
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

/// Most workers `GET /api/workers` and the console list.
pub(crate) const WORKERS_LISTED: usize = 1000;

pub(crate) async fn worker_list(conn: &mut Conn) -> Result<Vec<WorkerRow>, StoreError> {
    // Past the bound, what is cut must be the least interesting: serving workers before retired
    // ones, the longest silent first (so an offline worker is never the one cut, as on /health).
    let sql = format!(
        "SELECT w.worker_id, w.last_seen_at, w.retired_at, \
         (SELECT t.task_id FROM tasks t WHERE t.status IN ('leased','running') \
          AND t.lease_owner = w.worker_id LIMIT 1) AS active_task \
         FROM workers w \
         ORDER BY CASE WHEN w.retired_at IS NULL THEN 0 ELSE 1 END, w.last_seen_at, \
         w.worker_id{} LIMIT {WORKERS_LISTED}",
        Db::BYTE_ORDER
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
    .fetch_all(&mut *conn)
    .await?
    .iter()
    .map(|r| {
        Ok(WorkerRow {
            worker_id: r.try_get("worker_id")?,
            last_seen_at: ts(&r.try_get::<String, _>("last_seen_at")?)?,
            retired_at: decode_ts(r.try_get("retired_at")?)?,
            active_task: r
                .try_get::<Option<String>, _>("active_task")?
                .as_deref()
                .map(task_id)
                .transpose()?,
        })
    })
    .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(rows)
}

pub(crate) async fn worker_retire(
    conn: &mut Conn,
    req: RetireRequest,
    now: Timestamp,
) -> Result<OperatorActionView, StoreError> {
    let done = sqlx::query(
        "UPDATE workers SET retired_at = $1 WHERE worker_id = $2 AND retired_at IS NULL",
    )
    .bind(now.to_rfc3339())
    .bind(req.worker_id.as_str())
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if done != 1 {
        let since: Option<Option<String>> =
            sqlx::query_scalar("SELECT retired_at FROM workers WHERE worker_id = $1")
                .bind(req.worker_id.as_str())
                .fetch_optional(&mut *conn)
                .await?;
        return Err(match since {
            Some(Some(since)) => StoreError::WorkerRetired {
                worker_id: req.worker_id.to_string(),
                since,
            },
            _ => StoreError::WorkerNotFound(req.worker_id.to_string()),
        });
    }
    action_insert(
        conn,
        OperatorActionKind::RetireWorker,
        &req.actor,
        &req.reason,
        None,
        Some(req.worker_id.as_str()),
        None,
        None,
        serde_json::json!({}),
        now,
    )
    .await
}

#[async_trait::async_trait]
impl OperatorStore for Store {
    async fn alert_sync(
        &self,
        req: AlertSyncRequest,
        now: Timestamp,
    ) -> Result<AlertSyncOutcome, StoreError> {
        self.write(Box::new(move |c| Box::pin(alert_sync(c, req, now))))
            .await
    }

    async fn alert_list(&self, filter: AlertFilter) -> Result<Page<AlertView>, StoreError> {
        let mut c = self.read_pool().acquire().await?;
        alert_list(&mut c, filter).await
    }

    async fn alert_seek(
        &self,
        open_only: bool,
        kind: Option<AlertKind>,
        seek: Seek,
        limit: i64,
    ) -> Result<SeekPage<AlertView>, StoreError> {
        let filters = [
            ("state", open_only.then_some("open")),
            ("kind", kind.map(|k| k.as_str())),
        ];
        super::reads::seek_page_by(
            self.read_pool(),
            ALERT_COLUMNS,
            "alerts",
            "",
            "raised_at",
            filters,
            (&seek, limit),
            decode_alert,
        )
        .await
    }

    async fn alert_stale_without_evidence(&self) -> Result<Vec<StaleEvidence>, StoreError> {
        let mut c = self.read_pool().acquire().await?;
        alert_stale_without_evidence(&mut c).await
    }

    async fn alert_set_evidence(&self, alert_id: &str, query_id: &QueryId) -> Result<(), StoreError> {
        let (a, q) = (alert_id.to_owned(), query_id.clone());
        self.write(Box::new(move |c| Box::pin(alert_set_evidence(c, a, q))))
            .await
    }

    async fn outbox_receivers_due(
        &self,
        now: Timestamp,
        limit: i64,
    ) -> Result<Vec<String>, StoreError> {
        let mut c = self.read_pool().acquire().await?;
        outbox_receivers_due(&mut c, now, limit).await
    }

    async fn outbox_due(
        &self,
        url: &str,
        now: Timestamp,
        limit: i64,
    ) -> Result<Vec<OutboxItem>, StoreError> {
        let mut c = self.read_pool().acquire().await?;
        outbox_due(&mut c, url, now, limit).await
    }

    async fn outbox_record(&self, attempt: DeliveryAttempt, now: Timestamp) -> Result<(), StoreError> {
        self.write(Box::new(move |c| Box::pin(outbox_record(c, attempt, now))))
            .await
    }

    async fn task_resolve(
        &self,
        req: ResolveRequest,
        now: Timestamp,
    ) -> Result<OperatorActionAck, StoreError> {
        self.write(Box::new(move |c| Box::pin(task_resolve(c, req, now))))
            .await
    }

    async fn task_cancel(
        &self,
        req: CancelRequest,
        now: Timestamp,
    ) -> Result<OperatorActionAck, StoreError> {
        self.write(Box::new(move |c| Box::pin(task_cancel(c, req, now))))
            .await
    }

    async fn task_operator_actions(
        &self,
        task_id: &TaskId,
    ) -> Result<Vec<OperatorActionView>, StoreError> {
        let mut c = self.read_pool().acquire().await?;
        task_operator_actions(&mut c, task_id.clone()).await
    }

    async fn task_lease_grants(
        &self,
        task_id: &TaskId,
        limit: i64,
    ) -> Result<Vec<LeaseGrantRecord>, StoreError> {
        let mut c = self.read_pool().acquire().await?;
        grants::task_lease_grants(&mut c, task_id, limit).await
    }

    async fn task_evidence_queries(&self, task_id: &TaskId) -> Result<Vec<QueryId>, StoreError> {
        let mut c = self.read_pool().acquire().await?;
        task_evidence_queries(&mut c, task_id.clone()).await
    }

    async fn worker_list(&self) -> Result<Vec<WorkerRow>, StoreError> {
        let mut c = self.read_pool().acquire().await?;
        worker_list(&mut c).await
    }

    async fn worker_retire(
        &self,
        req: RetireRequest,
        now: Timestamp,
    ) -> Result<OperatorActionView, StoreError> {
        self.write(Box::new(move |c| Box::pin(worker_retire(c, req, now))))
            .await
    }
}
