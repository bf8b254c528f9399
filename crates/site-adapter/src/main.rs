//! `site-adapter serve`: an adapter for the simulated shop on a loopback port (the worker's
//! `RAKUTEN_SITE=adapter`), working the shop through plain HTTP or headless Chromium.

use std::net::SocketAddr;
use std::time::Duration;

use site_adapter::serve::{Kind, spawn_on};

/// `site-adapter` command line.
#[derive(Debug, clap::Parser)]
#[command(
    name = "site-adapter",
    version,
    about = "Site adapters for the simulated shop"
)]
enum Cli {
    /// Serve the adapter protocol until Ctrl-C.
    Serve {
        /// Listen address (loopback: the adapter holds the account's session).
        #[arg(
            long,
            env = "RAKUTEN_SITE_ADAPTER_LISTEN",
            default_value = "127.0.0.1:31111"
        )]
        listen: SocketAddr,
        /// The simulated shop.
        #[arg(long, env = "RAKUTEN_SITE_BASE_URL")]
        shop_url: String,
        /// The shop's session cookie.
        #[arg(
            long,
            env = "RAKUTEN_SITE_SESSION",
            default_value = "sim-session",
            hide_env_values = true
        )]
        session: String,
        /// `http` or `browser`.
        #[arg(
            long,
            env = "RAKUTEN_SITE_ADAPTER_KIND",
            value_enum,
            default_value = "browser"
        )]
        kind: Kind,
        /// Write the bound address (`127.0.0.1:PORT`) to this file once listening, so that a
        /// caller can ask for port 0 and learn the port (tests, the chaos harness).
        #[arg(long, env = "RAKUTEN_SITE_ADAPTER_ADDR_FILE")]
        addr_file: Option<std::path::PathBuf>,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Cli::Serve {
        listen,
        shop_url,
        session,
        kind,
        addr_file,
    } = rakuten_cli::start("info", &[]);
    anyhow::ensure!(
        listen.ip().is_loopback(),
        "--listen {listen}: an adapter listens on loopback only"
    );
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let a = spawn_on(listener, kind, &shop_url, &session, Duration::from_secs(30)).await?;
    let kind_name = match kind {
        Kind::Http => "http",
        Kind::Browser => "browser",
    };
    if let Some(f) = &addr_file {
        // Written whole then renamed, so a reader never sees half an address.
        let tmp = f.with_extension("tmp");
        std::fs::write(&tmp, a.addr.to_string())?;
        std::fs::rename(&tmp, f)?;
    }
    tracing::info!(url = %a.url, kind = kind_name, shop = %shop_url, "site adapter serving");
    // SIGTERM as well as Ctrl-C: either way the WebDriver session is ended, which is what takes
    // Chromium down with it (Chromium runs in its own process group; a plain exit leaks it).
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    a.stop().await;
    Ok(())
}
