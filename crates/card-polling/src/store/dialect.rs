//! What SQLite and PostgreSQL force apart, side by side: everything else in `store/sql/` is
//! written once. Each engine module defines the same names; `store/sql/` reaches them as
//! `dialect::…`. Items spliced into a statement literal are macros (so the statement stays a
//! `&'static str` for sqlx's `SqlSafeStr`); whole statements and select lists are constants.
//! Each difference says in one line why the engines differ.

/// SQLite.
pub(crate) mod sqlite {
    use futures::future::BoxFuture;
    use sqlx::SqliteConnection;

    use crate::store::{StoreError, StoreResult};

    /// One write of the store: a function of the write connection and its owned arguments `A`
    /// (a plain `fn`, so an engine may run it more than once, e.g. to retry).
    pub(crate) type WriteFn<A, T> =
        for<'c> fn(&'c mut SqliteConnection, &'c A) -> BoxFuture<'c, StoreResult<T>>;

    /// The write path (D-gc-1): SQLite has one writer, so every write of the store goes through
    /// ONE group-commit writer (the `sqlite_writer` crate) that owns the only write connection
    /// and packs what is waiting into one `BEGIN IMMEDIATE` transaction, a SAVEPOINT per write;
    /// each caller is answered after that commit is on disk (WAL, `synchronous=FULL`).
    #[derive(Debug)]
    pub(crate) struct Writer(pub(crate) sqlite_writer::Writer<StoreError>);

    impl Writer {
        /// Runs `op(conn, &args)` in the writer's next batch; answers after its commit.
        pub(crate) async fn write<A, T>(&self, args: A, op: WriteFn<A, T>) -> StoreResult<T>
        where
            A: Send + Sync + 'static,
            T: Send + 'static,
        {
            self.0
                .write(Box::new(move |conn| {
                    Box::pin(async move { op(conn, &args).await })
                }))
                .await
        }

        /// Drains what is queued, commits it and closes the write connection; later writes are
        /// [`StoreError::Closed`].
        pub(crate) async fn shutdown(&self) {
            self.0.shutdown().await;
        }

        /// `(commits, ops)` of the writer so far.
        pub(crate) fn stats(&self) -> (u64, u64) {
            self.0.stats()
        }

        /// Observes each commit (writes in it, its duration).
        pub(crate) fn on_commit(&self, hook: sqlite_writer::CommitHook) {
            self.0.on_commit(hook);
        }
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
    use futures::future::BoxFuture;
    use sqlx::{PgConnection, Pool, Postgres, Transaction};

    use crate::store::StoreResult;

    /// One write of the store: a function of the connection (inside its transaction) and its
    /// owned arguments `A`. A plain `fn` over borrowed arguments, so [`Writer::write`] can run it
    /// again in a fresh transaction (a retry after a serialization failure or deadlock).
    pub(crate) type WriteFn<A, T> =
        for<'c> fn(&'c mut PgConnection, &'c A) -> BoxFuture<'c, StoreResult<T>>;

    /// The write path: concurrent writers are PostgreSQL's job, so each write is its own
    /// transaction on a pooled connection ([`begin_write`]), committed before it answers.
    #[derive(Debug)]
    pub(crate) struct Writer(pub(crate) Pool<Postgres>);

    impl Writer {
        /// Runs `op(conn, &args)` in one write transaction and commits it.
        pub(crate) async fn write<A, T>(&self, args: A, op: WriteFn<A, T>) -> StoreResult<T>
        where
            A: Send + Sync + 'static,
            T: Send + 'static,
        {
            let mut tx = begin_write(&self.0).await?;
            let out = op(&mut tx, &args).await?;
            tx.commit().await?;
            Ok(out)
        }

        /// Nothing to drain: every write finished with its caller. The pool is closed by its
        /// owner.
        pub(crate) async fn shutdown(&self) {}

        /// No group commit: no counters.
        pub(crate) fn stats(&self) -> (u64, u64) {
            (0, 0)
        }

        /// No group commit: nothing to observe.
        pub(crate) fn on_commit(&self, _hook: sqlite_writer::CommitHook) {}
    }

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
