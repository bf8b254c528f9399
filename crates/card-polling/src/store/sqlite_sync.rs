//! The hot transitions (`store::hot`: claim, manual enqueue-or-merge) on SQLite, run
//! synchronously on the writer's own thread over sqlx's locked connection handle with rusqlite
//! (`sqlite_writer::Writer::write_sync`, D-writer-sync-transitions): a statement costs about a microsecond here,
//! against a round trip to sqlx's connection thread (10–50 µs on these VMs) through sqlx. The
//! statements are `store::hot::sql`'s, the decisions `store::hot`'s; this file only binds and
//! reads.

use std::time::Duration;

use futures::FutureExt;
use rusqlite::types::ToSql;
use rusqlite::{CachedStatement, Connection};

use rakuten_types::Timestamp;

use crate::domain::Scope;
use crate::domain::asset::{AssetRef, AssetType};
use crate::priority::item_status::ItemStatus;
use crate::priority::{MAX_ATTEMPTS, TriggerType};
use crate::store::common::{
    ITEM_OPTIONAL_TIMESTAMPS, ITEM_TIMESTAMPS, ITEM_TRIGGER_COLUMNS, corrupt, t, undecodable_reason,
};
use crate::store::hot::{self, CardTarget, Fact, SystemFact};
use crate::store::{ClaimedItem, Demand, EnqueuedItem, StoreError, StoreResult};

/// `store::hot::claim` on the writer's thread; arguments as `SqlStore::item_claim` passes them.
pub(crate) fn claim(
    db: &Connection,
    (instance, id, token, now, lease, expired_before): &(
        std::sync::Arc<str>,
        i64,
        String,
        Timestamp,
        Duration,
        Option<Timestamp>,
    ),
) -> StoreResult<(Option<ClaimedItem>, Option<String>)> {
    finished(
        hot::claim(
            &mut Rusqlite(db),
            instance,
            *id,
            token,
            *now,
            *lease,
            *expired_before,
        )
        .now_or_never(),
    )
}

/// `store::hot::manual` on the writer's thread.
pub(crate) fn manual(
    db: &Connection,
    (scope, asset, demand, now): &(Scope, AssetRef, Demand, Timestamp),
) -> StoreResult<Vec<EnqueuedItem>> {
    finished(hot::manual(&mut Rusqlite(db), scope, asset, demand, *now).now_or_never())
}

/// The result of a `store::hot` transition driven once: with [`Rusqlite`]'s statements it never
/// waits, so it has always finished.
fn finished<T>(polled: Option<StoreResult<T>>) -> StoreResult<T> {
    polled.unwrap_or_else(|| {
        Err(StoreError::from(sqlx::Error::Protocol(
            "a synchronous transition waited".into(),
        )))
    })
}

/// A rusqlite error as the store's (classified as sqlx's would be: busy, full disk, …).
fn db_error(e: rusqlite::Error) -> StoreError {
    StoreError::from(sqlite_writer::sqlx_error(e))
}

/// The names of the first parameters: no `format!` per bound value (a few per cent of the
/// writer's time per merge, D-writer-savepoints).
const PARAMETER_NAMES: [&str; 16] = [
    "$1", "$2", "$3", "$4", "$5", "$6", "$7", "$8", "$9", "$10", "$11", "$12", "$13", "$14", "$15",
    "$16",
];

/// `sql` prepared (from the connection's statement cache) with `args` bound to `$1`, `$2`, …
/// SQLite numbers named parameters in order of first appearance, so each is bound by its name.
fn prepared<'c>(
    db: &'c Connection,
    sql: &str,
    args: &[&dyn ToSql],
) -> StoreResult<CachedStatement<'c>> {
    let mut st = db.prepare_cached(sql).map_err(db_error)?;
    if args.len() > PARAMETER_NAMES.len() {
        return Err(StoreError::from(sqlx::Error::Protocol(format!(
            "a statement with {} parameters (at most {})",
            args.len(),
            PARAMETER_NAMES.len()
        ))));
    }
    for (value, name) in args.iter().zip(PARAMETER_NAMES) {
        let index = st.parameter_index(name).map_err(db_error)?.ok_or_else(|| {
            StoreError::from(sqlx::Error::Protocol(format!(
                "statement has no parameter {name}"
            )))
        })?;
        st.raw_bind_parameter(index, value).map_err(db_error)?;
    }
    Ok(st)
}

