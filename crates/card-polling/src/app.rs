//! `Application::build`: opens the store, records the feature's go-live instant, binds the
//! listener and wires the router, the executor and the expiry job.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use rakuten_types::Clock;

use crate::domain::TokenHash;
use crate::http::{AppState, router};
use crate::jobs::expiry::ExpiryJob;
use crate::priority::executor::Executor;
use crate::priority::hints::NoHints;
use crate::settings::Settings;
use crate::store::Store;
use crate::store::sqlite::SqliteStore;
use crate::upstream::Upstream;

/// A built, not yet serving, application.
pub struct Application {
    listener: TcpListener,
    state: AppState,
    sqlite: SqliteStore,
    executor: Executor,
    expiry: ExpiryJob,
    executor_tick: Duration,
}

impl std::fmt::Debug for Application {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Application")
            .field("addr", &self.listener.local_addr().ok())
            .finish_non_exhaustive()
    }
}

impl Application {
    /// Builds everything from validated settings, an injected clock and a carrier.
    ///
    /// # Errors
    /// Database open/migration failures, or the listen address cannot be bound.
    pub async fn build(
        settings: Settings,
        clock: Arc<dyn Clock>,
        upstream: Arc<dyn Upstream>,
    ) -> anyhow::Result<Self> {
        let sqlite = SqliteStore::open(&settings.db_path).await?;
        let store: Arc<dyn Store> = Arc::new(sqlite.clone());
        let enabled_at = store.meta_feature_enabled_at(clock.now()).await?;
        tracing::info!(%enabled_at, "priority polling feature enabled since");
        let listener = TcpListener::bind(settings.listen).await?;
        let executor = Executor::new(
            store.clone(),
            upstream,
            clock.clone(),
            settings.task_types.clone(),
            settings.executor_batch,
            settings.executor_concurrency as usize,
        );
        let expiry = ExpiryJob::new(
            store.clone(),
            clock.clone(),
            Duration::from_secs(settings.expiry_every_secs),
        );
        let state = AppState {
            store,
            clock,
            task_types: settings.task_types.clone(),
            admin_token_hash: Arc::new(TokenHash::of(settings.admin_token.expose())),
            hints: Arc::new(NoHints),
        };
        Ok(Application {
            listener,
            state,
            sqlite,
            executor,
            expiry,
            executor_tick: Duration::from_millis(settings.executor_tick_ms),
        })
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.listener.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    /// Handler state (store, clock, task types).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// The SQLite store (fixtures and benchmarks).
    pub fn sqlite(&self) -> &SqliteStore {
        &self.sqlite
    }

    /// The executor.
    pub fn executor(&self) -> &Executor {
        &self.executor
    }

    /// The expiry job.
    pub fn expiry(&self) -> &ExpiryJob {
        &self.expiry
    }

    /// Serves HTTP only, until `shutdown` (tests drive the executor and jobs themselves).
    ///
    /// # Errors
    /// Server failures.
    pub async fn serve_http(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        axum::serve(self.listener, router(self.state))
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await?;
        Ok(())
    }

    /// Serves HTTP and runs the executor timer and the expiry job until `shutdown`.
    ///
    /// # Errors
    /// Server failures.
    pub async fn run_until_stopped(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let tasks = tokio_util::task::TaskTracker::new();
        tasks.spawn(self.expiry.clone().run(shutdown.clone()));
        let (executor, clock, tick, stop) = (
            self.executor.clone(),
            self.state.clock.clone(),
            self.executor_tick,
            shutdown.clone(),
        );
        tasks.spawn(async move {
            loop {
                if let Err(e) = executor.run_once(clock.now()).await {
                    tracing::warn!(error = %e, "executor round failed");
                }
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(tick) => {}
                }
            }
        });
        tasks.close();
        let r = self.serve_http(shutdown).await;
        tasks.wait().await;
        r
    }
}
