//! Multi-row statements, because a statement's round trip to the database, not the row, is what
//! bulk writes cost (on SQLite each statement is a hop to sqlx's connection thread and back):
//! - bulk card import (D-import-in-parts): one part of a large import's cards written with
//!   multi-row `INSERT … VALUES (…), (…)` statements, [`ROWS`] cards per statement, then their
//!   ordinary polling schedule rows. Same rows, checks and errors as the row-by-row import in
//!   `import.rs` (a duplicate card is a conflict, an unknown shop invalid);
//! - a batch of ordinary poll records' interaction logs (D-poll-schedule-rows) and an import's schedule rows
//!   (D-import-in-parts), in statements of [`chunk_sizes`] rows.

use rakuten_types::Timestamp;

use std::time::Duration;

use super::{Conn, map_constraint, t};
use crate::scheduler::shard_queue::{first_poll_at, shard_of};
use crate::domain::asset::CardRow;
use crate::store::StoreResult;

/// Cards per statement: 4 parameters each, 800 in all, far below SQLite's 32,766 and
/// PostgreSQL's 65,535 parameters per statement.
pub(crate) const ROWS: usize = 200;

/// `INSERT INTO <head> VALUES ($1, …, $width), …` for `rows` rows of `width` parameters.
pub(crate) fn values_sql(head: &str, rows: usize, width: usize, tail: &str) -> String {
    let mut sql = String::with_capacity(head.len() + tail.len() + rows * width * 6);
    sql.push_str(head);
    sql.push_str(" VALUES ");
    for r in 0..rows {
        if r > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for c in 0..width {
            if c > 0 {
                sql.push_str(", ");
            }
            sql.push('$');
            sql.push_str(&(r * width + c + 1).to_string());
        }
        sql.push(')');
    }
    sql.push_str(tail);
    sql
}

/// Inserts `cards` and, when the schedule is configured (`schedule`: shard count and task types
/// with their intervals, as `schedule::schedule_config` reads it), their schedule rows (first
/// poll spread over each interval from `now`). Returns the cards inserted.
pub(crate) async fn cards(
    conn: &mut Conn,
    cards: &[CardRow],
    schedule: Option<&(u32, Vec<(String, u64)>)>,
    now: Timestamp,
) -> StoreResult<u64> {
    for chunk in cards.chunks(ROWS) {
        let sql = values_sql(
            "INSERT INTO cards (iccid, shop_id, polling_enabled, stop_locked)",
            chunk.len(),
            4,
            "",
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for c in chunk {
            q = q
                .bind(c.iccid.as_str())
                .bind(c.shop_id.as_str())
                .bind(c.polling_enabled)
                .bind(c.stop_locked);
        }
        q.execute(&mut *conn)
            .await
            .map_err(|e| map_constraint(e, "card"))?;
        if let Some(cfg) = schedule {
            schedule_rows(conn, cfg, chunk, now).await?;
        }
    }
    Ok(cards.len() as u64)
}

/// The schedule rows of `cards` (every configured task type), as `schedule_insert_card` writes
/// them one card at a time, in multi-row statements of [`chunk_sizes`] rows (D-import-in-parts).
async fn schedule_rows(
    conn: &mut Conn,
    cfg: &(u32, Vec<(String, u64)>),
    cards: &[CardRow],
    now: Timestamp,
) -> StoreResult<()> {
    let rows: Vec<(&str, &str, i64, String)> = cards
        .iter()
        .flat_map(|c| {
            let shard = i64::from(shard_of(&c.iccid, cfg.0));
            cfg.1.iter().map(move |(tt, secs)| {
                let first = first_poll_at(&c.iccid, Duration::from_secs(*secs), now);
                (c.iccid.as_str(), tt.as_str(), shard, t(first))
            })
        })
        .collect();
    let mut rest = &rows[..];
    for size in chunk_sizes(rows.len()) {
        let (chunk, tail) = rest.split_at(size);
        rest = tail;
        let sql = values_sql(
            "INSERT INTO poll_schedule (iccid, task_type, shard, next_poll_at)",
            size,
            4,
            " ON CONFLICT (iccid, task_type) DO NOTHING",
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (iccid, tt, shard, first) in chunk {
            q = q.bind(*iccid).bind(*tt).bind(*shard).bind(first.as_str());
        }
        q.execute(&mut *conn).await?;
    }
    Ok(())
}

/// Splits `n` rows into statement sizes from a fixed set (256, 64, 16, 4, 1), largest first: few
/// statements per batch, and few distinct statement texts for each connection's statement cache
/// (a size per remainder would churn it).
pub(crate) fn chunk_sizes(mut n: usize) -> Vec<usize> {
    let mut out = Vec::new();
    for size in [256, 64, 16, 4, 1] {
        while n >= size {
            out.push(size);
            n -= size;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn values_sql_numbers_every_parameter_once_row_by_row() {
        assert_eq!(
            super::values_sql("INSERT INTO x (a, b)", 2, 2, " ON CONFLICT DO NOTHING"),
            "INSERT INTO x (a, b) VALUES ($1, $2), ($3, $4) ON CONFLICT DO NOTHING"
        );
    }

    #[test]
    fn chunk_sizes_cover_every_row_with_few_statements_of_few_shapes() {
        assert_eq!(super::chunk_sizes(0), Vec::<usize>::new());
        assert_eq!(super::chunk_sizes(1), [1]);
        assert_eq!(super::chunk_sizes(1_000), [256, 256, 256, 64, 64, 64, 16, 16, 4, 4]);
        for n in 0..2_000 {
            let sizes = super::chunk_sizes(n);
            assert_eq!(sizes.iter().sum::<usize>(), n);
            assert!(sizes.len() <= n / 256 + 12, "{n}: {sizes:?}");
        }
    }
}
