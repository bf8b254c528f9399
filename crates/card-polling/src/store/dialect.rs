//! What SQLite and PostgreSQL force apart, side by side: everything else in `store/sql/` is
//! written once. Each engine module defines the same names; `store/sql/` reaches them as
//! `dialect::…`. Items spliced into a statement literal are macros (so the statement stays a
//! `&'static str` for sqlx's `SqlSafeStr`); whole statements and select lists are constants.
//! Each difference says in one line why the engines differ.

/// A card's polling scope as one small integer, read by a scalar subquery on the card whose ICCID
/// is the column or parameter `$iccid` (`store::CardScope::from_code` decodes it): NULL = the card
/// is gone, 1 = its polling switch is off, 2 = its actively bound device's switch is off,
/// 3 = in scope, 4 = in scope with the stop lock held. One definition for the per-card read and
/// the scheduler's take (which returns each taken card's scope, D-ordinary-scope-read-by-take); each engine's
/// `card_scope_code!` passes its own active-binding test.
macro_rules! card_scope_code_with {
    ([$($active:tt)*], $iccid:literal) => {
        concat!(
            "(SELECT CAST(CASE WHEN NOT c.polling_enabled THEN 1 \
               WHEN d.polling_enabled = false THEN 2 \
               WHEN c.stop_locked THEN 4 ELSE 3 END AS BIGINT) \
             FROM cards c LEFT JOIN bindings b ON b.iccid = c.iccid AND ",
            $($active)*,
            " LEFT JOIN devices d ON d.device_no = b.device_no WHERE c.iccid = ",
            $iccid,
            ")"
        )
    };
}
pub(crate) use card_scope_code_with;

/// SQLite.
pub(crate) mod sqlite {
    use futures::future::BoxFuture;
    use sqlx::SqliteConnection;

    use crate::store::{StoreError, StoreResult};

    /// One write of the store: a function of the write connection and its owned arguments `A`
    /// (a plain `fn`, so an engine may run it more than once, e.g. to retry).
    pub(crate) type WriteFn<A, T> =
        for<'c> fn(&'c mut SqliteConnection, &'c A) -> BoxFuture<'c, StoreResult<T>>;

    /// A hot transition as the SQLite writer runs it (`store::sqlite_sync`): a function of the
    /// write connection (inside the savepoint the writer opened) and its owned arguments.
    pub(crate) type SyncWriteFn<A, T> = fn(&rusqlite::Connection, &A) -> StoreResult<T>;

    /// The write path (D-sqlite-writer-group-commit): SQLite has one writer, so every write of the store goes through
    /// ONE group-commit writer (the `sqlite_writer` crate) that owns the only write connection
    /// and packs what is waiting into one `BEGIN IMMEDIATE` transaction, a SAVEPOINT per write;
    /// each caller is answered after that commit is on disk (the WAL `fdatasync`ed, D-writer-syncer-thread).
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

