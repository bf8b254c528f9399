//! Ordinary polling schedule (`poll_schedule`), batched poll outcomes, the scheduler's recovery
//! read, and the ordinary manual trigger (`manual_triggers`).

use async_trait::async_trait;

use super::SqlStore;
use crate::store::ScheduleStore;

use std::time::Duration;

use futures::FutureExt;
use sqlx::Row;

use rakuten_types::Timestamp;

use super::enqueue::shop_in_scope;
use super::{Conn, Pool, bulk, dialect, t};
use crate::domain::asset::{AssetRef, AssetType};
use crate::domain::{Scope, TaskTypes};
use crate::scheduler::shard_queue::{first_poll_at, shard_of};
use crate::store::{
    CardScope, ManualTriggerOutcome, ManualTriggerRequest, NewLog, PackageState, PollRecord,
    QueuedTrigger, ScheduleConfig, ShardBatch, StoreError, StoreResult,
};

/// Cards per transaction while syncing the schedule.
const SYNC_PAGE: i64 = 5_000;
/// 24 h dedupe window of the ordinary manual trigger.
pub(crate) const MANUAL_DEDUPE: Duration = Duration::from_secs(24 * 3600);

/// The configured task types and shard count as stored (`None` before the first sync).
pub(crate) async fn schedule_config(
    conn: &mut Conn,
) -> StoreResult<Option<(u32, Vec<(String, u64)>)>> {
    let shards: Option<String> =
        sqlx::query_scalar("SELECT value FROM meta WHERE key = 'poll_shards'")
            .fetch_optional(&mut *conn)
            .await?;
    let Some(shards) = shards.and_then(|s| s.parse::<u32>().ok()) else {
        return Ok(None);
    };
    let types: Vec<(String, i64)> =
        sqlx::query_as("SELECT name, interval_secs FROM poll_task_types ORDER BY name")
            .fetch_all(&mut *conn)
            .await?;
    Ok(Some((
        shards,
        types.into_iter().map(|(n, s)| (n, s as u64)).collect(),
    )))
}

/// The stored configuration for the periodic check (D-schedule-config-check): one statement, so a sync
/// committing meanwhile is seen whole or not at all.
pub(crate) async fn stored_config(pool: &Pool) -> StoreResult<Option<ScheduleConfig>> {
    let rows: Vec<(String, Option<String>, Option<i64>)> = sqlx::query_as(
        "SELECT m.value, t.name, t.interval_secs FROM meta m LEFT JOIN poll_task_types t ON 1 = 1 \
         WHERE m.key = 'poll_shards' ORDER BY t.name",
    )
    .fetch_all(pool)
    .await?;
    let Some(shards) = rows.first().and_then(|r| r.0.parse::<u32>().ok()) else {
        return Ok(None);
    };
    Ok(Some(ScheduleConfig {
        shards,
        task_types: rows
            .into_iter()
            .filter_map(|(_, name, secs)| Some((name?, secs? as u64)))
            .collect(),
    }))
}

