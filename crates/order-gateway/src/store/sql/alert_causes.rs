//! The alert causes at `now`, one function per alert kind, each one bounded read in the sync's
//! transaction. [`causes`] gathers them in a fixed order, so the alerts one sync raises come
//! out in the same order every time.

use std::collections::BTreeMap;

use rakuten_types::alert::AlertKind;
use rakuten_types::{OrderState, Outcome, Timestamp};
use sqlx::Row;

use super::{Conn, clocks};
use crate::store::operator::{
    AlertSyncRequest, Cause, LOGGED_OUT, TASK_EXPIRED_SHOWN, WATCHED_SITE, needs_human_summary,
    stale_advice, webhook_host,
};
use crate::store::sql::rows::{corrupt, decode_ts, ts};
use crate::store::{CLOCK_JUMP_QUIET, StoreError, clock_signal_fresh};

/// Every alert cause at `now`.
pub(crate) async fn causes(
    conn: &mut Conn,
    req: &AlertSyncRequest,
    now: Timestamp,
) -> Result<Vec<Cause>, StoreError> {
    let mut out = super::worker_offline::causes(conn, req, now).await?;
    out.extend(task_queued_too_long(conn, req, now).await?);
    out.extend(task_stale(conn).await?);
    out.extend(task_expired(conn, now).await?);
    out.extend(task_needs_human(conn).await?);
    out.extend(task_state_contradicts_outcome(conn).await?);
    out.extend(account_logged_out(conn).await?);
    out.extend(clock_skew_and_jump(conn, now).await?);
    out.extend(webhook_failing(conn, req).await?);
    Ok(out)
}

/// `task_queued_too_long`: a task queued for longer than `req.queued` without a lease.
async fn task_queued_too_long(
    conn: &mut Conn,
    req: &AlertSyncRequest,
    now: Timestamp,
) -> Result<Vec<Cause>, StoreError> {
    let mut out = Vec::new();
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
    Ok(out)
}

/// `task_stale`: a task whose lease expired; its advice follows the worker's latest report.
async fn task_stale(conn: &mut Conn) -> Result<Vec<Cause>, StoreError> {
    let mut out = Vec::new();
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
    Ok(out)
}

/// `task_expired`: a queued task that reached its deadline unleased. An event, open for
/// [`TASK_EXPIRED_SHOWN`] after the expiry (D-task-not-after-expired).
async fn task_expired(conn: &mut Conn, now: Timestamp) -> Result<Vec<Cause>, StoreError> {
    let mut out = Vec::new();
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
    Ok(out)
}

/// `task_needs_human`: a task that waits for a person, with its last error or set-aside reason.
async fn task_needs_human(conn: &mut Conn) -> Result<Vec<Cause>, StoreError> {
    let mut out = Vec::new();
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
    Ok(out)
}

/// `task_state_contradicts_outcome`: a task ended `succeeded` or `failed` whose latest reported
/// order state says the other verdict (`Outcome::check_fits_state`), as a report appended after
/// the end can make it (D-late-report-contradiction-alert). Gone once the latest state fits again.
async fn task_state_contradicts_outcome(conn: &mut Conn) -> Result<Vec<Cause>, StoreError> {
    let mut out = Vec::new();
    // The SQL narrows to the pairs the rule refuses; the rule itself decides below.
    for row in sqlx::query(sqlx::AssertSqlSafe(crate::store::sql::contradicted_tasks::<
        super::Db,
    >()))
    .fetch_all(&mut *conn)
    .await?
    {
        let t: String = row.try_get("task_id")?;
        let status: String = row.try_get("status")?;
        let outcome: Outcome = status.parse().map_err(|e| corrupt("status", e))?;
        let state: OrderState = row
            .try_get::<String, _>("state")?
            .parse()
            .map_err(|e| corrupt("state", e))?;
        if outcome.check_fits_state(Some(state)).is_ok() {
            continue;
        }
        let order: Option<String> = row.try_get("site_order_id")?;
        out.push(Cause {
            kind: AlertKind::TaskStateContradictsOutcome,
            summary: format!(
                "task {t} ended {outcome} but its latest report says {state}{}: the upstream \
                 reads both and may order again. Check the site, tell the upstream, and report \
                 or resolve the state that holds",
                order
                    .map(|n| format!(" (site order {n})"))
                    .unwrap_or_default(),
                outcome = outcome.as_str(),
            ),
            subject: t.clone(),
            task_id: Some(t),
            worker_id: row.try_get("lease_owner")?,
        });
    }
    Ok(out)
}

/// `account_logged_out`: the site session, where the latest signal of either channel decides. A
/// worker report carries its error code (none: the session worked); an account query either
/// succeeded (logged in) or failed with 5001 (logged out); other failures say nothing.
async fn account_logged_out(conn: &mut Conn) -> Result<Option<Cause>, StoreError> {
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
        (Some(r), Some(q)) => Some(if q.1 >= r.1 {
            ("account query", q)
        } else {
            ("order report", r)
        }),
        (Some(r), None) => Some(("order report", r)),
        (None, Some(q)) => Some(("account query", q)),
        (None, None) => None,
    };
    let Some((channel, (Some(LOGGED_OUT), at))) = latest else {
        return Ok(None);
    };
    Ok(Some(Cause {
        kind: AlertKind::AccountLoggedOut,
        subject: WATCHED_SITE.to_owned(),
        summary: format!(
            "the {WATCHED_SITE} session is logged out (5001 in an {channel} at {at}); \
             log in again on the worker's browser"
        ),
        task_id: None,
        worker_id: None,
    }))
}

/// `clock_skew` and `clock_jump`, from the clock signals of every instance: a skew while the
/// instance still reports, a jump until it has been quiet for [`CLOCK_JUMP_QUIET`].
async fn clock_skew_and_jump(conn: &mut Conn, now: Timestamp) -> Result<Vec<Cause>, StoreError> {
    let mut out = Vec::new();
    for c in clocks::clock_signals(conn).await? {
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
                summary: format!(
                    "instance {}'s clock jumped at {at}: {detail}",
                    c.instance_id
                ),
                subject: c.instance_id,
                task_id: None,
                worker_id: None,
            });
        }
    }
    Ok(out)
}

/// `webhook_failing`: per receiver host, the pending deliveries that failed at least
/// `req.webhook_failing_after` times.
async fn webhook_failing(
    conn: &mut Conn,
    req: &AlertSyncRequest,
) -> Result<Vec<Cause>, StoreError> {
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
    Ok(failing
        .into_iter()
        .map(|(host, (events, attempts))| Cause {
            kind: AlertKind::WebhookFailing,
            summary: format!(
                "alert deliveries to {host} are failing: {events} {} undelivered \
                 after up to {attempts} attempts",
                if events == 1 { "event" } else { "events" }
            ),
            subject: host,
            task_id: None,
            worker_id: None,
        })
        .collect())
}
