//! `shop-sim serve --port …`: the simulated shop as a process.

use clap::Parser;
use shop_sim::config::{Cli, Command};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        // fmt writes to stdout: colour codes only when a terminal reads them, not in log files.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    let Cli {
        command: Command::Serve(args),
    } = Cli::parse();
    let app = shop_sim::Application::build(args.into_config()).await?;
    tracing::info!(addr = %app.addr(), "shop-sim listening");
    if let Some(file) = &args.addr_file {
        rakuten_edge::write_addr_file(file, app.addr())?;
    }
    let shutdown = CancellationToken::new();
    let s = shutdown.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        s.cancel();
    });
    app.run_until_stopped(shutdown).await?;
    Ok(())
}
