//! The one SQL implementation of [`OrderStore`](super::OrderStore),
//! [`QueryStore`](super::QueryStore) and [`OperatorStore`](super::OperatorStore), written once for
//! both engines (D-one-sql-store-per-engine), one file per concept:
//!
//! - [`tasks`](sqlite::tasks): the order task transitions, one file per family (`tasks/`: submit,
//!   lease, reclaim, renew and report, sweep); [`reads`](sqlite::reads): order task reads (`task_get`, listings, `/health`);
//!   [`leasable`]: the SQL conditions under which a queued task may be leased, shared by both;
//!   [`holder`]: whether a worker holds a task's current lease, shared by renew and report here
//!   and by SQLite's writer-thread path.
//! - [`queries`](sqlite::queries): the account-query channel's transitions and reads.
//! - [`paging`](sqlite::paging): the offset and keyset pages every list reads.
//! - [`grants`](sqlite::grants): the lease history (`lease_grants`, D-lease-grant-history), written
//!   in the transactions of [`tasks`](sqlite::tasks) and [`actions`](sqlite::actions);
//!   [`reclaim`](sqlite::reclaim): the reclaim's pending grant and its audit row.
//! - [`alerts`](sqlite::alerts): alert records (sync, list, evidence queries), their causes one
//!   function per alert kind in [`alert_causes`](sqlite::alert_causes);
//!   [`outbox`](sqlite::outbox): the webhook outbox; [`actions`](sqlite::actions): audited operator
//!   actions (resolve, cancel, the `operator_actions` rows); [`workers`](sqlite::workers): the
//!   worker list and retirement; [`operator`](sqlite::operator): the
//!   [`OperatorStore`](super::OperatorStore) impl over them.
//! - [`clocks`](sqlite::clocks): each instance's clock signal (`clock_signals`).
//! - [`observe`](sqlite::observe): the `/metrics` counts and the `/readyz` ping.
//! - `store.rs`: the [`OrderStore`](super::OrderStore) and [`QueryStore`](super::QueryStore)
//!   impls, which run each transition through the engine's `write` and send its wake-ups.
//! - [`rows`]: the row types and their decoders, [`query_row`]: the account-query row; both
//!   generic over the sqlx row type, so one set serves both engines.
//! - the column lists and filter/pagination builders below.
//!
//! Imports run one way: the trait impls (`store.rs`, `operator.rs`) use the concept files; the
//! task transitions use the lease history and the reclaim; the operator's files use the
//! lease history, the paging and each other only downwards (alerts → causes and outbox, reclaim
//! and workers → actions → lease history). [`holder`], compiled once, is used by the renew and
//! report here and by SQLite's writer-thread path, and imports neither. No file of one concept
//! imports back.
//!
//! How "once" works: the files in the macro below (`tasks/`, `queries.rs`, `reads.rs`, …) are plain,
//! concrete sqlx code over the aliases `Db`, `Conn`, `Pool` and `Store`, and are compiled twice, as
//! [`sqlite`] (`Db = sqlx::Sqlite`) and [`postgres`] (`Db = sqlx::Postgres`), by the small macro
//! [`one_implementation!`]. Generic functions over `sqlx::Database` were tried on paper and read
//! worse: every function needs a higher-ranked `Executor` bound plus an `Encode + Decode + Type`
//! bound per Rust type it binds or reads, and Rust does not imply such bounds from a helper trait,
//! so they would be repeated on every function and bury the SQL. The SQL itself uses numbered
//! `$n` placeholders, which sqlx binds by number on SQLite too (proved by
//! `tests/api/migrations.rs::sqlite_binds_numbered_parameters_by_number`), and portable casts. What the
//! engines really force apart is [`super::dialect::Dialect`].

pub(crate) mod holder;
pub(crate) mod leasable;
pub(crate) mod postgres;
pub(crate) mod query_row;
pub(crate) mod rows;
pub(crate) mod sqlite;

