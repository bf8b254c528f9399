//! The `order-gateway` binary: `order-gateway serve` runs the server; `order-gateway ops …` is
//! the operator's CLI against a running gateway (see the library docs, `order_gateway::ops`).

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use order_gateway::ops::{self, OpsArgs};
use order_gateway::{Application, Settings};
use rakuten_types::SystemClock;
use tracing_subscriber::EnvFilter;

/// Durable, leased, at-most-once order task queue (spec order-gateway.md).
#[derive(Debug, Parser)]
#[command(name = "order-gateway", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the HTTP server. Every option can also be set through its RAKUTEN_* variable or `.env`.
    Serve(Settings),
    /// Operator commands against a running gateway (RAKUTEN_GATEWAY_URL, RAKUTEN_OPS_TOKEN).
    /// Exit codes: 0 done, 1 refused, 2 usage, 3 not found, 4 token refused, 5 unavailable.
    Ops(OpsArgs),
}

fn main() -> anyhow::Result<ExitCode> {
    // A missing .env is normal; the environment and flags still apply.
    let _ = dotenvy::dotenv();
    let cli = Cli::parse();
    let settings = match cli.command {
        Command::Serve(settings) => settings,
        Command::Ops(args) => return Ok(ops_main(&args)),
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    settings.validate()?;
    tokio::runtime::Runtime::new()?.block_on(async move {
        let app = Application::build(settings, Arc::new(SystemClock)).await?;
        app.run_until_stopped(shutdown_signal()).await
    })?;
    Ok(ExitCode::SUCCESS)
}

/// `order-gateway ops`: logs (warnings only by default) go to standard error so that standard
/// output holds the answer alone.
fn ops_main(args: &OpsArgs) -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let status = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(ops::run(
            args,
            &mut std::io::stdout().lock(),
            &mut std::io::stderr(),
        )),
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            ops::ExitStatus::Unavailable
        }
    };
    ExitCode::from(status as u8)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