        /// One of the hot transitions (`store::hot`): runs `on_thread(db, &args)` synchronously
        /// on the writer's own thread (D-writer-sync-transitions); `_through_sqlx` is PostgreSQL's way.
        pub(crate) async fn write_hot<A, T>(
            &self,
            args: A,
            _through_sqlx: WriteFn<A, T>,
            on_thread: SyncWriteFn<A, T>,
        ) -> StoreResult<T>
        where
            A: Send + Sync + 'static,
            T: Send + 'static,
        {
            self.0
                .write_sync(Box::new(move |db| on_thread(db, &args)))
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

        /// Whether the last write batch failed as a whole (a full disk, an I/O error, a
        /// read-only file) and none committed since (`sqlite_writer::Writer::failing`).
        pub(crate) fn failing(&self) -> bool {
            self.0.failing()
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

    /// The take's row key and how the `UPDATE` matches it (`sql::schedule::take_due_sql`): one writer
    /// holds the database, so there are no row locks to skip, and `rowid` is the cheapest key.
    pub(crate) const TAKE_KEY: (&str, &str) = ("rowid", "rowid");

    /// An active binding `b`. `bindings.active` is INTEGER 0/1; the literal `= 1` is what lets the
    /// planner use the partial indexes `… WHERE active = 1`.
    macro_rules! active_binding {
        () => {
            "b.active = 1"
        };
    }
    pub(crate) use active_binding;

    /// The scope code of the card `$iccid` ([`super::card_scope_code_with`]) on this engine.
    macro_rules! card_scope_code {
        ($iccid:literal) => {
            $crate::store::dialect::card_scope_code_with!(
                [$crate::store::dialect::sqlite::active_binding!()],
                $iccid
            )
        };
    }
    pub(crate) use card_scope_code;

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
    /// only ever used by this process, whose clock is the one clock.
    pub(crate) const SHARED_CLOCK_MILLIS: Option<&str> = None;

    /// Row locks (PostgreSQL's `FOR NO KEY UPDATE`, with or without `SKIP LOCKED`, D-poll-postgres-concurrent-writes):
    /// nothing here, the one writer already holds the whole database.
    macro_rules! lock_row {
        () => {
            ""
        };
    }
    pub(crate) use lock_row;
    macro_rules! lock_row_skip_locked {
        () => {
            ""
        };
    }
    pub(crate) use lock_row_skip_locked;
    macro_rules! delete_skip_locked_of {
        ($alias:literal) => {
            ""
        };
    }
    pub(crate) use delete_skip_locked_of;

    /// Named locks of PostgreSQL (schedule configuration, an operator's daily quota, D-poll-postgres-concurrent-writes): none
    /// needed under one writer.
    pub(crate) const SCHEDULE_CONFIG_READ_LOCK: Option<&str> = None;
    pub(crate) const SCHEDULE_CONFIG_WRITE_LOCK: Option<&str> = None;
    pub(crate) const OPERATOR_QUOTA_LOCK: Option<&str> = None;

    /// PostgreSQL's one-statement insert of ordinary polls' interaction logs: SQLite has no
    /// arrays, so `false` — the caller writes them in multi-row `VALUES` statements.
    pub(crate) async fn insert_logs_as_arrays(
        _conn: &mut SqliteConnection,
        _logs: &[(&crate::store::PollRecord, &crate::store::NewLog)],
    ) -> StoreResult<bool> {
        Ok(false)
    }
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
        /// One of the hot transitions (`store::hot`): through sqlx, as [`Self::write`];
        /// `_on_thread` is SQLite's synchronous way (D-writer-sync-transitions).
        pub(crate) async fn write_hot<A, T>(
            &self,
            args: A,
            through_sqlx: WriteFn<A, T>,
            _on_thread: super::sqlite::SyncWriteFn<A, T>,
        ) -> StoreResult<T>
        where
            A: Send + Sync + 'static,
            T: Send + 'static,
        {
            self.write(args, through_sqlx).await
        }

        /// Runs `op(conn, &args)` in one write transaction and commits it. A run that met a
        /// concurrent writer (deadlock, serialization failure, `StoreError::Raced`) is rolled back
        /// and run again from its first read, a bounded number of times (D-poll-postgres-concurrent-writes, `store::retry`).
        pub(crate) async fn write<A, T>(&self, args: A, op: WriteFn<A, T>) -> StoreResult<T>
        where
            A: Send + Sync + 'static,
            T: Send + 'static,
        {
            let mut runs = 0;
            loop {
                let once: StoreResult<T> = async {
                    let mut tx = begin_write(&self.0).await?;
                    let out = op(&mut tx, &args).await?;
                    tx.commit().await?;
                    Ok(out)
                }
                .await;
                match once {
                    Err(e) if crate::store::retry::again(&e, &mut runs).await => continue,
                    done => return done,
                }
            }
        }

        /// Nothing to drain: every write finished with its caller. The pool is closed by its
        /// owner.
        pub(crate) async fn shutdown(&self) {}

        /// No group commit: no counters.
        pub(crate) fn stats(&self) -> (u64, u64) {
            (0, 0)
        }

        /// Every write is its own transaction and fails with its caller; a server that takes no
        /// writes shows in the reads (`ping`) too.
        pub(crate) fn failing(&self) -> bool {
            false
        }

        /// No group commit: nothing to observe.
        pub(crate) fn on_commit(&self, _hook: sqlite_writer::CommitHook) {}
    }

    /// A write transaction: READ COMMITTED, no global lock (D-poll-postgres-concurrent-writes amends D-poll-postgres-concurrent-writes). Several
    /// instances write at once; each transition is safe on its own rows (conditional updates,
    /// `INSERT … ON CONFLICT` on the partial unique index, row locks in one order, `SKIP LOCKED`
    /// where rows are picked), and `store::retry` runs it again after a deadlock or a detected
    /// concurrent change.
    pub(crate) async fn begin_write(
        pool: &Pool<Postgres>,
    ) -> StoreResult<Transaction<'static, Postgres>> {
        Ok(pool.begin().await?)
    }

    /// The item select list for `common::item_view` (table alias `i`). Aggregates: `string_agg`;
    /// sources sort with `COLLATE "C"` so the order is bytewise as on SQLite, not the locale's.
    pub(crate) const ITEM_COLUMNS: &str = "i.*, \
        (SELECT string_agg(s.source, chr(31) ORDER BY s.source COLLATE \"C\") FROM priority_item_sources s WHERE s.item_id = i.id) AS sources, \
        (SELECT string_agg(c.ancestor_id, chr(31) ORDER BY c.depth DESC) FROM shop_closure c WHERE c.descendant_id = i.shop_id) AS chain";

    /// The take's row key and how the `UPDATE` matches it (`sql::schedule::take_due_sql`): there is
    /// no `rowid`; the key is (task type, iccid), the task type being `$2`.
    pub(crate) const TAKE_KEY: (&str, &str) = ("iccid", "task_type = $2 AND iccid");

