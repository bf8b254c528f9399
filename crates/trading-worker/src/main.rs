//! `trading-worker run`: the local trading worker as a process (settings from the environment and
//! `.env`; see `trading_worker::settings`). `trading-worker adapter-check`: the site adapter
//! protocol's conformance kit (`trading_worker::site::adapter::check`).

use std::process::ExitCode;
use std::sync::Arc;

use rakuten_types::SystemClock;
use tokio_util::sync::CancellationToken;
use trading_worker::Worker;
use trading_worker::settings::{AdapterCheckArgs, Cli, Command, Valid};
use trading_worker::site::adapter::check::Kit;
use trading_worker::site::adapter::{AdapterSite, check_adapter_url};

fn main() -> ExitCode {
    let Cli { command } = rakuten_cli::start("info", &[]);
    let settings = match command {
        Command::Run(s) => s,
        Command::AdapterCheck(a) => {
            return match tokio::runtime::Runtime::new() {
                Ok(rt) => rakuten_cli::exit_on_error(rt.block_on(adapter_check(a))),
                Err(e) => rakuten_cli::exit_on_error(Err(e.into())),
            };
        }
    };
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
