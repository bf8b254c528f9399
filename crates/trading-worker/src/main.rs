//! `trading-worker run`: the local trading worker as a process (settings from the environment and
//! `.env`; see `trading_worker::settings`).

use std::process::ExitCode;
use std::sync::Arc;

use rakuten_types::SystemClock;
use tokio_util::sync::CancellationToken;
use trading_worker::Worker;
use trading_worker::settings::{Cli, Command, Valid};

fn main() -> ExitCode {
    let Cli {
        command: Command::Run(settings),
    } = rakuten_cli::start("info", &[]);
    let valid = match settings.validate() {
        Ok(v) => v,
        Err(e) => rakuten_cli::exit_invalid::<Cli>(e.name, &e.reason),
    };
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => return rakuten_cli::exit_on_error(Err(e.into())),
    };
    rakuten_cli::exit_on_error(rt.block_on(run(valid)))
}

async fn run(valid: Valid) -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    let s = shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutdown requested");
        s.cancel();
    });
    if valid.gateway_url.is_none() {
        tracing::warn!(
            "RAKUTEN_ORDER_GATEWAY_URL is empty: the order loop is not started (spec §7); idling until shutdown"
        );
        shutdown.cancelled().await;
        return Ok(());
    }
    tracing::info!(worker_id = %valid.worker_id, site = %valid.site, db = %valid.db_path.display(), evidence = %valid.evidence_dir.display(), "trading worker starting");
    let worker = Worker::build(valid, Arc::new(SystemClock), shutdown).await?;
    worker.clone().run().await;
    worker.close().await;
    Ok(())
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