/// Runs a statement; rows changed.
fn execute(db: &Connection, sql: &str, args: &[&dyn ToSql]) -> StoreResult<u64> {
    let mut st = prepared(db, sql, args)?;
    Ok(st.raw_execute().map_err(db_error)? as u64)
}

/// The first row of a statement, read by `read`, if any.
fn first<T>(
    db: &Connection,
    sql: &str,
    args: &[&dyn ToSql],
    read: impl FnOnce(&rusqlite::Row<'_>) -> StoreResult<T>,
) -> StoreResult<Option<T>> {
    let mut st = prepared(db, sql, args)?;
    let mut rows = st.raw_query();
    match rows.next().map_err(db_error)? {
        Some(row) => read(row).map(Some),
        None => Ok(None),
    }
}

/// Every row of a statement, each read by `read`.
fn all<T>(
    db: &Connection,
    sql: &str,
    args: &[&dyn ToSql],
    mut read: impl FnMut(&rusqlite::Row<'_>) -> StoreResult<T>,
) -> StoreResult<Vec<T>> {
    let mut st = prepared(db, sql, args)?;
    let mut rows = st.raw_query();
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(db_error)? {
        out.push(read(row)?);
    }
    Ok(out)
}

fn col<T: rusqlite::types::FromSql>(row: &rusqlite::Row<'_>, name: &str) -> StoreResult<T> {
    row.get(name).map_err(db_error)
}

/// `common::undecodable_item` for a rusqlite row: why the item row does not decode, or `None`.
fn undecodable_item(row: &rusqlite::Row<'_>) -> Option<String> {
    let text = |c: &str| -> StoreResult<Option<String>> {
        row.get::<_, Option<String>>(c).map_err(|_| corrupt(c))
    };
    let required = |c: &str| -> StoreResult<String> { text(c)?.ok_or_else(|| corrupt(c)) };
    let check = || -> StoreResult<()> {
        ItemStatus::parse(&required("status")?).ok_or_else(|| corrupt("status"))?;
        for c in ITEM_TRIGGER_COLUMNS {
            TriggerType::parse(&required(c)?).ok_or_else(|| corrupt(c))?;
        }
        for c in ITEM_TIMESTAMPS {
            Timestamp::parse(&required(c)?).map_err(|_| corrupt(c))?;
        }
        for c in ITEM_OPTIONAL_TIMESTAMPS {
            if let Some(s) = text(c)? {
                Timestamp::parse(&s).map_err(|_| corrupt(c))?;
            }
        }
        Ok(())
    };
    check().err().map(|e| undecodable_reason(&e))
}

/// The statements of `store::hot` on the locked write connection.
struct Rusqlite<'c>(&'c Connection);

impl hot::ClaimStatements for Rusqlite<'_> {
    async fn before_claim(&mut self, id: i64) -> StoreResult<Option<hot::BeforeClaim>> {
        first(self.0, hot::sql::claim_read!(), &[&id], |r| {
            Ok(hot::BeforeClaim {
                status: col(r, "status")?,
                claim_token: col(r, "claim_token")?,
                enqueued_at: col(r, "enqueued_at")?,
            })
        })
    }

    async fn expire_at_claim(&mut self, id: i64, now: &str, cutoff: &str) -> StoreResult<bool> {
        let expired = first(
            self.0,
            hot::sql::EXPIRE_AT_CLAIM,
            &[&now, &id, &cutoff],
            |_| Ok(()),
        )?;
        Ok(expired.is_some())
    }

    async fn claim_row(
        &mut self,
        id: i64,
        token: &str,
        now: &str,
        lease_end: &str,
    ) -> StoreResult<Option<hot::ClaimedRow>> {
        first(
            self.0,
            hot::sql::CLAIM,
            &[&token, &now, &lease_end, &id],
            |r| {
                if let Some(reason) = undecodable_item(r) {
                    return Ok(hot::ClaimedRow::Undecodable(reason));
                }
                Ok(hot::ClaimedRow::Row {
                    iccid: col(r, "iccid")?,
                    task_type: col(r, "task_type")?,
                    attempts: col(r, "attempts")?,
                    max_attempts: col(r, "max_attempts")?,
                })
            },
        )
    }

    async fn set_aside(
        &mut self,
        id: i64,
        now: &str,
        result: &str,
        reason: &str,
    ) -> StoreResult<()> {
        execute(self.0, hot::sql::SET_ASIDE, &[&now, &result, &reason, &id])?;
        Ok(())
    }

    async fn audit_system(&mut self, f: SystemFact<'_>) -> StoreResult<()> {
        let at = t(f.now);
        let fingerprint = f.token.map(crate::instance::claim_fingerprint);
        execute(
            self.0,
            hot::sql::AUDIT_SYSTEM,
            &[
                &f.item_id,
                &f.kind,
                &f.reason,
                &f.result,
                &at,
                &f.instance,
                &fingerprint,
            ],
        )?;
        Ok(())
    }
}