/// Compiles the one implementation for the engine whose `Db`, `Conn`, `Pool` and `Store` aliases
/// are in scope (see the module docs). Loading each file once per engine is the point, hence the
/// `duplicate_mod` allowance.
macro_rules! one_implementation {
    () => {
        #[path = "actions.rs"]
        #[allow(clippy::duplicate_mod)]
        pub(crate) mod actions;
        #[path = "alert_causes.rs"]
        #[allow(clippy::duplicate_mod)]
        pub(crate) mod alert_causes;
        #[path = "alerts.rs"]
        #[allow(clippy::duplicate_mod)]
        pub(crate) mod alerts;
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
        #[path = "outbox.rs"]
        #[allow(clippy::duplicate_mod)]
        pub(crate) mod outbox;
        #[path = "paging.rs"]
        #[allow(clippy::duplicate_mod)]
        pub(crate) mod paging;
        #[path = "queries.rs"]
        #[allow(clippy::duplicate_mod)]
        pub(crate) mod queries;
        #[path = "reads.rs"]
        #[allow(clippy::duplicate_mod)]
        pub(crate) mod reads;
        #[path = "reclaim.rs"]
        #[allow(clippy::duplicate_mod)]
        pub(crate) mod reclaim;
        #[path = "store.rs"]
        #[allow(clippy::duplicate_mod)]
        mod store;
        #[path = "tasks/mod.rs"]
        #[allow(clippy::duplicate_mod)]
        pub(crate) mod tasks;
        #[path = "worker_offline.rs"]
        #[allow(clippy::duplicate_mod)]
        pub(crate) mod worker_offline;
        #[path = "workers.rs"]
        #[allow(clippy::duplicate_mod)]
        pub(crate) mod workers;
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

/// The ended tasks whose latest reported state says the other verdict, for the alert
/// `task_state_contradicts_outcome` (D-late-report-contradiction-alert): at most 1,000, oldest
/// change first, with the site order number of that latest report. It reads the partial index
/// `idx_tasks_contradicted` (migration 0014), whose predicate its `WHERE` states word for word, so
/// each tick reads the contradicted tasks alone, not every ended task (D-latest-state-on-the-task).
pub(crate) fn contradicted_tasks<D: super::dialect::Dialect>() -> String {
    format!(
        "SELECT t.task_id, t.status, t.lease_owner, t.latest_state AS state, r.site_order_id \
         FROM tasks t{} LEFT JOIN task_reports r \
         ON r.task_id = t.task_id AND r.state = t.latest_state \
         WHERE {CONTRADICTED} ORDER BY t.updated_at LIMIT 1000",
        D::indexed_by("idx_tasks_contradicted")
    )
}

/// The predicate of the partial index `idx_tasks_contradicted` (migration 0014), as a query must
/// state it for SQLite to read that index: an ended task whose latest reported state says the
/// other verdict (the pairs `Outcome::check_fits_state` refuses).
pub(crate) const CONTRADICTED: &str = "((status = 'failed' \
     AND latest_state IN ('paid','shipped','delivered')) \
     OR (status = 'succeeded' AND latest_state IN ('cancelled','created','in_cart')))";

#[cfg(test)]
mod tests {
    use sqlx::Connection;

    /// SQLite reads a partial index only when the query's `WHERE` states the index's predicate
    /// (with `INDEXED BY`, a rewording of either is an error here rather than a read of every
    /// ended task at each alert tick).
    #[tokio::test]
    async fn the_contradiction_query_reads_its_partial_index() {
        let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:")
            .await
            .unwrap();
        crate::store::sqlite::migrator()
            .run(&mut conn)
            .await
            .unwrap();
        let plan: Vec<(i64, i64, i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "EXPLAIN QUERY PLAN {}",
            super::contradicted_tasks::<sqlx::Sqlite>()
        )))
        .fetch_all(&mut conn)
        .await
        .unwrap();
        let steps: Vec<&str> = plan.iter().map(|p| p.3.as_str()).collect();
        assert!(
            steps
                .iter()
                .any(|s| s.contains("USING INDEX idx_tasks_contradicted")),
            "{steps:?}"
        );
        assert!(
            !steps
                .iter()
                .any(|s| *s == "SCAN t" || s.contains("TEMP B-TREE")),
            "{steps:?}"
        );
    }
}
