//! `Application::build`: opens the store, records the feature's go-live instant, syncs the
//! ordinary polling schedule, connects the hint channel, binds the listener and wires the router,
//! the executor pool, the scheduler, the expiry job, the retention job and the schedule
//! configuration check.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use rakuten_types::Clock;

use crate::domain::TokenHash;
use crate::executor::Executor;
use crate::executor::pool::ExecutorPool;
use crate::hints::memory::MemoryChannel;
use crate::hints::redis::{ConnectError, RedisChannel};
use crate::hints::{Hints, QueueChannel};
use crate::http::router;
use crate::jobs::expiry::ExpiryJob;
use crate::jobs::retention::RetentionJob;
use crate::jobs::schedule_config::{CHECK_EVERY, ScheduleConfigJob};
use crate::scheduler::{Scheduler, SchedulerConfig};
use crate::settings::{HintChannelSetting, Settings};
use crate::state::AppState;
use crate::store::postgres::PgStore;
use crate::store::sqlite::SqliteStore;
use crate::store::{ScheduleConfig, Store};
use crate::upstream::Upstream;

/// A built, not yet serving, application.
pub struct Application {
    listener: TcpListener,
    state: AppState,
    sqlite: Option<SqliteStore>,
    postgres: Option<PgStore>,
    executor: Executor,
    scheduler: Scheduler,
    expiry: ExpiryJob,
    retention: RetentionJob,
    schedule_config: ScheduleConfigJob,
    edge: rakuten_edge::EdgeConfig,
}

impl std::fmt::Debug for Application {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Application")
            .field("addr", &self.listener.local_addr().ok())
            .finish_non_exhaustive()
    }
}

/// A database or Redis URL as start-up errors may print it: scheme, host, port and path, never
/// its password ([`crate::upstream::http::redact_url`]).
pub(crate) fn printable_url(url: &str) -> String {
    reqwest::Url::parse(url)
        .map(|u| crate::upstream::http::redact_url(&u))
        .unwrap_or_else(|_| "(unparsable URL)".into())
}

/// Whether PostgreSQL did not answer (no connection, none in time, still starting up, out of
/// connections): what a restart may fix (exit 3). A URL that does not parse, a role or database
/// that does not exist, a wrong password are answers, the operator's to fix (exit 2)
/// (D-exit-2-or-3).
fn not_answering(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut => true,
        sqlx::Error::Database(db) => matches!(db.code().as_deref(), Some("57P03" | "53300")),
        _ => false,
    }
}

/// The message of an SQLite file (or its folder) that this user cannot write (D-exit-2-or-3).
fn read_only_message(path: &std::path::Path) -> String {
    format!(
        "the SQLite database {} (RAKUTEN_POLL_DB_PATH) is read-only: this user cannot write the \
         file or its folder (WAL mode writes its -wal and -shm files beside it)",
        path.display()
    )
}

/// Connects the configured hint channel.
///
/// # Errors
/// Redis not answering, or its CA file unreadable: a [`rakuten_cli::SetupError`] (the service
/// refuses to start rather than run without its channel).
pub async fn connect_hints(settings: &Settings) -> anyhow::Result<Hints> {
    let channel: Arc<dyn QueueChannel> = match &settings.hint_channel {
        HintChannelSetting::Memory => Arc::new(MemoryChannel::default()),
        HintChannelSetting::Redis(url) => {
            let ca = match &settings.redis_ca_path {
                Some(path) => Some(std::fs::read(path).with_context(|| {
                    rakuten_cli::SetupError::new(
                        "RAKUTEN_POLL_REDIS_CA_PATH",
                        format!("reading RAKUTEN_POLL_REDIS_CA_PATH {}", path.display()),
                    )
                })?),
                None => None,
            };
            Arc::new(RedisChannel::connect(url.expose(), ca).await.map_err(|e| {
                let message = format!(
                    "connecting the Redis hint channel {} (RAKUTEN_POLL_HINT_CHANNEL)",
                    printable_url(url.expose())
                );
                // Redis may still be starting: exit 3, a restart retries; a URL or a
                // password Redis refuses exits 2 (D-exit-2-or-3).
                let setup = match &e {
                    ConnectError::NotAnswering(_) => {
                        rakuten_cli::SetupError::unavailable("RAKUTEN_POLL_HINT_CHANNEL", message)
                    }
                    ConnectError::Refused(_) => {
                        rakuten_cli::SetupError::new("RAKUTEN_POLL_HINT_CHANNEL", message)
                    }
                };
                anyhow::Error::new(e).context(setup)
            })?)
        }
    };
    Ok(Hints::new(channel, settings.hint_prefix.clone()))
}

