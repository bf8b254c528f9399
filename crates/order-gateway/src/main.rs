//! The `order-gateway` binary: `order-gateway serve` (see the library docs).

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use order_gateway::{Application, Settings};
use rakuten_types::SystemClock;

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
}

fn main() -> ExitCode {
    let cli: Cli = rakuten_cli::start("info", &[]);
    let Command::Serve(settings) = cli.command;
    if let Err(e) = settings.validate() {
        rakuten_cli::exit_invalid::<Cli>(e.name, &e.reason);
    }
    rakuten_cli::exit_on_error(
        tokio::runtime::Runtime::new()
            .map_err(Into::into)
            .and_then(|rt| {
                rt.block_on(async move {
                    let app = Application::build(settings, Arc::new(SystemClock)).await?;
                    app.run_until_stopped(shutdown_signal()).await
                })
            }),
    )
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
