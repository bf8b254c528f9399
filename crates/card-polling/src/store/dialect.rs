//! What SQLite and PostgreSQL force apart, side by side: everything else in `store/sql/` is
//! written once. Each engine module defines the same names; `store/sql/` reaches them as
//! `dialect::…`. Items spliced into a statement literal are macros (so the statement stays a
//! `&'static str` for sqlx's `SqlSafeStr`); whole statements and select lists are constants.
//! Each difference says in one line why the engines differ.

/// SQLite.
pub(crate) mod sqlite {
    use sqlx::{Pool, Sqlite, Transaction};

    use crate::store::StoreResult;

    /// A write transaction. SQLite has one writer: `BEGIN IMMEDIATE` takes the write lock up
    /// front, so a transaction that reads before it writes never fails on a lock upgrade.
    pub(crate) async fn begin_write(
        pool: &Pool<Sqlite>,
    ) -> StoreResult<Transaction<'static, Sqlite>> {
        Ok(pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    /// The item select list for `common::item_view` (table alias `i`). Aggregates: SQLite's
    /// `group_concat(… ORDER BY …)`; its default BINARY collation already sorts bytewise.
    pub(crate) const ITEM_COLUMNS: &str = "i.*, \
        (SELECT group_concat(s.source, char(31) ORDER BY s.source) FROM priority_item_sources s WHERE s.item_id = i.id) AS sources, \
        (SELECT group_concat(c.ancestor_id, char(31) ORDER BY c.depth DESC) FROM shop_closure c WHERE c.descendant_id = i.shop_id) AS chain";

    /// Takes up to `$5` due cards of shard `$3` of task type `$2` (due at `$4`), moving them to
    /// `$1`. One writer holds the database, so there are no row locks to skip; `rowid` is the
    /// cheapest key.
    pub(crate) const SCHEDULE_TAKE_DUE: &str = "UPDATE poll_schedule SET next_poll_at = $1 WHERE rowid IN ( \
           SELECT rowid FROM poll_schedule WHERE task_type = $2 AND shard = $3 AND next_poll_at <= $4 \
           ORDER BY next_poll_at LIMIT $5) \
         RETURNING iccid";

    /// An active binding `b`. `bindings.active` is INTEGER 0/1; the literal `= 1` is what lets the
    /// planner use the partial indexes `… WHERE active = 1`.
    macro_rules! active_binding {
        () => {
            "b.active = 1"
        };
    }
    pub(crate) use active_binding;

    /// Whole milliseconds from one stored timestamp (RFC 3339 text) to another: SQLite has no
    /// timestamp type, `julianday` gives days as REAL.
    macro_rules! millis_between {
        ($from:literal, $to:literal) => {
            concat!(
                "CAST(ROUND((julianday(",
                $to,
                ") - julianday(",
                $from,
                ")) * 86400000) AS INTEGER)"
            )
        };
    }
    pub(crate) use millis_between;

    /// The larger of two values: SQLite's scalar `max` (PostgreSQL's `max` is only an aggregate).
    macro_rules! greatest {
        () => {
            "max"
        };
    }
    pub(crate) use greatest;

    /// The database's clock, epoch milliseconds: none to check against, an embedded database is
    /// only ever used by this process, whose clock is the one clock (issue #12 item 6).
    pub(crate) const SHARED_CLOCK_MILLIS: Option<&str> = None;
}

/// PostgreSQL.
pub(crate) mod postgres {
    use sqlx::{Pool, Postgres, Transaction};

    use crate::store::StoreResult;

    /// The writer lock (D-pg-7): one key per schema, so separate schemas (tests, deployments) do
    /// not contend.
    const WRITER_LOCK: &str =
        "SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.card_polling_writer'))";

    /// A write transaction. PostgreSQL allows concurrent writers, but the enqueue-or-merge, claim
    /// and finish statements rely on SQLite's one writer: a transaction-level advisory lock
    /// serializes writers the same way, also across service instances.
    pub(crate) async fn begin_write(
        pool: &Pool<Postgres>,
    ) -> StoreResult<Transaction<'static, Postgres>> {
        let mut tx = pool.begin().await?;
        sqlx::query(WRITER_LOCK).execute(&mut *tx).await?;
        Ok(tx)
    }

    /// The item select list for `common::item_view` (table alias `i`). Aggregates: `string_agg`;
    /// sources sort with `COLLATE "C"` so the order is bytewise as on SQLite, not the locale's.
    pub(crate) const ITEM_COLUMNS: &str = "i.*, \
        (SELECT string_agg(s.source, chr(31) ORDER BY s.source COLLATE \"C\") FROM priority_item_sources s WHERE s.item_id = i.id) AS sources, \
        (SELECT string_agg(c.ancestor_id, chr(31) ORDER BY c.depth DESC) FROM shop_closure c WHERE c.descendant_id = i.shop_id) AS chain";

    /// Takes up to `$5` due cards of shard `$3` of task type `$2` (due at `$4`), moving them to
    /// `$1`. Several instances may take at once: `FOR UPDATE SKIP LOCKED` hands each row to one
    /// taker without waiting; there is no `rowid`, the key is (task type, iccid).
    pub(crate) const SCHEDULE_TAKE_DUE: &str = "UPDATE poll_schedule SET next_poll_at = $1 WHERE task_type = $2 AND iccid IN ( \
           SELECT iccid FROM poll_schedule WHERE task_type = $2 AND shard = $3 AND next_poll_at <= $4 \
           ORDER BY next_poll_at LIMIT $5 FOR UPDATE SKIP LOCKED) \
         RETURNING iccid";

    /// An active binding `b`: `bindings.active` is BOOLEAN (no `= 1` between boolean and integer).
    macro_rules! active_binding {
        () => {
            "b.active"
        };
    }
    pub(crate) use active_binding;

    /// Whole milliseconds from one stored timestamp (RFC 3339 text) to another: the text is cast
    /// to `timestamptz` and the interval's epoch taken.
    macro_rules! millis_between {
        ($from:literal, $to:literal) => {
            concat!(
                "CAST(ROUND(EXTRACT(EPOCH FROM (CAST(",
                $to,
                " AS timestamptz) - CAST(",
                $from,
                " AS timestamptz))) * 1000) AS BIGINT)"
            )
        };
    }
    pub(crate) use millis_between;

    /// The larger of two values: `GREATEST` (PostgreSQL's `max` is only an aggregate).
    macro_rules! greatest {
        () => {
            "GREATEST"
        };
    }
    pub(crate) use greatest;

    /// The database's clock, epoch milliseconds: instances sharing the database check their own
    /// clock against it (issue #12 item 6). `clock_timestamp()`, not `now()`, which is frozen at
    /// the start of the transaction.
    pub(crate) const SHARED_CLOCK_MILLIS: Option<&str> =
        Some("SELECT CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)");
}
