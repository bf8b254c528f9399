//! The PostgreSQL engine of the store, for several gateway instances sharing one queue.
//! Chosen by `RAKUTEN_GATEWAY_DB_URL=postgres://…`; SQLite stays the default. The SQL is the one
//! implementation of [`super::sql`]; this file opens the pool, runs each transition in its own
//! transaction, and carries what only PostgreSQL has: `LISTEN/NOTIFY` wake-ups across instances
//! and the alert-leader advisory lock. Migrations live in `migrations/postgres` (same numbering as
//! SQLite's) and are embedded.
//!
//! - Every write method is ONE transaction (READ COMMITTED) committed before it returns: the guards
//!   are conditional `UPDATE … RETURNING`, rows are locked or picked `FOR UPDATE SKIP LOCKED`, and
//!   the partial unique index `one_active_task` is the last word on the gate. No group-commit
//!   writer: PostgreSQL already batches WAL flushes of concurrent commits, and several instances
//!   write at once anyway.
//! - Wake-ups across instances: after a commit that may make something leasable, the store asks
//!   its notification pump for a `pg_notify(channel)`; the pump sends it outside any data
//!   transaction and coalesces requests that arrive while it is sending (a NOTIFY inside the data
//!   transaction would serialize every commit behind PostgreSQL's notify-queue lock, halving
//!   throughput; D-cross-instance-notify). [`PgStore::spawn_listener`] turns notifications into in-process
//!   [`LeaseNotifier`] wake-ups. The long-poll's periodic database check stays the fallback (a
//!   missed notification only delays).

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};
use sqlx::{ConnectOptions, PgConnection};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{StoreError, Transition, bounded};
use crate::lease::notify::LeaseNotifier;

/// `NOTIFY` channel of the order tasks: a task was submitted, the gate was freed, a stale task was
/// reclaimed for a worker.
pub const TASKS_CHANNEL: &str = "order_gateway_tasks";
/// `NOTIFY` channel of the account queries: a query was submitted or redelivered.
pub const QUERIES_CHANNEL: &str = "order_gateway_queries";

/// Longest wait for a row or table lock, and longest statement; under [`super::STORE_OP_BOUND`].
const LOCK_TIMEOUT: &str = "2s";
const STATEMENT_TIMEOUT: &str = "2500ms";

/// Connections per instance. Long-polls hold none while they wait, so a few suffice.
const POOL_CONNECTIONS: u32 = 10;

/// The migrations of `migrations/postgres`, embedded at compile time (see D-embedded-migrations).
pub fn migrator() -> Migrator {
    super::embedded_migrator(
        &[
            (
                1,
                "order tasks",
                include_str!("../../migrations/postgres/0001_order_tasks.sql"),
            ),
            (
                2,
                "account queries",
                include_str!("../../migrations/postgres/0002_account_queries.sql"),
            ),
            (
                3,
                "set aside",
                include_str!("../../migrations/postgres/0003_set_aside.sql"),
            ),
            (
                4,
                "alerts and operator actions",
                include_str!("../../migrations/postgres/0004_alerts_operator_actions.sql"),
            ),
            (
                5,
                "console indexes",
                include_str!("../../migrations/postgres/0005_console_indexes.sql"),
            ),
            (
                6,
                "lease grants",
                include_str!("../../migrations/postgres/0006_lease_grants.sql"),
            ),
            (
                7,
                "console paging",
                include_str!("../../migrations/postgres/0007_console_paging.sql"),
            ),
            (
                8,
                "clock signals",
                include_str!("../../migrations/postgres/0008_clock_signals.sql"),
            ),
            (
                9,
                "alert paging, grant endings",
                include_str!("../../migrations/postgres/0009_alert_paging.sql"),
            ),
            (
                10,
                "deadlines, event sequence",
                include_str!("../../migrations/postgres/0010_deadlines_event_sequence.sql"),
            ),
            (
                11,
                "intent summary",
                include_str!("../../migrations/postgres/0011_intent_summary.sql"),
            ),
            (
                12,
                "worker bindings",
                include_str!("../../migrations/postgres/0012_worker_bindings.sql"),
            ),
            (
                13,
                "contradiction alert",
                include_str!("../../migrations/postgres/0013_contradiction_alert.sql"),
            ),
            (
                14,
                "latest state",
                include_str!("../../migrations/postgres/0014_latest_state.sql"),
            ),
        ],
        RELEASED,
    )
}

