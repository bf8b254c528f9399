//! `trading-worker run`: the local trading worker as a process (settings from the environment and
//! `.env`; see `trading_worker::settings`). `trading-worker adapter-check`: the site adapter
//! protocol's conformance kit (`trading_worker::site::adapter::check`).

use std::sync::Arc;

use clap::Parser;
use rakuten_types::SystemClock;
use tokio_util::sync::CancellationToken;
use trading_worker::Worker;
use trading_worker::settings::{AdapterCheckArgs, Cli, Command};
use trading_worker::site::adapter::check::Kit;
use trading_worker::site::adapter::{AdapterSite, check_adapter_url};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // A missing .env is normal; the environment wins over it.
    let _ = dotenvy::dotenv();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        // fmt writes to stdout: colour codes only when a terminal reads them, not in log files.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    let settings = match Cli::parse().command {
        Command::Run(s) => s,
        Command::AdapterCheck(a) => return adapter_check(a).await,
    };
    let valid = settings.validate()?;
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
    tracing::info!(worker_id = %valid.worker_id, site = ?valid.site, db = %valid.db_path.display(), evidence = %valid.evidence_dir.display(), "trading worker starting");
    let worker = Worker::build(valid, Arc::new(SystemClock), shutdown).await?;
    worker.run().await;
    Ok(())
}

/// `trading-worker adapter-check`: one line per check; an error when one fails.
async fn adapter_check(a: AdapterCheckArgs) -> anyhow::Result<()> {
    let url = check_adapter_url(&a.url, a.allow_remote)?;
    let timeout = std::time::Duration::try_from_secs_f64(a.timeout_seconds)?;
    let kit = Kit::new(AdapterSite::new(&url, timeout)?, &a.shop_url);
    let results = kit.run().await;
    for r in &results {
        println!("{r}");
    }
    let failed = results.iter().filter(|r| !r.passed).count();
    println!(
        "{} of {} checks passed",
        results.len() - failed,
        results.len()
    );
    anyhow::ensure!(failed == 0, "{failed} conformance checks failed");
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
