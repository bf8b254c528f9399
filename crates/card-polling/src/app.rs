//! `Application::build`, start-up as its steps in order: connect the hint channel, open the
//! store, record the feature's go-live instant, check the admin token against the accounts
//! (the first four in [`crate::startup`]), sync the ordinary polling schedule, bind the listener,
//! wire the background loops (executor pool, scheduler, expiry, retention, schedule
//! configuration check) and the router's state; then serving until shutdown.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use rakuten_types::Clock;

use crate::executor::Executor;
use crate::executor::pool::ExecutorPool;
use crate::hints::Hints;
use crate::http::router;
use crate::jobs::expiry::ExpiryJob;
use crate::jobs::retention::RetentionJob;
use crate::jobs::schedule_config::{CHECK_EVERY, ScheduleConfigJob};
use crate::scheduler::{Scheduler, SchedulerConfig};
use crate::settings::Settings;
use crate::startup::{OpenedStore, admin_token_hash, connect_hints, open_store, record_go_live};
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

/// The TLS configuration and the bound listener (`RAKUTEN_POLL_LISTEN`, or host and port),
/// with a warning when a public address is served without TLS.
///
/// # Errors
/// A bad TLS setting, or the address cannot be bound.
async fn bind(settings: &Settings) -> anyhow::Result<(TcpListener, rakuten_edge::EdgeConfig)> {
    let edge = settings.edge.edge_config()?;
    let listen = settings.listen_addr();
    rakuten_edge::warn_if_plain_public("card-polling", listen, edge.tls.is_some());
    let vars = match settings.listen {
        Some(_) => ("RAKUTEN_POLL_LISTEN", "RAKUTEN_POLL_LISTEN"),
        None => ("RAKUTEN_POLL_HOST", "RAKUTEN_POLL_PORT"),
    };
    let listener = rakuten_edge::bind(listen, vars).await?;
    Ok((listener, edge))
}

/// The background loops over one store: the executor and its pool, the scheduler, the expiry
/// and retention jobs and the schedule configuration check.
struct Background {
    executor: Executor,
    scheduler: Scheduler,
    expiry: ExpiryJob,
    retention: RetentionJob,
    schedule_config: ScheduleConfigJob,
}

impl Background {
    /// Wires the loops from the settings; on SQLite the writer's commits feed the executor's
    /// metrics.
    fn build(
        settings: &Settings,
        store: &Arc<dyn Store>,
        sqlite: Option<&SqliteStore>,
        upstream: Arc<dyn Upstream>,
        clock: &Arc<dyn Clock>,
        hints: &Hints,
    ) -> Self {
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
        if let Some(s) = sqlite {
            let m = executor.metrics().clone();
            s.on_commit(Box::new(move |ops, took| m.writer_commit(ops, took)));
        }
        Background {
            executor,
            scheduler,
            expiry,
            retention,
            schedule_config,
        }
    }
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
        // The acting instance named on audit facts of system transitions.
        let instance = settings
            .instance_id
            .clone()
            .unwrap_or_else(crate::instance::default_instance_id);
        tracing::info!(%instance, "card-polling instance");
        // The hint channel first: a Redis that does not answer stops the start before any
        // migration changed the database (D-startup-names-what-failed).
        let hints = connect_hints(&settings).await?;
        let OpenedStore {
            sqlite,
            postgres,
            store,
            name,
        } = open_store(&settings, &instance).await?;
        record_go_live(store.as_ref(), clock.as_ref(), &settings, &name).await?;
        let admin_hash = admin_token_hash(store.as_ref(), &settings, &name).await?;
        let synced = store
            .schedule_sync(&settings.task_types, settings.shards, clock.now())
            .await?;
        if synced > 0 {
            tracing::info!(rows = synced, "ordinary polling schedule synced");
        }
        let (listener, edge) = bind(&settings).await?;
        let Background {
            executor,
            scheduler,
            expiry,
            retention,
            schedule_config,
        } = Background::build(&settings, &store, sqlite.as_ref(), upstream, &clock, &hints);
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
            credential_key: crate::console::credential_key::CredentialKey::new(
                settings.console_key.as_deref(),
            ),
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
