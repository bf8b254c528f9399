//! Each instance's clock as its sweeper saw it (`clock_signals`): written by
//! every instance's sweeper, read by `/health` and by the elected instance's alert sync as the
//! cause of `clock_skew` and `clock_jump` (so an alert is raised whichever instance's clock is
//! off, not only the leader's).

use rakuten_types::Timestamp;
use rakuten_types::order::InstanceClock;
use sqlx::Row;

use super::Conn;
use crate::store::sql::rows::{decode_ts, ts};
use crate::store::{CLOCK_SIGNALS_LISTED, CLOCK_SIGNAL_RETENTION, ClockSignal, StoreError};

/// Upserts the instance's row (a jump, when there is one, replaces the last one; without one the
/// last jump stays) and drops rows no instance wrote for [`CLOCK_SIGNAL_RETENTION`] (instances
/// long gone: each start-up has a new id).
pub(crate) async fn clock_signal_record(
    conn: &mut Conn,
    s: ClockSignal,
    now: Timestamp,
) -> Result<(), StoreError> {
    // The instance's own clock, as every stamp ("now is the caller's"); readers shift it by
    // `offset_ms` where they compare it with their own clock (`ClockSignal::seen_fresh`).
    let at = now.to_rfc3339();
    let detail: Option<String> = s.jump.map(|d| d.chars().take(500).collect());
    let jump_at = detail.as_ref().map(|_| at.clone());
    sqlx::query(
        "INSERT INTO clock_signals (instance_id, offset_ms, skewed, last_jump_at, \
         last_jump_detail, updated_at) VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (instance_id) DO UPDATE SET offset_ms = excluded.offset_ms, \
         skewed = excluded.skewed, \
         last_jump_at = COALESCE(excluded.last_jump_at, clock_signals.last_jump_at), \
         last_jump_detail = COALESCE(excluded.last_jump_detail, clock_signals.last_jump_detail), \
         updated_at = excluded.updated_at",
    )
    .bind(&s.instance_id)
    .bind(s.offset_ms)
    .bind(i32::from(s.skewed))
    .bind(jump_at)
    .bind(detail)
    .bind(&at)
    .execute(&mut *conn)
    .await?;
    sqlx::query("DELETE FROM clock_signals WHERE updated_at < $1")
        .bind(now.minus(CLOCK_SIGNAL_RETENTION).to_rfc3339())
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// The rows, most recently written first, at most [`CLOCK_SIGNALS_LISTED`].
pub(crate) async fn clock_signals(conn: &mut Conn) -> Result<Vec<InstanceClock>, StoreError> {
    let sql = format!(
        "SELECT instance_id, offset_ms, skewed, last_jump_at, last_jump_detail, updated_at \
         FROM clock_signals ORDER BY updated_at DESC, instance_id LIMIT {CLOCK_SIGNALS_LISTED}"
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|r| {
            Ok(InstanceClock {
                instance_id: r.try_get("instance_id")?,
                offset_ms: r.try_get("offset_ms")?,
                skewed: r.try_get::<i32, _>("skewed")? != 0,
                last_jump_at: decode_ts(r.try_get("last_jump_at")?)?,
                last_jump_detail: r.try_get("last_jump_detail")?,
                updated_at: ts(&r.try_get::<String, _>("updated_at")?)?,
            })
        })
        .collect()
}
