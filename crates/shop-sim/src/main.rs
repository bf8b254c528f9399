//! `shop-sim serve --port …`: the simulated shop as a process.

use std::process::ExitCode;

use shop_sim::config::{Cli, Command, DEPRECATED_ENV};
use tokio_util::sync::CancellationToken;

fn main() -> ExitCode {
    let Cli {
        command: Command::Serve(args),
    } = rakuten_cli::start("info", &DEPRECATED_ENV);
    rakuten_cli::exit_on_error(
        tokio::runtime::Runtime::new()
            .map_err(Into::into)
            .and_then(|rt| rt.block_on(serve(args))),
    )
}

async fn serve(args: shop_sim::config::ServeArgs) -> anyhow::Result<()> {
    let app = shop_sim::Application::build(args.into_config()).await?;
    tracing::info!(addr = %app.addr(), "shop-sim listening on {}", app.addr());
    let shutdown = CancellationToken::new();
    let s = shutdown.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        s.cancel();
    });
    app.run_until_stopped(shutdown).await?;
    Ok(())
}