/// Migrations whose comments were reworded after release (D-released-migrations-pinned).
pub(crate) const RELEASED: &[rakuten_cli::migrations::Released] = &[
    rakuten_cli::migrations::Released {
        version: 3,
        checksum: "fbf28040d46c0196745d60ffe37b49e7808a977404c62f3acdd4415876d73485b671e99dd66ef7b220e875c7621a4f60",
        statements: "ff8bd28327bb82a6b2cb7cf86131ce054e11160e1e4a0c85fc05b7edf5544a01aa5c88d2bdbc71101641d0b853514bcb",
    },
    rakuten_cli::migrations::Released {
        version: 4,
        checksum: "387b08bf690861c13a9927eada2f6c17861abbb3d7bbbfb4b9166665b8b4d6e11b130c4b1ab81a1a94a017f56a836450",
        statements: "0d656ff8cd367d2c74dd2778761d41127338a364235e9f7bce20e943ec7dc81c41290c22b0e2a2f233882ef829cf952c",
    },
    rakuten_cli::migrations::Released {
        version: 5,
        checksum: "ebeb444369c9aaaadfe8c28485f539aa41372884e3e016c1a4f2898117d0a028cbb13541544375177f56603c25fea321",
        statements: "86769f9372c878d3a771bec9910104e11175b507b5b5835e3147984921500133aa1c9f701df06550cc3a12153cf38c46",
    },
    rakuten_cli::migrations::Released {
        version: 6,
        checksum: "3ee0ef82e69754fe2bc2a2fcfbf6de571d825f2b3d3af60bd2b8c974548987bbb7ea90310de048f76d5b0ca901e46741",
        statements: "da848fc8807eed93c30899409c59b6b8dde4140230d895b535ab6c0f10e000acf79cd1bdfe8c194a9e1a811460f93026",
    },
    rakuten_cli::migrations::Released {
        version: 7,
        checksum: "f0071d378b6a05cae2718ed2c0f91d00a29d500a769eec70427413a324bc3d3a268f54927e6ef2b64612e4dcfb037ab3",
        statements: "0d0e496ecba36e4ecdd242ea0b5741c1c82805388d15456d116f7a79b4a68a730910da9c2f1a8f29c0187dbec60340cd",
    },
    rakuten_cli::migrations::Released {
        version: 8,
        checksum: "416d9cab2fc955969d23b888e886f4a86dff71678e7e0169dc07a84402cf32f07474d5229867975253eefc55efcc1815",
        statements: "f425bbbee17e0d3e269f858677012350e40d8612477933b2a0a15dec1df803e1b2ce99f5dbbca54d29b6fd6aa14ab7e4",
    },
    rakuten_cli::migrations::Released {
        version: 9,
        checksum: "3ff363c6e5ef6e111ce497d124ecf42110f0ea205ef6a3689e4fe77d711c03c17822d80925e3dbf5dc578081674e0b7f",
        statements: "72253c4b4e3d2670dde98c5f07f0bce962262bcd6924bc08b851e335e8b5f3a80d925092a1aa23f9d5f9b8592a9cd49a",
    },
];

/// Sends `pg_notify` for the channels asked for since its last send, one statement each, outside
/// any data transaction. Requests arriving while it sends are coalesced into the next round.
#[derive(Debug)]
struct NotifyPump {
    /// This instance's id, sent in every payload: its own listener skips it, since the commit's
    /// in-process wake-up already woke a waiter here (else one submit woke two local waiters).
    instance: String,
    /// Leasable things announced since the last send, per channel (the payload of the next one).
    tasks: AtomicU64,
    queries: AtomicU64,
    closed: AtomicBool,
    wake: tokio::sync::Notify,
}

impl NotifyPump {
    fn request(&self, channel: &AtomicU64, n: usize) {
        if n > 0 {
            channel.fetch_add(n as u64, Ordering::AcqRel);
            self.wake.notify_one();
        }
    }

