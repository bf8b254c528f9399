//! Building and running the application: open the store, bind the listener, start the sweepers
//! (order leases, account queries), serve until a shutdown signal, then drain (stop accepting,
//! let long-polls return, let the writer commit its last batch).

use std::future::Future;
use std::sync::Arc;

use anyhow::Context;
use rakuten_types::Clock;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::http::{AppState, router};
use crate::jobs::alerts::AlertThresholds;
use crate::jobs::query_sweeper::{QuerySweepSettings, QuerySweeper};
use crate::jobs::sweeper::Sweeper;
use crate::lease::notify::LeaseNotifier;
use crate::settings::Settings;
use crate::store::sqlite::SqliteStore;
use crate::store::{OrderStore, QueryStore};

/// A built, bound, not yet running gateway.
#[derive(Debug)]
pub struct Application {
    listener: TcpListener,
    port: u16,
    state: AppState,
    store: Arc<SqliteStore>,
    sweeper: Sweeper,
    query_sweeper: QuerySweeper,
    shutdown: CancellationToken,
}

impl Application {
    /// Validates `settings`, opens and migrates the database, binds the listener.
    ///
    /// # Errors
    /// Invalid settings, an unopenable database or an unbindable address.
    pub async fn build(settings: Settings, clock: Arc<dyn Clock>) -> anyhow::Result<Self> {
        settings.validate()?;
        let addr = settings.listen_addr()?;
        let store = Arc::new(
            SqliteStore::open(&settings.db_path)
                .await
                .with_context(|| format!("opening database {}", settings.db_path.display()))?,
        );
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding {addr}"))?;
        let port = listener.local_addr()?.port();
        let notifier = LeaseNotifier::new();
        let shutdown = CancellationToken::new();
        let dyn_store: Arc<dyn OrderStore> = store.clone();
        let sweeper = Sweeper::new(
            dyn_store.clone(),
            clock.clone(),
            notifier.clone(),
            settings.sweep_interval(),
            AlertThresholds {
                worker_offline: settings.worker_offline_alert(),
                queued: settings.queued_alert(),
            },
        );
        let query_store: Arc<dyn QueryStore> = store.clone();
        let query_notifier = LeaseNotifier::new();
        let query_sweeper = QuerySweeper::new(
            query_store.clone(),
            clock.clone(),
            query_notifier.clone(),
            QuerySweepSettings {
                interval: settings.sweep_interval(),
                query_ttl: settings.query_ttl(),
                retention: settings.query_retention(),
            },
        );
        let state = AppState {
            store: dyn_store,
            clock,
            settings: Arc::new(settings),
            lease_notifier: notifier,
            queries: query_store,
            query_notifier,
            shutdown: shutdown.clone(),
        };
        Ok(Application {
            listener,
            port,
            state,
            store,
            sweeper,
            query_sweeper,
            shutdown,
        })
    }

    /// The bound port (useful with port 0).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The shared handler state (store, clock, settings, notifier).
    pub fn state(&self) -> AppState {
        self.state.clone()
    }

    /// The SQLite store (write statistics for benchmarks).
    pub fn sqlite_store(&self) -> Arc<SqliteStore> {
        self.store.clone()
    }

    /// The sweeper, so tests can call `run_once(now)` directly.
    pub fn sweeper(&self) -> Sweeper {
        self.sweeper.clone()
    }

    /// The account-query sweeper, so tests can call `run_once(now)` directly.
    pub fn query_sweeper(&self) -> QuerySweeper {
        self.query_sweeper.clone()
    }

    /// Serves until `shutdown` completes, then drains: waiting long-polls return at once, the
    /// sweeper stops, in-flight requests finish, the writer commits what it accepted.
    ///
    /// # Errors
    /// I/O errors of the server.
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let token = self.shutdown.clone();
        let sweeper = tokio::spawn(self.sweeper.run(token.clone()));
        let query_sweeper = tokio::spawn(self.query_sweeper.run(token.clone()));
        let app = router(self.state);
        tracing::info!(port = self.port, "order-gateway listening");
        let served = axum::serve(self.listener, app)
            .with_graceful_shutdown(async move {
                shutdown.await;
                tracing::info!("shutting down: no new connections, draining");
                token.cancel();
            })
            .await;
        self.shutdown.cancel();
        let _ = sweeper.await;
        let _ = query_sweeper.await;
        self.store.close().await;
        tracing::info!("order-gateway stopped");
        served.context("serving HTTP")
    }
}
