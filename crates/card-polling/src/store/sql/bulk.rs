//! Bulk card import (issue #14 item 1, D-gc-2): one part of a large import's cards written with
//! multi-row `INSERT … VALUES (…), (…)` statements, [`ROWS`] cards per statement, then their
//! ordinary polling schedule rows. Same rows, checks and errors as the row-by-row import in
//! `domain.rs` (a duplicate card is a conflict, an unknown shop invalid); one statement per
//! [`ROWS`] cards instead of one per row, because a statement's round trip to the database, not
//! the row, is what 1,000,000 cards cost.

use rakuten_types::Timestamp;

use super::schedule::schedule_insert_card;
use super::{Conn, map_constraint};
use crate::domain::asset::CardRow;
use crate::store::StoreResult;

/// Cards per statement: 4 parameters each, 800 in all, far below SQLite's 32,766 and
/// PostgreSQL's 65,535 parameters per statement.
pub(crate) const ROWS: usize = 200;

/// `INSERT INTO <head> VALUES ($1, …, $width), …` for `rows` rows of `width` parameters.
fn values_sql(head: &str, rows: usize, width: usize, tail: &str) -> String {
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
        // Schedule rows one statement each, as the row-by-row import: statements of 600 rows
        // measured no faster for them (1,000,000 cards: 124–140 s either way; D-gc-2).
        if let Some(cfg) = schedule {
            for c in chunk {
                schedule_insert_card(conn, cfg, &c.iccid, now).await?;
            }
        }
    }
    Ok(cards.len() as u64)
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
}
