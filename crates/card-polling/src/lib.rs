//! `card-polling`: the priority polling queue of spec `priority-polling-queue.md` with the small
//! host domain it needs, and the scheduler that runs ordinary polling, the ordinary
//! manual trigger and the priority lane through one executor pool.
//!
//! Layout, one file per concept:
//! - [`settings`]: clap + `RAKUTEN_POLL_*` settings, parsed and validated (secrets are
//!   [`rakuten_types::Secret`]).
//! - [`startup`]: what start-up builds from the settings: the carrier, the hint channel, the
//!   store, each failure named by its variable.
//! - [`app`]: `Application::build(settings, clock, upstream)`, serving and background loops.
//! - [`scheduler`]: one cycle = priority hints, manual triggers, the recovery read, ordinary
//!   shard batches ([`scheduler::cycle`]); [`scheduler::shard_queue`] (card → shard),
//!   [`scheduler::backpressure`] (skip rule).
//! - [`hints`]: the hint and manual lanes per task type over one channel trait:
//!   [`hints::memory`] (in-process, default) and [`hints::redis`].
//! - [`executor`]: the one executor (the normal poll content for priority items and ordinary
//!   polls), [`executor::pool`] (per-task-type execution queues with a concurrency cap) and
//!   [`executor::clock_guard`] (no claims while this instance's clock is off from a shared
//!   database's).
//! - [`manual_trigger`]: the ordinary manual trigger (daily quota, 24 h dedupe).
//! - [`domain`]: shops and the agent hierarchy, accounts/roles/token hashes and scope, assets
//!   (cards, devices, bindings), package orders and usages, configured task types; the key,
//!   account and shop-name rules with their OpenAPI schemas ([`domain::key`]).
//! - [`priority`]: constants (`MAX_ATTEMPTS`, `CLAIM_LEASE`, `VALIDITY`),
//!   [`priority::item_status`] (state machine), [`priority::trigger`] (trigger enum and the
//!   renewal rule), [`priority::manual`] (enqueue, close, retrigger),
//!   enqueue-side rules; execution is in [`executor`].
//! - [`upstream`]: the carrier trait, the simulated carrier ([`upstream::sim`]) and the HTTP
//!   carrier adapter ([`upstream::http`], `RAKUTEN_POLL_CARRIER_URL`).
//! - [`store`]: the storage contract (the single door to the database), one narrow trait per
//!   capability ([`store::capability`]) with its error and request/view types, and its one SQL
//!   implementation (`store/sql/`, with the engine differences in `store/dialect.rs`), compiled for
//!   SQLite ([`store::sqlite`], the default; `migrations/sqlite`) and PostgreSQL
//!   ([`store::postgres`], `RAKUTEN_POLL_DB_URL`; `migrations/postgres`).
//! - [`state`]: [`state::AppState`], what every handler and console page is given, and the
//!   token → account lookup both ask ([`state::AppState::account_of_token`]).
//! - [`http`]: error, auth, extractors, the OpenAPI document and one route file per resource.
//! - [`console`]: the operator console at `/console`: items, exceptions, queue depths
//!   and the last cycle, close/retrigger with a reason, scoped to the signed-in account.
//! - [`instance`]: the per-process instance id and the claim-token fingerprint that audit facts
//!   of system transitions record.
//! - [`jobs`]: the periodic expiry job ([`jobs::expiry`]), the retention job that keeps the
//!   history tables bounded ([`jobs::retention`]) and the check of the stored
//!   schedule configuration against this instance's ([`jobs::schedule_config`]).
//! - [`telemetry`]: `/metrics` (Prometheus text); probes `/livez`, `/readyz` are in
//!   [`http::routes::health`].

pub mod app;
pub mod console;
pub mod domain;
pub mod executor;
pub mod hints;
pub mod http;
pub mod instance;
pub mod jobs;
pub mod manual_trigger;
pub mod priority;
pub mod scheduler;
pub mod settings;
pub mod startup;
pub mod state;
pub mod store;
pub mod telemetry;
pub mod upstream;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

pub use app::Application;
pub use settings::Settings;

/// `card-polling serve`: the system clock, the carrier from the settings (HTTP when
/// `RAKUTEN_POLL_CARRIER_URL` is set, else simulated), HTTP, the
/// scheduler, the executor pool and the expiry job, until Ctrl-C or SIGTERM.
///
/// # Errors
/// Start-up or server failures.
pub async fn serve(settings: Settings) -> anyhow::Result<()> {
    let upstream = startup::carrier(&settings)?;
    let ip = settings.listen_addr().ip();
    let (storage, database) = match settings.db_url {
        // Scheme, host, port and database, never the password (D-database-url-printing).
        Some(ref url) => ("postgres", startup::printable_url(url.expose())),
        None => ("sqlite", settings.db_path.display().to_string()),
    };
    let app = Application::build(settings, Arc::new(rakuten_types::SystemClock), upstream).await?;
    let addr = std::net::SocketAddr::new(ip, app.port());
    tracing::info!(addr = %addr, storage, database = %database, "card-polling listening on {addr} ({storage}: {database})");
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let signal = shutdown_signal().await;
        tracing::info!(signal, "shutting down (signal {signal})");
        stop.cancel();
    });
    let stopped = app.run_until_stopped(shutdown).await;
    tracing::info!("card-polling stopped");
    stopped
}

/// Waits for Ctrl-C (SIGINT) or SIGTERM and names it. A signal whose handler cannot be installed
/// is never awaited as if it had arrived (the service would stop at once).
async fn shutdown_signal() -> &'static str {
    let ctrl_c = async {
        match tokio::signal::ctrl_c().await {
            Ok(()) => "SIGINT",
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for Ctrl-C (SIGINT)");
                std::future::pending().await
            }
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
                "SIGTERM"
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending().await
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<&'static str>();
    tokio::select! {
        s = ctrl_c => s,
        s = term => s,
    }
}