/// Gives one card its schedule rows (inside the import transaction).
pub(crate) async fn schedule_insert_card(
    conn: &mut Conn,
    cfg: &(u32, Vec<(String, u64)>),
    iccid: &str,
    now: Timestamp,
) -> StoreResult<()> {
    let shard = shard_of(iccid, cfg.0);
    for (tt, secs) in &cfg.1 {
        sqlx::query(
            "INSERT INTO poll_schedule (iccid, task_type, shard, next_poll_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (iccid, task_type) DO NOTHING",
        )
        .bind(iccid)
        .bind(tt)
        .bind(i64::from(shard))
        .bind(t(first_poll_at(iccid, Duration::from_secs(*secs), now)))
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// Brings the schedule to the configuration: reads on `pool`, the configuration and each page of
/// [`SYNC_PAGE`] cards written through `writer` (one write each).
pub(crate) async fn sync(
    pool: &Pool,
    writer: &dialect::Writer,
    task_types: &TaskTypes,
    shards: u32,
    now: Timestamp,
) -> StoreResult<u64> {
    let mut want: Vec<(String, u64)> = task_types
        .all()
        .iter()
        .map(|t| (t.name.clone(), t.interval.as_secs()))
        .collect();
    want.sort();
    let mut conn = pool.acquire().await?;
    let had = schedule_config(&mut conn).await?;
    drop(conn);
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM poll_schedule")
        .fetch_one(pool)
        .await?;
    let cards: i64 = sqlx::query_scalar("SELECT count(*) FROM cards")
        .fetch_one(pool)
        .await?;
    let same_config = had.as_ref() == Some(&(shards, want.clone()));
    if same_config && rows == cards * want.len() as i64 {
        return Ok(0);
    }
    if let Some((old_shards, old_types)) = had.as_ref().filter(|_| !same_config) {
        // The schedule is shared by every instance on this database, and each syncs it only at
        // its start: an instance that disagrees rewrites it for all of them (a task type it
        // lacks stops being polled everywhere). Said loudly, so a stray setting is found.
        tracing::warn!(
            stored_shards = old_shards,
            stored_task_types = ?old_types,
            shards,
            task_types = ?want,
            "this instance's RAKUTEN_POLL_TASK_TYPES / RAKUTEN_POLL_SHARDS differ from the stored \
             schedule configuration: rewriting it for every instance on this database; instances \
             already running keep their own settings until restarted, and say so in their log \
             and /health (schedule_config) within 30 s"
        );
    }
    // Record the configuration first: imports from now on add rows for it themselves. Imports
    // still running under the old configuration finish first (they hold the shared lock), so the
    // page scan below sees their cards; two instances starting at once sync one after the other
    // (D-poll-postgres-concurrent-writes).
    let removed = writer
        .write((shards, want.clone()), |c, (shards, want)| {
            sync_config(c, *shards, want).boxed()
        })
        .await?;
    let mut written = removed;
    let mut after = String::new();
    loop {
        let page: Vec<String> =
            sqlx::query_scalar("SELECT iccid FROM cards WHERE iccid > $1 ORDER BY iccid LIMIT $2")
                .bind(&after)
                .bind(SYNC_PAGE)
                .fetch_all(pool)
                .await?;
        let Some(last) = page.last().cloned() else {
            break;
        };
        written += writer
            .write(
                (page, shards, want.clone(), now),
                |c, (page, shards, want, now)| sync_page(c, page, *shards, want, *now).boxed(),
            )
            .await?;
        after = last;
    }
    Ok(written)
}

/// Stores the shard count and task types and removes the schedule rows of task types no longer
/// configured; returns how many.
async fn sync_config(tx: &mut Conn, shards: u32, want: &[(String, u64)]) -> StoreResult<u64> {
    if let Some(lock) = dialect::SCHEDULE_CONFIG_WRITE_LOCK {
        sqlx::query(lock).execute(&mut *tx).await?;
    }
    sqlx::query(
        "INSERT INTO meta (key, value) VALUES ('poll_shards', $1) \
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    )
    .bind(shards.to_string())
    .execute(&mut *tx)
    .await?;
    sqlx::query("DELETE FROM poll_task_types")
        .execute(&mut *tx)
        .await?;
    for (n, s) in want {
        sqlx::query("INSERT INTO poll_task_types (name, interval_secs) VALUES ($1, $2)")
            .bind(n)
            .bind(*s as i64)
            .execute(&mut *tx)
            .await?;
    }
    // Rows of task types no longer configured.
    let removed = sqlx::query(
        "DELETE FROM poll_schedule WHERE task_type NOT IN (SELECT name FROM poll_task_types)",
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    Ok(removed)
}

/// Gives the cards of `page` their schedule rows (missing ones added, shards recomputed);
/// returns rows written.
async fn sync_page(
    tx: &mut Conn,
    page: &[String],
    shards: u32,
    want: &[(String, u64)],
    now: Timestamp,
) -> StoreResult<u64> {
    let mut written = 0;
    for iccid in page {
        let shard = shard_of(iccid, shards);
        for (tt, secs) in want {
                let r = sqlx::query(
                    "INSERT INTO poll_schedule (iccid, task_type, shard, next_poll_at) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (iccid, task_type) DO UPDATE SET shard = excluded.shard \
                     WHERE poll_schedule.shard <> excluded.shard",
                )
                .bind(iccid)
                .bind(tt)
                .bind(i64::from(shard))
                .bind(t(first_poll_at(iccid, Duration::from_secs(*secs), now)))
                .execute(&mut *tx)
                .await?;
                written += r.rows_affected();
            }
        }
    Ok(written)
}

/// The scheduler's take for `shards` shards of one task type in ONE statement (D-schedule-take-one-statement): up to
/// `$4` due cards (due at `$3`) of each shard `$5…`, moved to `$1` with `last_polled_at` stamped
/// `$3` (D-poll-schedule-rows), returned as `(iccid, shard, scope code)`. Each shard's pick is its own
/// sub-select (its own `ORDER BY next_poll_at LIMIT`), joined by `UNION ALL`; on PostgreSQL each
/// pick skips rows another instance's take holds (`SKIP LOCKED`), so no card is handed to two
/// takers. Built per shard count (a handful of distinct statements, each prepared once).
fn take_due_sql(shards: usize) -> String {
    let (key, matched) = dialect::TAKE_KEY;
    let picks: Vec<String> = (0..shards)
        .map(|k| {
            format!(
                "SELECT k FROM (SELECT {key} AS k FROM poll_schedule WHERE task_type = $2 \
                 AND shard = ${p} AND next_poll_at <= $3 ORDER BY next_poll_at LIMIT $4{lock}) AS s{k}",
                p = 5 + k,
                lock = dialect::lock_row_skip_locked!(),
            )
        })
        .collect();
    format!(
        "UPDATE poll_schedule SET next_poll_at = $1, last_polled_at = $3 WHERE {matched} IN ({}) \
         RETURNING iccid, shard, {} AS scope",
        picks.join(" UNION ALL "),
        dialect::card_scope_code!("poll_schedule.iccid"),
    )
}

/// Takes the due cards of `shards` of one task type in one statement ([`take_due_sql`]),
/// grouped back into one batch per shard, in `shards`' order.
pub(crate) async fn take_due(
    tx: &mut Conn,
    task_type: &str,
    interval: Duration,
    shards: &[u32],
    per_shard: i64,
    now: Timestamp,
) -> StoreResult<Vec<ShardBatch>> {
    let mut out: Vec<ShardBatch> = shards
        .iter()
        .map(|&shard| ShardBatch {
            shard,
            cards: Vec::new(),
        })
        .collect();
    if shards.is_empty() {
        return Ok(out);
    }
    let sql = take_due_sql(shards.len());
    let mut q = sqlx::query_as::<_, (String, i64, Option<i64>)>(sqlx::AssertSqlSafe(sql))
        .bind(t(now.plus(interval)))
        .bind(task_type)
        .bind(t(now))
        .bind(per_shard);
    for &shard in shards {
        q = q.bind(i64::from(shard));
    }
    for (iccid, shard, scope) in q.fetch_all(&mut *tx).await? {
        if let Some(batch) = out.iter_mut().find(|b| i64::from(b.shard) == shard) {
            batch.cards.push((iccid, CardScope::from_code(scope)));
        }
    }
    Ok(out)
}

/// Writes a batch of ordinary poll outcomes (D-poll-schedule-rows): every interaction log in multi-row
/// statements ([`bulk::chunk_sizes`]). An ordinary poll's schedule row needs no write here: the
/// take that handed it out already moved `next_poll_at` and stamped `last_polled_at`. A manual
/// trigger's outcome (rare) is written row by row: it moves `next_poll_at` and ends its trigger.
pub(crate) async fn record(tx: &mut Conn, records: &[PollRecord]) -> StoreResult<()> {
    // Sorted by (ICCID, task type): two instances recording batches that share a row (a manual
    // trigger polled beside an ordinary take) update them in the same order (D-poll-postgres-concurrent-writes).
    let mut records: Vec<&PollRecord> = records.iter().collect();
    records.sort_by(|a, b| (&a.iccid, &a.task_type).cmp(&(&b.iccid, &b.task_type)));
    let logs: Vec<(&PollRecord, &NewLog)> = records
        .iter()
        .flat_map(|r| r.logs.iter().map(move |l| (*r, l)))
        .collect();
    let mut rest: &[_] = if dialect::insert_logs_as_arrays(tx, &logs).await? {
        &[]
    } else {
        &logs[..]
    };
    for size in bulk::chunk_sizes(rest.len()) {
        let (chunk, tail) = rest.split_at(size);
        rest = tail;
        let sql = bulk::values_sql(
            "INSERT INTO integration_logs (iccid, task_type, operation, request_summary, \
               response_summary, latency_ms, outcome, at)",
            size,
            8,
            "",
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (r, log) in chunk {
            q = q
                .bind(&r.iccid)
                .bind(&r.task_type)
                .bind(&log.operation)
                .bind(&log.request_summary)
                .bind(&log.response_summary)
                .bind(log.latency_ms)
                .bind(&log.outcome)
                .bind(t(r.at));
        }
        q.execute(&mut *tx).await?;
    }
    for r in records {
        let Some(id) = r.manual_trigger_id else {
            continue;
        };
        // A manual trigger polled out of turn: the next ordinary poll is one interval later.
        sqlx::query(concat!(
            "UPDATE poll_schedule SET last_polled_at = $1, next_poll_at = ",
            dialect::greatest!(),
            "(next_poll_at, $2) WHERE iccid = $3 AND task_type = $4"
        ))
        .bind(t(r.at))
        .bind(t(r.next_poll_at))
        .bind(&r.iccid)
        .bind(&r.task_type)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE manual_triggers SET status = 'executed', executed_at = $1, result = $2 \
             WHERE id = $3 AND status = 'queued'",
        )
        .bind(t(r.at))
        .bind(&r.result)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    }
    Ok(())
}

pub(crate) async fn card_package_state(
    pool: &Pool,
    iccid: &str,
    now: Timestamp,
) -> StoreResult<Option<PackageState>> {
    // The asset's usages, whichever asset it is: `a` is (asset_type, asset_id) of the card's
    // actively bound device, else of the card.
    let row = sqlx::query(concat!(
        "WITH a AS (SELECT CASE WHEN b.device_no IS NULL THEN 'card' ELSE 'device' END AS asset_type, \
           COALESCE(b.device_no, c.iccid) AS asset_id FROM cards c \
           LEFT JOIN bindings b ON b.iccid = c.iccid AND ",
        dialect::active_binding!(),
        " WHERE c.iccid = $1) \
         SELECT a.asset_type, a.asset_id, \
           EXISTS (SELECT 1 FROM package_usages u WHERE u.asset_type = a.asset_type AND u.asset_id = a.asset_id \
             AND u.status = 'active' AND u.ends_at <= $2) AS lapsed_usage, \
           EXISTS (SELECT 1 FROM package_usages u WHERE u.asset_type = a.asset_type AND u.asset_id = a.asset_id \
             AND u.kind = 'main' AND u.status = 'active' AND (u.ends_at IS NULL OR u.ends_at > $2)) AS valid_main, \
           EXISTS (SELECT 1 FROM package_usages u WHERE u.asset_type = a.asset_type AND u.asset_id = a.asset_id \
             AND u.status = 'pending') AS pending_usage \
         FROM a"
    ))
    .bind(iccid)
    .bind(t(now))
    .fetch_optional(pool)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let asset_type: String = row.try_get("asset_type")?;
    Ok(Some(PackageState {
        asset: AssetRef {
            asset_type: AssetType::parse(&asset_type).unwrap_or(AssetType::Card),
            asset_id: row.try_get("asset_id")?,
        },
        lapsed_usage: row.try_get("lapsed_usage")?,
        valid_main: row.try_get("valid_main")?,
        pending_usage: row.try_get("pending_usage")?,
    }))
}

fn day_start(now: Timestamp) -> Timestamp {
    let ms = now.as_millis();
    Timestamp::from_millis(ms - ms.rem_euclid(86_400_000))
}

async fn insert_trigger(
    tx: &mut Conn,
    req: &ManualTriggerRequest,
    task_type: &str,
    status: &str,
    now: Timestamp,
) -> StoreResult<i64> {
    Ok(sqlx::query_scalar(
        "INSERT INTO manual_triggers (operator, iccid, task_type, requested_at, status) \
         VALUES ($1, $2, $3, $4, $5) RETURNING id",
    )
    .bind(&req.operator)
    .bind(&req.iccid)
    .bind(task_type)
    .bind(t(now))
    .bind(status)
    .fetch_one(&mut *tx)
    .await?)
}

pub(crate) async fn manual_trigger_request(
    tx: &mut Conn,
    scope: &Scope,
    req: &ManualTriggerRequest,
    now: Timestamp,
) -> StoreResult<ManualTriggerOutcome> {
    // The card's row, then the operator's quota lock, both held to commit (PostgreSQL, D-poll-postgres-concurrent-writes):
    // the 24 h duplicate check and the daily count below stay true until this request's rows
    // are in, so concurrent requests neither both pass the dedupe nor overshoot the quota.
    let shop: Option<String> = sqlx::query_scalar(concat!(
        "SELECT shop_id FROM cards WHERE iccid = $1",
        dialect::lock_row!()
    ))
    .bind(&req.iccid)
    .fetch_optional(&mut *tx)
    .await?;
    let shop = shop.ok_or(StoreError::NotFound)?;
    if !shop_in_scope(tx, scope, &shop).await? {
        return Err(StoreError::NotFound);
    }
    if let Some(lock) = dialect::OPERATOR_QUOTA_LOCK {
        sqlx::query(lock).bind(&req.operator).execute(&mut *tx).await?;
    }
    let mut dup = Vec::new();
    for tt in &req.task_types {
        let seen: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM manual_triggers WHERE iccid = $1 AND task_type = $2 \
             AND requested_at > $3 AND status IN ('queued', 'executed'))",
        )
        .bind(&req.iccid)
        .bind(tt)
        .bind(t(now.minus(MANUAL_DEDUPE)))
        .fetch_one(&mut *tx)
        .await?;
        if seen {
            dup.push(tt.clone());
        }
    }
    let refuse = if !dup.is_empty() {
        Some((
            "refused_duplicate",
            ManualTriggerOutcome::Duplicate { task_types: dup },
        ))
    } else {
        let used: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM manual_triggers WHERE operator = $1 AND requested_at >= $2 \
             AND status IN ('queued', 'executed')",
        )
        .bind(&req.operator)
        .bind(t(day_start(now)))
        .fetch_one(&mut *tx)
        .await?;
        let used = used as u32;
        (used + req.task_types.len() as u32 > req.daily_quota).then_some((
            "refused_quota",
            ManualTriggerOutcome::QuotaExceeded {
                used,
                quota: req.daily_quota,
            },
        ))
    };
    if let Some((status, outcome)) = refuse {
        for tt in &req.task_types {
            insert_trigger(tx, req, tt, status, now).await?;
        }
        return Ok(outcome);
    }
    let mut triggers = Vec::with_capacity(req.task_types.len());
    for tt in &req.task_types {
        let id = insert_trigger(tx, req, tt, "queued", now).await?;
        triggers.push(QueuedTrigger {
            id,
            iccid: req.iccid.clone(),
            task_type: tt.clone(),
        });
    }
    Ok(ManualTriggerOutcome::Queued { triggers })
}

pub(crate) async fn manual_trigger_queued(
    pool: &Pool,
    task_type: &str,
    before: Timestamp,
    limit: i64,
) -> StoreResult<Vec<QueuedTrigger>> {
    let rows = sqlx::query(
        "SELECT id, iccid, task_type FROM manual_triggers WHERE task_type = $1 AND status = 'queued' \
         AND requested_at <= $2 ORDER BY id LIMIT $3",
    )
    .bind(task_type)
    .bind(t(before))
    .bind(limit)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(QueuedTrigger {
                id: r.try_get("id")?,
                iccid: r.try_get("iccid")?,
                task_type: r.try_get("task_type")?,
            })
        })
        .collect()
}