    /// An active binding `b`: `bindings.active` is BOOLEAN (no `= 1` between boolean and integer).
    macro_rules! active_binding {
        () => {
            "b.active"
        };
    }
    pub(crate) use active_binding;

    /// The scope code of the card `$iccid` ([`super::card_scope_code_with`]) on this engine.
    macro_rules! card_scope_code {
        ($iccid:literal) => {
            $crate::store::dialect::card_scope_code_with!(
                [$crate::store::dialect::postgres::active_binding!()],
                $iccid
            )
        };
    }
    pub(crate) use card_scope_code;

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
    /// clock against it. `clock_timestamp()`, not `now()`, which is frozen at
    /// the start of the transaction.
    pub(crate) const SHARED_CLOCK_MILLIS: Option<&str> =
        Some("SELECT CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)");

    /// Locks the rows read for the rest of the transaction, waiting for a holder to commit, so
    /// the transition decides on the row it then writes (D-poll-postgres-concurrent-writes). `NO KEY UPDATE`, not `UPDATE`:
    /// rows inserted elsewhere that merely reference this one (audit facts, bindings, schedule
    /// rows take `KEY SHARE`) do not wait for it.
    macro_rules! lock_row {
        () => {
            " FOR NO KEY UPDATE"
        };
    }
    pub(crate) use lock_row;

    /// Locks the rows read, skipping rows another transaction holds (a claim: the holder is
    /// claiming, merging into or finishing the item; it is not claimable now, and the next due
    /// read finds it again).
    macro_rules! lock_row_skip_locked {
        () => {
            " FOR NO KEY UPDATE SKIP LOCKED"
        };
    }
    pub(crate) use lock_row_skip_locked;

    /// Picks rows of table alias `$alias` to delete, skipping rows another pruner holds: two
    /// instances pruning at once take disjoint batches instead of waiting on each other.
    macro_rules! delete_skip_locked_of {
        ($alias:literal) => {
            concat!(" FOR UPDATE OF ", $alias, " SKIP LOCKED")
        };
    }
    pub(crate) use delete_skip_locked_of;

    /// Held by an import while it reads the schedule configuration and gives its cards their
    /// schedule rows (shared: imports do not wait for each other); the sync takes it exclusively
    /// to change the configuration, so a card is never imported under a configuration the sync's
    /// later page scan already passed (D-poll-postgres-concurrent-writes). Keyed by schema, like every named lock here.
    pub(crate) const SCHEDULE_CONFIG_READ_LOCK: Option<&str> = Some(
        "SELECT pg_advisory_xact_lock_shared(hashtext(current_schema() || '.card_polling_schedule_config'))",
    );
    /// See [`SCHEDULE_CONFIG_READ_LOCK`].
    pub(crate) const SCHEDULE_CONFIG_WRITE_LOCK: Option<&str> = Some(
        "SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.card_polling_schedule_config'))",
    );
    /// One operator's ordinary manual trigger quota (`$1` the operator): the count and the
    /// inserts it allows run under it, so concurrent requests never overshoot the daily quota.
    /// An operator has no row of its own to lock (the bootstrap admin is not in `accounts`).
    pub(crate) const OPERATOR_QUOTA_LOCK: Option<&str> = Some(
        "SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.card_polling_quota.' || $1))",
    );

    /// Ordinary polls' interaction logs in ONE statement of eight array parameters (`UNNEST`),
    /// however many rows: a `VALUES` list of 256 rows is 2,048 parameters for the server to parse
    /// and bind per statement, and the outcome batch (1,000 polls) waits for all of it while the
    /// executions that filled it wait too (D-ordinary-outcome-batches). Always `true` (written).
    pub(crate) async fn insert_logs_as_arrays(
        conn: &mut PgConnection,
        logs: &[(&crate::store::PollRecord, &crate::store::NewLog)],
    ) -> StoreResult<bool> {
        if logs.is_empty() {
            return Ok(true);
        }
        let column = |f: fn(&crate::store::PollRecord, &crate::store::NewLog) -> String| {
            logs.iter().map(|(r, l)| f(r, l)).collect::<Vec<String>>()
        };
        sqlx::query(
            "INSERT INTO integration_logs (iccid, task_type, operation, request_summary, \
               response_summary, latency_ms, outcome, at) \
             SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], \
               $6::bigint[], $7::text[], $8::text[])",
        )
        .bind(column(|r, _| r.iccid.clone()))
        .bind(column(|r, _| r.task_type.clone()))
        .bind(column(|_, l| l.operation.clone()))
        .bind(column(|_, l| l.request_summary.clone()))
        .bind(column(|_, l| l.response_summary.clone()))
        .bind(logs.iter().map(|(_, l)| l.latency_ms).collect::<Vec<i64>>())
        .bind(column(|_, l| l.outcome.clone()))
        .bind(column(|r, _| crate::store::common::t(r.at)))
        .execute(&mut *conn)
        .await?;
        Ok(true)
    }
}