    async fn run(self: Arc<Self>, pool: PgPool) {
        loop {
            self.wake.notified().await;
            if self.closed.load(Ordering::Acquire) {
                return;
            }
            for (flag, channel) in [
                (&self.tasks, TASKS_CHANNEL),
                (&self.queries, QUERIES_CHANNEL),
            ] {
                let n = flag.swap(0, Ordering::AcqRel);
                // The payload carries the count, so the listeners wake that many waiters.
                if n > 0
                    && let Err(e) = sqlx::query("SELECT pg_notify($1, $2)")
                        .bind(channel)
                        .bind(format!("{n} {}", self.instance))
                        .execute(&pool)
                        .await
                {
                    // Waiters still find the work through their periodic re-check.
                    tracing::warn!(error = %e, channel, "NOTIFY failed");
                }
            }
        }
    }
}

/// The PostgreSQL order and account-query store.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    options: PgConnectOptions,
    pump: Arc<NotifyPump>,
    /// Whether the `LISTEN` session is up (set once it listens and has woken the waiters).
    listening: Arc<AtomicBool>,
    /// The session holding (or trying for) the alert-leader advisory lock, and whether it holds it.
    leader: Arc<tokio::sync::Mutex<Option<(PgConnection, bool)>>>,
}

/// Most waiters one notification wakes; also what a reclaim announces ("everyone": it names one
/// worker, which may be any of the waiters).
pub(crate) const WAKE_EVERYONE: usize = 1000;

/// Wakes as many of this instance's waiters as the payload (`"<count> <instance>"`) counts (issue
/// #12 item 9). A payload this instance sent wakes nobody: the handler that committed already woke
/// a local waiter in-process. A payload that is not a count (an older instance sends '') wakes
/// them all.
fn wake(notifier: &LeaseNotifier, payload: &str, own_instance: &str) {
    let (count, from) = payload.split_once(' ').unwrap_or((payload, ""));
    if from == own_instance {
        return;
    }
    match count.parse::<usize>() {
        Ok(n) if n < WAKE_EVERYONE => notifier.notify_leasable_n(n),
        _ => notifier.notify_everyone(),
    }
}

/// The alert-leader lock key: per schema, so deployments (and tests) in separate schemas of one
/// database elect separately.
const LEADER_LOCK: &str =
    "SELECT pg_try_advisory_lock(hashtext(current_schema() || '.order_gateway_alerts'))";

