//! Building and running the application: open the store, bind the listener, start the sweepers
//! (order leases, account queries), the alert job and the webhook delivery, serve until a shutdown signal, then drain (stop accepting,
//! let long-polls return, let the writer commit its last batch). The storage driver is SQLite, or
//! PostgreSQL when `RAKUTEN_GATEWAY_DB_URL` is set ([`Backend`]); on PostgreSQL a `LISTEN` task
//! also feeds other instances' wake-ups to this one's long-polls.

use std::future::Future;
use std::sync::Arc;

use anyhow::Context;
use rakuten_types::Clock;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use web_console::ConsoleKey;

use crate::http::router;
use crate::jobs::alerts::{AlertJob, AlertJobSettings, AlertThresholds};
use crate::jobs::query_sweeper::{QuerySweepSettings, QuerySweeper};
use crate::jobs::sweeper::{LEASE_CLAMP_MARGIN, LeaseGuard, Sweeper};
use crate::jobs::webhooks::{WebhookDelivery, WebhookSettings};
use crate::lease::notify::LeaseNotifier;
use crate::settings::Settings;
use crate::state::AppState;
use crate::store::postgres::PgStore;
use crate::store::sqlite::SqliteStore;
use crate::store::{OperatorStore, OrderStore, QueryStore, StoreError};
use crate::telemetry::GatewayMetrics;

/// The storage driver the settings chose.
#[derive(Debug, Clone)]
pub enum Backend {
    /// The embedded default: one instance, one SQLite file.
    Sqlite(Arc<SqliteStore>),
    /// `RAKUTEN_GATEWAY_DB_URL`: any number of instances on one PostgreSQL database.
    Postgres(Arc<PgStore>),
}

/// `e`, a failure to open the database, with `message` as its context: a
/// [`rakuten_cli::SetupError`] naming `var` unless a migration failed (D-exit-2-or-3), exit 3
/// when `server` (PostgreSQL) did not answer — no connection, none in time, still starting, out
/// of connections: a restart retries (D-exit-2-or-3) — else 2 (a URL that does not parse, a
/// role or database that does not exist, a wrong password, an SQLite file).
fn opening(e: StoreError, var: &'static str, message: String, server: bool) -> anyhow::Error {
    if let StoreError::Database(d) = &e
        && let Some(foreign) = rakuten_cli::SetupError::foreign_migration(d, var)
            .or_else(|| rakuten_cli::SetupError::missing_schema(d, var))
    {
        return anyhow::Error::new(e).context(foreign);
    }
    let migration = matches!(&e, StoreError::Database(d) if matches!(**d, sqlx::Error::Migrate(_)));
    let not_answering = match &e {
        StoreError::Unavailable(_) | StoreError::Busy(_) => true,
        StoreError::Database(d) => match &**d {
            sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut => true,
            sqlx::Error::Database(db) => matches!(db.code().as_deref(), Some("57P03" | "53300")),
            _ => false,
        },
        _ => false,
    };
    let e = anyhow::Error::new(e);
    if migration {
        e.context(message)
    } else if server && not_answering {
        e.context(rakuten_cli::SetupError::unavailable(var, message))
    } else {
        e.context(rakuten_cli::SetupError::new(var, message))
    }
}

impl Backend {
    /// Opens the driver the settings name (PostgreSQL when `db_url` is set, else SQLite).
    ///
    /// # Errors
    /// The database cannot be opened or migrated.
    /// A database that cannot be reached, opened or written is a [`rakuten_cli::SetupError`]
    /// naming its variable (exit 3 for PostgreSQL not answering, 2 for an SQLite file); a failed
    /// migration is not (exit 1) (D-exit-2-or-3).
    pub async fn open(settings: &Settings) -> anyhow::Result<Self> {
        let path = settings.db_path.display();
        Ok(match &settings.db_url {
            Some(url) => Backend::Postgres(Arc::new(PgStore::open(url.expose()).await.map_err(
                |e| {
                    opening(
                        e,
                        "RAKUTEN_GATEWAY_DB_URL",
                        format!(
                            "opening the PostgreSQL database {} (RAKUTEN_GATEWAY_DB_URL): is it \
                             running and reachable, and does the database exist?",
                            redact_url(url.expose())
                        ),
                        true,
                    )
                },
            )?)),
            None => Backend::Sqlite(Arc::new(
                SqliteStore::open(&settings.db_path).await.map_err(|e| {
                    let held = match &e {
                        StoreError::Database(d) => sqlite_writer::FileLock::held_elsewhere(d),
                        _ => None,
                    };
                    if let Some(held) = held {
                        // Another gateway writes this file (D-one-process-per-sqlite-file).
                        let message = format!(
                            "opening the SQLite database {path} (RAKUTEN_GATEWAY_DB_PATH): {held}"
                        );
                        // `held` already says all the lock's error would (said twice
                        // otherwise): the setup error alone.
                        return anyhow::Error::new(rakuten_cli::SetupError::unavailable(
                            "RAKUTEN_GATEWAY_DB_PATH",
                            message,
                        ));
                    }
                    if matches!(&e, StoreError::Database(d) if crate::store::is_read_only(d)) {
                        let ro = format!(
                            "the SQLite database {path} (RAKUTEN_GATEWAY_DB_PATH) is read-only: \
                             this user cannot write the file or its folder (WAL mode writes its \
                             -wal and -shm files beside it)"
                        );
                        return anyhow::Error::new(e)
                            .context(rakuten_cli::SetupError::new("RAKUTEN_GATEWAY_DB_PATH", ro));
                    }
                    opening(
                        e,
                        "RAKUTEN_GATEWAY_DB_PATH",
                        format!(
                            "opening the SQLite database {path} (RAKUTEN_GATEWAY_DB_PATH): the \
                             file must be an SQLite database, and it and its folder writable"
                        ),
                        false,
                    )
                })?,
            )),
        })
    }

