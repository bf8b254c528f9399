//! The `order-gateway` binary: `order-gateway serve` (see the library docs).

use std::sync::Arc;

use clap::{Parser, Subcommand};
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
}

fn main() -> anyhow::Result<()> {
    // A missing .env is normal; the environment and flags still apply.
    let _ = dotenvy::dotenv();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    let cli = Cli::parse();
    let Command::Serve(settings) = cli.command;
    settings.validate()?;
    tokio::runtime::Runtime::new()?.block_on(async move {
        let app = Application::build(settings, Arc::new(SystemClock)).await?;
        app.run_until_stopped(shutdown_signal()).await
    })
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
