//! The dialect seam: the only places where the one SQL implementation ([`super::sql`]) differs
//! between SQLite and PostgreSQL. Each difference is a constant with a line saying why the engines
//! force it apart; everything else (placeholders `$1`, `CAST(x AS TEXT)`, upserts, `RETURNING`) is
//! written once. The other engine differences live outside the SQL: SQLite's group-commit writer
//! (the [`sqlite_writer`] crate) and PostgreSQL's `LISTEN/NOTIFY` and advisory lock
//! ([`super::postgres`]), behind the same few store methods (`write`, `read_pool`, `notify_*`).
//! Decision D-one-sql-store-per-engine.

/// The SQL fragments that differ per engine.
pub(crate) trait Dialect {
    /// Appended to a read-then-write `SELECT` to lock its rows until the transaction ends.
    /// SQLite: nothing (its one writer holds the whole database from `BEGIN IMMEDIATE`).
    const FOR_UPDATE: &'static str;
    /// Appended to a queue pick: rows another transaction holds are passed over.
    /// SQLite: nothing (there is only one writer, so nothing is ever held by someone else).
    const SKIP_LOCKED: &'static str;
    /// The insertion-order tie-break of "oldest first": SQLite's implicit `rowid`; PostgreSQL has
    /// none, so its tables carry an identity column `seq`.
    const INSERTION_ORDER: &'static str;
    /// Two-argument maximum: SQLite's scalar `MAX(a, b)` is PostgreSQL's `GREATEST(a, b)`.
    const GREATEST: &'static str;
    /// Byte-order collation for an `ORDER BY` on text: SQLite's default already is; PostgreSQL's
    /// default follows the database locale.
    const BYTE_ORDER: &'static str;
    /// Begins a read-only transaction whose reads all see one snapshot. SQLite: any transaction
    /// in WAL mode; PostgreSQL's default READ COMMITTED would see a new snapshot per statement.
    const READ_SNAPSHOT: &'static str;
    /// Whether a statement that may fail with a unique violation needs its own SAVEPOINT:
    /// PostgreSQL aborts the whole transaction on an error, SQLite only the failed statement.
    const SAVEPOINT_AROUND_CONFLICT: bool;
    /// Written after a table in `FROM`: the query reads that table through `index`. SQLite's
    /// planner takes a partial index only when it judges it no worse than the others, which on a
    /// table without statistics it rarely does; with `INDEXED BY` a query the index cannot serve
    /// is an error, not a silent scan. PostgreSQL has no such clause and costs a partial index by
    /// its size.
    fn indexed_by(index: &str) -> String;
}

impl Dialect for sqlx::Sqlite {
    const FOR_UPDATE: &'static str = "";
    const SKIP_LOCKED: &'static str = "";
    const INSERTION_ORDER: &'static str = "rowid";
    const GREATEST: &'static str = "MAX";
    const BYTE_ORDER: &'static str = "";
    const READ_SNAPSHOT: &'static str = "BEGIN";
    const SAVEPOINT_AROUND_CONFLICT: bool = false;
    fn indexed_by(index: &str) -> String {
        format!(" INDEXED BY {index}")
    }
}

impl Dialect for sqlx::Postgres {
    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    const INSERTION_ORDER: &'static str = "seq";
    const GREATEST: &'static str = "GREATEST";
    const BYTE_ORDER: &'static str = " COLLATE \"C\"";
    const READ_SNAPSHOT: &'static str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
    const SAVEPOINT_AROUND_CONFLICT: bool = true;
    fn indexed_by(_index: &str) -> String {
        String::new()
    }
}