impl hot::EnqueueStatements for Rusqlite<'_> {
    async fn snapshot(&mut self, asset: &AssetRef) -> StoreResult<Vec<CardTarget>> {
        let sql = match asset.asset_type {
            AssetType::Card => {
                hot::sql::snapshot_card!(crate::store::dialect::sqlite::active_binding!())
            }
            AssetType::Device => {
                hot::sql::snapshot_device!(crate::store::dialect::sqlite::active_binding!())
            }
        };
        all(self.0, sql, &[&asset.asset_id], |r| {
            Ok(CardTarget {
                iccid: col(r, "iccid")?,
                shop_id: col(r, "shop_id")?,
                device_no: col(r, "device_no")?,
                asset: asset.clone(),
            })
        })
    }

    async fn device_shop(&mut self, device_no: &str) -> StoreResult<Option<String>> {
        first(self.0, hot::sql::DEVICE_SHOP, &[&device_no], |r| {
            col(r, "shop_id")
        })
    }

    async fn shop_in_tree(&mut self, root: &str, shop_id: &str) -> StoreResult<bool> {
        Ok(
            first(self.0, hot::sql::SHOP_IN_TREE, &[&root, &shop_id], |_| {
                Ok(())
            })?
            .is_some(),
        )
    }

    async fn seen(
        &mut self,
        event_id: &str,
        iccid: &str,
        task_type: &str,
    ) -> StoreResult<Option<i64>> {
        first(
            self.0,
            hot::sql::SEEN,
            &[&event_id, &iccid, &task_type],
            |r| col(r, "item_id"),
        )
    }

    async fn active(&mut self, iccid: &str, task_type: &str) -> StoreResult<Option<i64>> {
        first(self.0, hot::sql::ACTIVE, &[&iccid, &task_type], |r| {
            col(r, "id")
        })
    }

    async fn upsert(&mut self, u: hot::Upsert<'_>) -> StoreResult<(i64, i64)> {
        let row = first(
            self.0,
            hot::sql::UPSERT,
            &[
                &u.target.iccid,
                &u.task_type,
                &u.target.asset.asset_type.as_str(),
                &u.target.asset.asset_id,
                &u.target.device_no,
                &u.target.shop_id,
                &ItemStatus::Pending.as_str(),
                &u.trigger_type,
                &u.now,
                &MAX_ATTEMPTS,
                &u.operator,
                &u.reason,
                &u.retriggered_from,
                &u.source,
            ],
            |r| Ok((col(r, "id")?, col(r, "trigger_count")?)),
        )?;
        row.ok_or_else(|| StoreError::from(sqlx::Error::RowNotFound))
    }

    async fn add_source(&mut self, item_id: i64, source: &str) -> StoreResult<()> {
        execute(self.0, hot::sql::ADD_SOURCE, &[&item_id, &source])?;
        Ok(())
    }

    async fn remember(
        &mut self,
        demand: &Demand,
        iccid: &str,
        task_type: &str,
        item_id: i64,
        now: &str,
        previous_item: Option<i64>,
    ) -> StoreResult<u64> {
        execute(
            self.0,
            hot::sql::REMEMBER,
            &[
                &demand.event_id,
                &iccid,
                &task_type,
                &item_id,
                &now,
                &previous_item,
            ],
        )
    }

    async fn audit(&mut self, f: Fact<'_>) -> StoreResult<()> {
        let at = t(f.now);
        execute(
            self.0,
            hot::sql::AUDIT,
            &[
                &f.item_id,
                &f.kind,
                &f.trigger_type,
                &f.source,
                &f.operator,
                &f.reason,
                &f.result,
                &at,
            ],
        )?;
        Ok(())
    }
}