#[async_trait]
impl ScheduleStore for SqlStore {
    async fn schedule_sync(
        &self,
        task_types: &crate::domain::TaskTypes,
        shards: u32,
        now: Timestamp,
    ) -> StoreResult<u64> {
        sync(&self.pool, &self.writer, task_types, shards, now).await
    }

    async fn schedule_config_read(&self) -> StoreResult<Option<crate::store::ScheduleConfig>> {
        stored_config(&self.pool).await
    }

    async fn schedule_take_due(
        &self,
        task_type: &str,
        interval: Duration,
        shards: &[u32],
        per_shard: i64,
        now: Timestamp,
    ) -> StoreResult<Vec<ShardBatch>> {
        self.write(
            (task_type.to_owned(), interval, shards.to_vec(), per_shard, now),
            |c, (task_type, interval, shards, per_shard, now)| {
                take_due(c, task_type, *interval, shards, *per_shard, *now).boxed()
            },
        )
        .await
    }

    async fn poll_record(&self, records: &[PollRecord]) -> StoreResult<()> {
        if records.is_empty() {
            return Ok(());
        }
        self.write(records.to_vec(), |c, records| {
            record(c, records).boxed()
        })
        .await
    }

    async fn manual_trigger_request(
        &self,
        scope: &Scope,
        req: &ManualTriggerRequest,
        now: Timestamp,
    ) -> StoreResult<ManualTriggerOutcome> {
        self.write((scope.clone(), req.clone(), now), |c, (scope, req, now)| {
            manual_trigger_request(c, scope, req, *now).boxed()
        })
        .await
    }

    async fn manual_trigger_queued(
        &self,
        task_type: &str,
        before: Timestamp,
        limit: i64,
    ) -> StoreResult<Vec<QueuedTrigger>> {
        manual_trigger_queued(&self.pool, task_type, before, limit).await
    }
}