impl PgStore {
    /// Connects to `url` (`postgres://user@host:port/db`, optionally
    /// `?options=-c%20search_path%3D…`), runs the migrations (serialized between instances by
    /// sqlx's advisory lock) and opens the pool.
    ///
    /// # Errors
    /// [`StoreError::Database`] when PostgreSQL is unreachable or a migration fails.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let mut options = PgConnectOptions::from_str(url)?;
        // `application_name` from the URL is kept (operators tell instances apart by it).
        if options.get_application_name().is_none() {
            options = options.application_name("order-gateway");
        }
        // Migrations first, on a session of their own without the timeouts below: a second
        // instance starting at the same moment waits on sqlx's migration lock as long as needed.
        let mut migrating = options.connect().await?;
        migrator()
            .run(&mut migrating)
            .await
            .map_err(|e| StoreError::Database(Arc::new(e.into())))?;
        let _ = sqlx::Connection::close(migrating).await;
        // A statement never waits on a lock (or runs) past the store's bound: the server gives up
        // too, not only our side.
        let options = options.options([
            ("lock_timeout", LOCK_TIMEOUT),
            ("statement_timeout", STATEMENT_TIMEOUT),
        ]);
        let pool = PgPoolOptions::new()
            .max_connections(POOL_CONNECTIONS)
            .acquire_timeout(super::STORE_OP_BOUND)
            .connect_with(options.clone())
            .await?;
        let pump = Arc::new(NotifyPump {
            instance: uuid::Uuid::now_v7().to_string(),
            tasks: AtomicU64::default(),
            queries: AtomicU64::default(),
            closed: AtomicBool::default(),
            wake: tokio::sync::Notify::default(),
        });
        tokio::spawn(pump.clone().run(pool.clone()));
        Ok(PgStore {
            pool,
            options,
            pump,
            listening: Arc::default(),
            leader: Arc::default(),
        })
    }

    /// The pool (tests and benchmarks inspect the schema through it).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Starts the `LISTEN` task: notifications on [`TASKS_CHANNEL`] / [`QUERIES_CHANNEL`] wake this
    /// instance's order / query long-polls. On a lost connection it wakes both (a notification may
    /// have been missed), reconnects with a 1 s back-off, and listens again; until `shutdown`.
    pub fn spawn_listener(
        &self,
        tasks: LeaseNotifier,
        queries: LeaseNotifier,
        shutdown: CancellationToken,
    ) -> JoinHandle<()> {
        // The listener's session is named `<application_name>/listen` in `pg_stat_activity`.
        let name = format!(
            "{}/listen",
            self.options
                .get_application_name()
                .unwrap_or("order-gateway")
        );
        let options = self.options.clone().application_name(&name);
        let own = self.pump.instance.clone();
        let listening = self.listening.clone();
        tokio::spawn(async move {
            loop {
                let connected = async {
                    let pool = PgPoolOptions::new()
                        .max_connections(1)
                        .max_lifetime(None)
                        .idle_timeout(None)
                        .connect_with(options.clone())
                        .await?;
                    let mut l = PgListener::connect_with(&pool).await?;
                    l.listen_all([TASKS_CHANNEL, QUERIES_CHANNEL]).await?;
                    Ok::<_, sqlx::Error>(l)
                };
                let mut listener = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    l = connected => match l {
                        Ok(l) => l,
                        Err(e) => {
                            tracing::warn!(error = %e, "LISTEN connection failed; retrying in 1 s");
                            tokio::select! {
                                _ = shutdown.cancelled() => return,
                                _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                            }
                        }
                    },
                };
                // Anything committed while we were not listening is found by this wake-up.
                tasks.notify_everyone();
                queries.notify_everyone();
                listening.store(true, Ordering::Release);
                loop {
                    let next = tokio::select! {
                        _ = shutdown.cancelled() => return,
                        n = listener.try_recv() => n,
                    };
                    match next {
                        Ok(Some(n)) if n.channel() == TASKS_CHANNEL => {
                            wake(&tasks, n.payload(), &own)
                        }
                        Ok(Some(n)) if n.channel() == QUERIES_CHANNEL => {
                            wake(&queries, n.payload(), &own)
                        }
                        Ok(Some(_)) => {}
                        Ok(None) => {
                            // Connection lost; the next try_recv reconnects and re-LISTENs.
                            listening.store(false, Ordering::Release);
                            tracing::warn!("LISTEN connection lost; reconnecting");
                            tasks.notify_everyone();
                            queries.notify_everyone();
                        }
                        Err(e) => {
                            listening.store(false, Ordering::Release);
                            tracing::warn!(error = %e, "LISTEN failed; reconnecting in 1 s");
                            tokio::select! {
                                _ = shutdown.cancelled() => return,
                                _ = tokio::time::sleep(Duration::from_secs(1)) => break,
                            }
                        }
                    }
                }
            }
        })
    }

    /// Runs one transition in its own transaction: committed when it succeeds, rolled back when
    /// it fails. The caller is answered only after the commit.
    pub(crate) async fn write<T: Send>(
        &self,
        op: Transition<PgConnection, T>,
    ) -> Result<T, StoreError> {
        // Bounded: a transaction stuck behind a lock answers Busy; dropping it rolls it back.
        bounded(async move {
            let mut tx = self.pool.begin().await?;
            match op(&mut tx).await {
                Ok(v) => {
                    tx.commit().await?;
                    Ok(v)
                }
                Err(e) => {
                    let _ = tx.rollback().await;
                    Err(e)
                }
            }
        })
        .await
    }

    /// [`Self::write`]: a lease attempt whose caller is gone rolls back with its transaction.
    pub(crate) async fn write_lease<T: Send>(
        &self,
        op: Transition<PgConnection, T>,
    ) -> Result<T, StoreError> {
        self.write(op).await
    }

    /// Whether the `LISTEN` session is up.
    pub(crate) fn listening(&self) -> bool {
        self.listening.load(Ordering::Acquire)
    }

    pub(crate) fn read_pool(&self) -> &PgPool {
        &self.pool
    }

    /// Asks for a `NOTIFY` on [`TASKS_CHANNEL`] announcing `n` leasable things (sent after this
    /// commit, outside it).
    pub(crate) fn notify_tasks(&self, n: usize) {
        self.pump.request(&self.pump.tasks, n);
    }

    /// Asks for a `NOTIFY` on [`QUERIES_CHANNEL`] announcing `n` leasable queries.
    pub(crate) fn notify_queries(&self, n: usize) {
        self.pump.request(&self.pump.queries, n);
    }

    /// The database's clock minus `now`, milliseconds: the one clock the instances sharing this
    /// database are checked against.
    pub(crate) async fn database_clock_offset_ms(
        &self,
        now: rakuten_types::Timestamp,
    ) -> Result<Option<i64>, StoreError> {
        let db_ms: i64 = sqlx::query_scalar(
            "SELECT CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(Some(db_ms - now.as_millis()))
    }

    /// Whether this instance logs the alerts this tick: the holder of a session advisory lock,
    /// taken over when its holder dies.
    pub(crate) async fn elect_alerts_leader(&self) -> Result<bool, StoreError> {
        let mut slot = self.leader.lock().await;
        if let Some((conn, held)) = slot.as_mut() {
            let alive = sqlx::query("SELECT 1").execute(&mut *conn).await.is_ok();
            if alive && *held {
                return Ok(true);
            }
            if alive {
                let got: bool = sqlx::query_scalar(LEADER_LOCK)
                    .fetch_one(&mut *conn)
                    .await?;
                *held = got;
                return Ok(got);
            }
            *slot = None;
        }
        let mut conn = self.options.connect().await?;
        let got: bool = sqlx::query_scalar(LEADER_LOCK).fetch_one(&mut conn).await?;
        *slot = Some((conn, got));
        Ok(got)
    }

    /// [`StoreError::Closed`] once [`Self::shutdown`] has closed the pool.
    /// Every write is its own transaction and fails with its caller: never "failing" as a whole.
    pub(crate) fn writes_failing(&self) -> bool {
        false
    }

    pub(crate) fn ensure_open(&self) -> Result<(), StoreError> {
        if self.pool.is_closed() {
            return Err(StoreError::Closed);
        }
        Ok(())
    }

    /// Stops the notification pump, releases the leader lock, closes the pool.
    pub(crate) async fn shutdown(&self) {
        self.pump.closed.store(true, Ordering::Release);
        self.pump.wake.notify_one();
        // Releases the alert-leader lock before closing its session: the backend ends only some
        // time after the client leaves, and another instance may ask right away.
        if let Some((mut conn, _)) = self.leader.lock().await.take() {
            let _ = sqlx::query("SELECT pg_advisory_unlock_all()")
                .execute(&mut conn)
                .await;
            let _ = sqlx::Connection::close(conn).await;
        }
        // Every acknowledged write is already committed; closing waits for in-flight ones.
        self.pool.close().await;
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    use super::*;

    /// Enables 10 waiters, hands `payload` to [`wake`] as instance `me`, counts the woken.
    fn woken_by(payload: &str) -> usize {
        let n = LeaseNotifier::new();
        let mut waiters: Vec<_> = (0..10).map(|_| Box::pin(n.notified())).collect();
        for w in &mut waiters {
            w.as_mut().enable();
        }
        wake(&n, payload, "me");
        let mut cx = Context::from_waker(Waker::noop());
        waiters
            .iter_mut()
            .map(|w| w.as_mut().poll(&mut cx))
            .filter(|p| matches!(p, Poll::Ready(())))
            .count()
    }

    #[test]
    fn a_notification_this_instance_sent_wakes_none_of_its_own_waiters() {
        assert_eq!(woken_by("1 me"), 0);
    }

    #[test]
    fn another_instances_notification_wakes_as_many_waiters_as_it_counts() {
        assert_eq!(woken_by("1 other"), 1);
        assert_eq!(woken_by("3 other"), 3);
        assert_eq!(woken_by("3"), 3);
    }

    #[test]
    fn a_payload_that_is_no_count_wakes_every_waiter() {
        assert_eq!(woken_by(""), 10);
        assert_eq!(woken_by("1000 other"), 10);
    }
}