impl Application {
    /// Builds everything from validated settings, an injected clock and a carrier.
    ///
    /// # Errors
    /// Database open/migration failures, the hint channel cannot be reached, or the listen
    /// address cannot be bound.
    pub async fn build(
        settings: Settings,
        clock: Arc<dyn Clock>,
        upstream: Arc<dyn Upstream>,
    ) -> anyhow::Result<Self> {
        // PostgreSQL when `RAKUTEN_POLL_DB_URL` is set, else the SQLite file.
        let lock_timeout = std::time::Duration::from_millis(settings.db_lock_timeout_ms);
        // The acting instance named on audit facts of system transitions.
        let instance = settings
            .instance_id
            .clone()
            .unwrap_or_else(crate::instance::default_instance_id);
        tracing::info!(%instance, "card-polling instance");
        // The hint channel first: a Redis that does not answer stops the start before any
        // migration changed the database (D-startup-names-what-failed).
        let hints = connect_hints(&settings).await?;
        let (database, database_var) = match &settings.db_url {
            Some(url) => (
                format!("{} (RAKUTEN_POLL_DB_URL)", printable_url(url.expose())),
                "RAKUTEN_POLL_DB_URL",
            ),
            None => (
                format!("{} (RAKUTEN_POLL_DB_PATH)", settings.db_path.display()),
                "RAKUTEN_POLL_DB_PATH",
            ),
        };
        // A database that cannot be opened or written is the operator's to fix (exit 2); a
        // PostgreSQL that does not answer may be booting, a restart retries (exit 3); a migration
        // that fails is neither (exit 1) (D-exit-2-or-3).
        let opening = |e: sqlx::Error, message: String| -> anyhow::Error {
            if let Some(foreign) = rakuten_cli::SetupError::foreign_migration(&e, database_var)
                .or_else(|| rakuten_cli::SetupError::missing_schema(&e, database_var))
            {
                anyhow::Error::new(e).context(foreign)
            } else if matches!(e, sqlx::Error::Migrate(_)) {
                anyhow::Error::new(e).context(message)
            } else if let Some(held) = sqlite_writer::FileLock::held_elsewhere(&e) {
                // Another card-polling process writes this file (D-one-process-per-sqlite-file).
                // `held` already says all the lock's error would (said twice otherwise): the
                // setup error alone.
                let message = format!("opening the SQLite database {database}: {held}");
                anyhow::Error::new(rakuten_cli::SetupError::unavailable(database_var, message))
            } else if crate::store::is_read_only(&e) {
                anyhow::Error::new(e).context(rakuten_cli::SetupError::new(
                    database_var,
                    read_only_message(&settings.db_path),
                ))
            } else if settings.db_url.is_some() && not_answering(&e) {
                anyhow::Error::new(e)
                    .context(rakuten_cli::SetupError::unavailable(database_var, message))
            } else {
                anyhow::Error::new(e).context(rakuten_cli::SetupError::new(database_var, message))
            }
        };
        let (sqlite, postgres, store): (_, _, Arc<dyn Store>) = match &settings.db_url {
            Some(url) => {
                // `database` shows only the URL's scheme, host, port and database (it may hold
                // a password).
                let pg = PgStore::open_with(url.expose(), lock_timeout)
                    .await
                    .map_err(|e| {
                        opening(
                            e,
                            format!(
                                "opening the PostgreSQL database {database}: is it running and \
                                 reachable (it must answer within {} s), and does the database \
                                 exist?",
                                crate::store::postgres::CONNECT_TIMEOUT.as_secs()
                            ),
                        )
                    })?
                    .with_instance(&instance);
                (None, Some(pg.clone()), Arc::new(pg))
            }
            None => {
                let sqlite = SqliteStore::open_with(&settings.db_path, lock_timeout)
                    .await
                    .map_err(|e| {
                        opening(
                            e,
                            format!(
                                "opening the SQLite database {database}: the file must be an \
                                 SQLite database, and it and its folder writable (WAL mode \
                                 writes beside it)"
                            ),
                        )
                    })?
                    .with_instance(&instance);
                (Some(sqlite.clone()), None, Arc::new(sqlite))
            }
        };
        // The first write: a database that opens but cannot be written (a read-only file) fails
        // here, so it is named here too: read-only, not busy (D-exit-2-or-3).
        let enabled_at = store
            .meta_feature_enabled_at(clock.now())
            .await
            .map_err(|e| {
                let message = format!("writing to the database {database}");
                if e.is_read_only() {
                    let ro = read_only_message(&settings.db_path);
                    anyhow::Error::new(e).context(rakuten_cli::SetupError::new(database_var, ro))
                } else if sqlite_writer::WriterError::is_storage_failure(&e) {
                    anyhow::Error::new(e)
                        .context(rakuten_cli::SetupError::new(database_var, message))
                } else {
                    anyhow::Error::new(e).context(message)
                }
            })?;
        tracing::info!(%enabled_at, "priority polling feature enabled since");
        // An imported account holding the admin token would sign in as the bootstrap admin
        // (checked first), so its own role would never apply (D-admin-token-is-nobody-elses): a bad setting,
        // refused before the service listens.
        let admin_hash = TokenHash::of(settings.admin_token.expose());
        if let Some(account) = store
            .account_find_by_token(&admin_hash)
            .await
            .with_context(|| format!("reading the accounts of the database {database}"))?
        {
            return Err(crate::settings::InvalidSetting {
                name: "RAKUTEN_POLL_ADMIN_TOKEN",
                reason: format!(
                    "is also the token of the imported account {:?} (role {}): the two would \
                     collapse into one super_admin; choose another admin token, or replace that \
                     account's token",
                    account.id,
                    account.role.as_str()
                ),
            }
            .into());
        }
        let synced = store
            .schedule_sync(&settings.task_types, settings.shards, clock.now())
            .await?;
        if synced > 0 {
            tracing::info!(rows = synced, "ordinary polling schedule synced");
        }
        let edge = settings.edge.edge_config()?;
        let listen = settings.listen_addr();
        rakuten_edge::warn_if_plain_public("card-polling", listen, edge.tls.is_some());
        let vars = match settings.listen {
            Some(_) => ("RAKUTEN_POLL_LISTEN", "RAKUTEN_POLL_LISTEN"),
            None => ("RAKUTEN_POLL_HOST", "RAKUTEN_POLL_PORT"),
        };
        let listener = rakuten_edge::bind(listen, vars).await?;
        let executor = Executor::new(
            store.clone(),
            upstream,
            clock.clone(),
            settings.task_types.clone(),
            settings.executor_batch,
            settings.executor_concurrency as usize,
            hints.clone(),
        )
        .with_clock_max_skew(settings.clock_max_skew());
        let pool = Arc::new(ExecutorPool::new(
            executor.clone(),
            settings.shards,
            settings.executor_concurrency as usize,
        ));
        let scheduler = Scheduler::new(
            store.clone(),
            hints.clone(),
            pool,
            clock.clone(),
            SchedulerConfig {
                shards: settings.shards,
                shard_batch: settings.shard_batch,
                backpressure_depth: settings.backpressure_depth as usize,
                backpressure_work: Duration::from_secs_f64(settings.backpressure_secs),
                drain_max: settings.drain_max as usize,
                recovery_limit: settings.executor_batch,
                tick: Duration::from_millis(settings.executor_tick_ms),
                pool_flushes_itself: false,
            },
        );
        let expiry = ExpiryJob::new(
            store.clone(),
            clock.clone(),
            Duration::from_secs(settings.expiry_every_secs),
        );
        let retention = RetentionJob::new(
            store.clone(),
            clock.clone(),
            executor.metrics().clone(),
            settings.retention(),
        );
        let schedule_config = ScheduleConfigJob::new(
            store.clone(),
            clock.clone(),
            ScheduleConfig::of(&settings.task_types, settings.shards),
            CHECK_EVERY,
        );
        if let Some(s) = &sqlite {
            let m = executor.metrics().clone();
            s.on_commit(Box::new(move |ops, took| m.writer_commit(ops, took)));
        }
        let state = AppState {
            store,
            clock,
            task_types: settings.task_types.clone(),
            admin_token_hash: Arc::new(admin_hash),
            hints,
            scheduler: scheduler.clone(),
            schedule_config: schedule_config.clone(),
            manual_daily_quota: settings.manual_daily_quota,
            console_key: web_console::ConsoleKey::new(settings.console_key.as_deref()),
            credential_key: crate::console::CredentialKey::new(settings.console_key.as_deref()),
        };
        Ok(Application {
            listener,
            state,
            sqlite,
            postgres,
            executor,
            scheduler,
            expiry,
            retention,
            schedule_config,
            edge,
        })
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.listener.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    /// Handler state (store, clock, task types, hints, scheduler).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// The SQLite store (fixtures and benchmarks).
    ///
    /// # Panics
    /// When the service runs on PostgreSQL (`RAKUTEN_POLL_DB_URL`); see [`Self::postgres`].
    pub fn sqlite(&self) -> &SqliteStore {
        self.sqlite
            .as_ref()
            .expect("sqlite() called on a PostgreSQL card-polling")
    }

    /// The PostgreSQL store, when `RAKUTEN_POLL_DB_URL` chose it.
    pub fn postgres(&self) -> Option<&PgStore> {
        self.postgres.as_ref()
    }

    /// The executor.
    pub fn executor(&self) -> &Executor {
        &self.executor
    }

    /// The scheduler (and through it the executor pool and the hint lanes).
    pub fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    /// The expiry job.
    pub fn expiry(&self) -> &ExpiryJob {
        &self.expiry
    }

    /// The retention job.
    pub fn retention(&self) -> &RetentionJob {
        &self.retention
    }

    /// The schedule configuration check.
    pub fn schedule_config(&self) -> &ScheduleConfigJob {
        &self.schedule_config
    }

    /// Serves HTTP only, until `shutdown` (tests drive the scheduler, pool and jobs themselves),
    /// through `rakuten_edge::serve`: TLS when configured, head/idle timeout, connection cap,
    /// and connections still open `RAKUTEN_POLL_SHUTDOWN_DEADLINE_SECS` after shutdown dropped.
    ///
    /// # Errors
    /// Server failures.
    pub async fn serve_http(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        rakuten_edge::serve(self.listener, router(self.state), self.edge, async move {
            shutdown.cancelled().await
        })
        .await?;
        Ok(())
    }

    /// Serves HTTP and runs the scheduler, the executor pool, the expiry, retention and schedule
    /// configuration jobs until `shutdown`.
    ///
    /// # Errors
    /// Server failures.
    pub async fn run_until_stopped(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let tasks = tokio_util::task::TaskTracker::new();
        tasks.spawn(self.expiry.clone().run(shutdown.clone()));
        tasks.spawn(self.retention.clone().run(shutdown.clone()));
        tasks.spawn(self.schedule_config.clone().run(shutdown.clone()));
        let tick = self.scheduler.config().tick;
        tasks.spawn(self.scheduler.pool().clone().run(shutdown.clone(), tick));
        tasks.spawn(
            self.scheduler
                .clone()
                .flushed_by_pool()
                .run(shutdown.clone()),
        );
        tasks.close();
        let store = self.state.store.clone();
        let r = self.serve_http(shutdown).await;
        tasks.wait().await;
        // Last: the background loops and requests have ended; what they queued is committed.
        store.shutdown().await;
        r
    }
}
