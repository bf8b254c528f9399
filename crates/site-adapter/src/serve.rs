//! Serving an adapter: the protocol router (`trading_worker::site::adapter::server`) over one of
//! the shop's seams, on a loopback listener.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use trading_worker::settings::Secret;
use trading_worker::site::Site;
use trading_worker::site::adapter::server::router;
use trading_worker::site::sim::SimSite;

use crate::browser::BrowserSite;
use crate::driver::BrowserPaths;

/// Which seam an adapter works the shop through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// Plain HTTP (the worker's `sim` seam).
    Http,
    /// Headless Chromium over WebDriver, a screenshot per step.
    Browser,
}

/// A running adapter.
#[derive(Debug)]
pub struct SpawnedAdapter {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    /// The bound address.
    pub addr: SocketAddr,
    browser: Option<Arc<BrowserSite>>,
    shutdown: CancellationToken,
    handle: JoinHandle<std::io::Result<()>>,
}

impl SpawnedAdapter {
    /// Stops serving and closes the browser, if any.
    pub async fn stop(self) {
        self.shutdown.cancel();
        let _ = self.handle.await;
        if let Some(b) = self.browser {
            b.close().await;
        }
    }
}

/// Starts an adapter of `kind` over the shop at `shop_url` on `listener`.
///
/// # Errors
/// The browser does not start.
pub async fn spawn_on(
    listener: TcpListener,
    kind: Kind,
    shop_url: &str,
    session: &str,
    timeout: Duration,
) -> anyhow::Result<SpawnedAdapter> {
    let addr = listener.local_addr()?;
    let (site, browser): (Arc<dyn Site>, _) = match kind {
        Kind::Http => (
            Arc::new(SimSite::new(shop_url, Secret::new(session), timeout)?),
            None,
        ),
        Kind::Browser => {
            let b =
                Arc::new(BrowserSite::start(shop_url, session, &BrowserPaths::default()).await?);
            (b.clone(), Some(b))
        }
    };
    let name = match kind {
        Kind::Http => "shop-sim-http",
        Kind::Browser => "shop-sim-browser",
    };
    let app = router(site, name);
    let shutdown = CancellationToken::new();
    let s = shutdown.clone();
    let handle = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { s.cancelled().await })
            .await
    });
    Ok(SpawnedAdapter {
        url: format!("http://{addr}"),
        addr,
        browser,
        shutdown,
        handle,
    })
}

/// [`spawn_on`] a fresh `127.0.0.1:0` listener.
///
/// # Errors
/// As [`spawn_on`].
pub async fn spawn(
    kind: Kind,
    shop_url: &str,
    session: &str,
    timeout: Duration,
) -> anyhow::Result<SpawnedAdapter> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    spawn_on(listener, kind, shop_url, session, timeout).await
}
