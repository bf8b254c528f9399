//! The one SQL implementation of [`OrderStore`](super::OrderStore) and
//! [`QueryStore`](super::QueryStore), written once for both engines (D-one-sql-store-per-engine):
//!
//! - [`tasks`](sqlite::tasks): the order task transitions (insert, lease, renew, report, reclaim,
//!   sweep); [`queries`](sqlite::queries): the account-query channel's transitions and reads;
//!   [`reads`](sqlite::reads): order task reads (`task_get`, listings, `/health`); `store.rs`: the
//!   two trait impls, which run each transition through the engine's `write` and send its wake-ups.
//! - [`operator`](sqlite::operator): alerts, the webhook outbox, operator actions and workers,
//!   with their [`OperatorStore`](super::OperatorStore) impl.
//! - [`grants`](sqlite::grants): the lease history (`lease_grants`, D-lease-grant-history), written in the
//!   transactions of [`tasks`](sqlite::tasks) and [`operator`](sqlite::operator).
//! - [`clocks`](sqlite::clocks): each instance's clock signal (`clock_signals`).
//! - [`observe`](sqlite::observe): the `/metrics` counts and the `/readyz` ping.
//! - [`rows`]: the row types and their decoders, [`query_row`]: the account-query row; both
//!   generic over the sqlx row type, so one set serves both engines.
//! - the column lists and filter/pagination builders below.
//!
//! How "once" works: the files `tasks.rs`, `queries.rs`, `reads.rs` and `store.rs` are plain,
//! concrete sqlx code over the aliases `Db`, `Conn`, `Pool` and `Store`, and are compiled twice, as
//! [`sqlite`] (`Db = sqlx::Sqlite`) and [`postgres`] (`Db = sqlx::Postgres`), by the small macro
//! [`one_implementation!`]. Generic functions over `sqlx::Database` were tried on paper and read
//! worse: every function needs a higher-ranked `Executor` bound plus an `Encode + Decode + Type`
//! bound per Rust type it binds or reads, and Rust does not imply such bounds from a helper trait,
//! so they would be repeated on every function and bury the SQL. The SQL itself uses numbered
//! `$n` placeholders, which sqlx binds by number on SQLite too (proved by
//! `tests/api/migrations.rs::sqlite_binds_numbered_parameters_by_number`), and portable casts. What the
//! engines really force apart is [`super::dialect::Dialect`].

pub(crate) mod postgres;
pub(crate) mod query_row;
pub(crate) mod rows;
pub(crate) mod sqlite;

/// Compiles the one implementation for the engine whose `Db`, `Conn`, `Pool` and `Store` aliases
/// are in scope (see the module docs). Loading each file once per engine is the point, hence the
/// `duplicate_mod` allowance.
macro_rules! one_implementation {
    () => {
        #[path = "clocks.rs"]
        #[allow(clippy::duplicate_mod)]
        pub(crate) mod clocks;
        #[path = "grants.rs"]
        #[allow(clippy::duplicate_mod)]
        pub(crate) mod grants;
        #[path = "observe.rs"]
        #[allow(clippy::duplicate_mod)]
        pub(crate) mod observe;
        #[path = "operator.rs"]
        #[allow(clippy::duplicate_mod)]
        pub(crate) mod operator;
        #[path = "queries.rs"]
        #[allow(clippy::duplicate_mod)]
        pub(crate) mod queries;
        #[path = "reads.rs"]
        #[allow(clippy::duplicate_mod)]
        pub(crate) mod reads;
        #[path = "store.rs"]
        #[allow(clippy::duplicate_mod)]
        mod store;
        #[path = "tasks.rs"]
        #[allow(clippy::duplicate_mod)]
        pub(crate) mod tasks;
    };
}
pub(crate) use one_implementation;

/// `(CAST($n AS TEXT) IS NULL OR column = $n)`: matches every row when the text parameter `$n` is
/// NULL (the filter is not set), else rows whose `column` equals it. The cast types the parameter
/// for PostgreSQL and is a no-op on SQLite.
pub(crate) fn eq_if_set(column: &str, n: usize) -> String {
    format!("(CAST(${n} AS TEXT) IS NULL OR {column} = ${n})")
}

/// `ORDER BY <created_at>, <insertion order> LIMIT $n OFFSET $n+1`: oldest first, the page
/// parameters bound at `$n` and `$n+1`. `prefix` is the table alias with its dot, or empty.
pub(crate) fn oldest_first_page<D: super::dialect::Dialect>(prefix: &str, n: usize) -> String {
    format!(
        "ORDER BY {prefix}created_at, {prefix}{} LIMIT ${n} OFFSET ${}",
        D::INSERTION_ORDER,
        n + 1
    )
}