    fn order_store(&self) -> Arc<dyn OrderStore> {
        match self {
            Backend::Sqlite(s) => s.clone(),
            Backend::Postgres(s) => s.clone(),
        }
    }

    fn operator_store(&self) -> Arc<dyn OperatorStore> {
        match self {
            Backend::Sqlite(s) => s.clone(),
            Backend::Postgres(s) => s.clone(),
        }
    }

    fn query_store(&self) -> Arc<dyn QueryStore> {
        match self {
            Backend::Sqlite(s) => s.clone(),
            Backend::Postgres(s) => s.clone(),
        }
    }
}

/// A built, bound, not yet running gateway.
#[derive(Debug)]
pub struct Application {
    listener: TcpListener,
    port: u16,
    state: AppState,
    backend: Backend,
    sweeper: Sweeper,
    query_sweeper: QuerySweeper,
    alert_job: AlertJob,
    webhooks: WebhookDelivery,
    shutdown: CancellationToken,
    edge: rakuten_edge::EdgeConfig,
}

impl Application {
    /// Validates `settings`, opens and migrates the database, binds the listener.
    ///
    /// # Errors
    /// Invalid settings, an unopenable database or an unbindable address.
    pub async fn build(settings: Settings, clock: Arc<dyn Clock>) -> anyhow::Result<Self> {
        settings.validate()?;
        let addr = settings.listen_addr()?;
        let edge = settings.edge.edge_config()?;
        rakuten_edge::warn_if_plain_public("order-gateway", addr, edge.tls.is_some());
        let backend = Backend::open(&settings).await?;
        let listener =
            rakuten_edge::bind(addr, ("RAKUTEN_GATEWAY_HOST", "RAKUTEN_GATEWAY_PORT")).await?;
        let port = listener.local_addr()?.port();
        let notifier = LeaseNotifier::new();
        let shutdown = CancellationToken::new();
        let dyn_store = backend.order_store();
        let metrics = Arc::new(GatewayMetrics::new());
        let sweeper = Sweeper::new(
            dyn_store.clone(),
            clock.clone(),
            notifier.clone(),
            settings.sweep_interval(),
            AlertThresholds {
                worker_offline: settings.worker_offline_alert(),
                queued: settings.queued_alert(),
            },
        )
        .with_lease_guard(LeaseGuard {
            max_lease: Some(settings.lease_ttl() + LEASE_CLAMP_MARGIN),
            skew_alert: settings.clock_skew_alert(),
        })
        .with_metrics(metrics.clone());
        tracing::info!(
            instance_id = sweeper.instance_id(),
            "clock signals and clock alerts name this instance so"
        );
        let query_store = backend.query_store();
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
        // Console sessions carry a fingerprint of their token keyed like the session cookie
        // (D-console-session-bound-to-token).
        let credentials = Arc::new(
            settings
                .credentials()?
                .with_session_key(settings.console_key.as_ref().map(|k| k.expose())),
        );
        let console_key = ConsoleKey::new(settings.console_key.as_ref().map(|k| k.expose()));
        let ops = backend.operator_store();
        let alert_job = AlertJob::new(
            ops.clone(),
            dyn_store.clone(),
            query_store.clone(),
            query_notifier.clone(),
            clock.clone(),
            AlertJobSettings {
                interval: settings.sweep_interval(),
                thresholds: AlertThresholds {
                    worker_offline: settings.worker_offline_alert(),
                    queued: settings.queued_alert(),
                },
                webhook_failing_after: settings.alerts.webhook_failing_after,
                webhook_urls: settings.alerts.urls(),
                evidence_margin: std::time::Duration::from_secs_f64(
                    settings.alerts.stale_evidence_margin_seconds,
                ),
                query_max_attempts: i64::from(settings.query_max_attempts),
                worker_retention: settings.worker_retention(),
            },
            metrics.clone(),
        );
        let webhooks = WebhookDelivery::new(
            ops.clone(),
            dyn_store.clone(),
            clock.clone(),
            WebhookSettings::from_settings(&settings.alerts, settings.sweep_interval()),
            metrics.clone(),
        )?;
        if let Backend::Sqlite(s) = &backend {
            let m = metrics.clone();
            s.on_commit(Box::new(move |ops, took| m.observe_commit(ops, took)));
        }
        let state = AppState {
            store: dyn_store,
            ops,
            clock,
            settings: Arc::new(settings),
            lease_notifier: notifier,
            queries: query_store,
            query_notifier,
            metrics,
            credentials,
            shutdown: shutdown.clone(),
            console_key,
        };
        Ok(Application {
            listener,
            port,
            state,
            backend,
            sweeper,
            query_sweeper,
            alert_job,
            webhooks,
            shutdown,
            edge,
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
    ///
    /// # Panics
    /// When the gateway runs on PostgreSQL (`RAKUTEN_GATEWAY_DB_URL`); use
    /// [`backend`](Self::backend) where either driver may be in use.
    pub fn sqlite_store(&self) -> Arc<SqliteStore> {
        match &self.backend {
            Backend::Sqlite(s) => s.clone(),
            Backend::Postgres(_) => panic!("sqlite_store() called on a PostgreSQL gateway"),
        }
    }

    /// The storage driver in use.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The sweeper, so tests can call `run_once(now)` directly.
    pub fn sweeper(&self) -> Sweeper {
        self.sweeper.clone()
    }

    /// The account-query sweeper, so tests can call `run_once(now)` directly.
    pub fn query_sweeper(&self) -> QuerySweeper {
        self.query_sweeper.clone()
    }

    /// The alert job, so tests can call `run_once(now)` directly.
    pub fn alert_job(&self) -> AlertJob {
        self.alert_job.clone()
    }

    /// The webhook delivery job, so tests can call `run_once(now)` directly.
    pub fn webhooks(&self) -> WebhookDelivery {
        self.webhooks.clone()
    }

    /// Serves until `shutdown` completes, then drains: waiting long-polls return at once, the
    /// sweeper stops, in-flight requests finish (connections still open after
    /// `RAKUTEN_GATEWAY_SHUTDOWN_DEADLINE_SECONDS` are dropped), the writer commits what it
    /// accepted. HTTP goes through `rakuten_edge::serve` (TLS, timeouts, connection cap).
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
        let alert_job = tokio::spawn(self.alert_job.run(token.clone()));
        let webhooks = tokio::spawn(self.webhooks.run(token.clone()));
        // Other instances' commits wake this instance's long-polls.
        let listener = match &self.backend {
            Backend::Postgres(pg) => Some(pg.spawn_listener(
                self.state.lease_notifier.clone(),
                self.state.query_notifier.clone(),
                token.clone(),
            )),
            Backend::Sqlite(_) => None,
        };
        let settings = self.state.settings.clone();
        let app = router(self.state);
        let (storage, database) = match &settings.db_url {
            Some(url) => ("postgres", redact_url(url.expose())),
            None => ("sqlite", settings.db_path.display().to_string()),
        };
        let addr = self
            .listener
            .local_addr()
            .map_or_else(|_| format!("port {}", self.port), |a| a.to_string());
        let tls = self.edge.tls.is_some();
        tracing::info!(addr = %addr, storage, database = %database, tls, "order-gateway listening on {addr} ({storage}: {database})");
        let served = rakuten_edge::serve(self.listener, app, self.edge, async move {
            shutdown.await;
            tracing::info!("shutting down: no new connections, draining");
            token.cancel();
        })
        .await;
        self.shutdown.cancel();
        let _ = sweeper.await;
        let _ = query_sweeper.await;
        let _ = alert_job.await;
        let _ = webhooks.await;
        if let Some(l) = listener {
            let _ = l.await;
        }
        self.backend.order_store().close().await;
        tracing::info!("order-gateway stopped");
        served.context("serving HTTP")
    }
}

/// A database URL fit for a log line or an error: the password (if any) replaced by `***`, the
/// query (which may hold one) not shown.
fn redact_url(url: &str) -> String {
    // Parsed, not split by hand: a password may also sit in the query (`?password=…`), which
    // is never shown (D-database-url-printing).
    let Ok(u) = reqwest::Url::parse(url) else {
        return "***".into();
    };
    let mut s = format!("{}://", u.scheme());
    if !u.username().is_empty() {
        s.push_str(u.username());
        if u.password().is_some() {
            s.push_str(":***");
        }
        s.push('@');
    }
    s.push_str(u.host_str().unwrap_or(""));
    if let Some(port) = u.port() {
        s.push_str(&format!(":{port}"));
    }
    s.push_str(u.path());
    if u.query().is_some() {
        s.push_str("?(parameters not shown)");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn a_database_url_in_the_start_line_never_shows_its_password() {
        assert_eq!(
            redact_url("postgres://gw:s3cret@db:5432/gateway"),
            "postgres://gw:***@db:5432/gateway"
        );
        assert_eq!(redact_url("postgres://db/gateway"), "postgres://db/gateway");
        assert_eq!(redact_url("nonsense"), "***");
        // D-database-url-printing: a password in the query was printed.
        for url in [
            "postgres://postgres@127.0.0.1/gw?password=SeCrEt77",
            "postgresql:///gw?host=/run/postgresql&user=gw&password=SeCrEt77",
        ] {
            let shown = redact_url(url);
            assert!(!shown.contains("SeCrEt77"), "{shown}");
            assert!(shown.ends_with("/gw?(parameters not shown)"), "{shown}");
        }
    }
}
