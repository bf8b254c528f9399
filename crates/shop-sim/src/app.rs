//! Building and running the shop: [`Application::build`] binds the listener (port 0 allowed),
//! [`spawn`] runs it in the background for tests and the demo.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::ShopConfig;
use crate::routes;
use crate::store::{Shop, Submission};

/// A bound, not yet running shop.
#[derive(Debug)]
pub struct Application {
    listener: TcpListener,
    addr: SocketAddr,
    shop: Arc<Shop>,
}

impl Application {
    /// Binds the listener.
    ///
    /// # Errors
    /// The address cannot be bound.
    pub async fn build(config: ShopConfig) -> std::io::Result<Self> {
        let listener = TcpListener::bind(config.addr).await?;
        let addr = listener.local_addr()?;
        Ok(Application {
            listener,
            addr,
            shop: Arc::new(Shop::new(config)),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The shop state (tests read submissions and flip faults through it).
    pub fn shop(&self) -> Arc<Shop> {
        self.shop.clone()
    }

    /// Serves until `shutdown` is cancelled.
    ///
    /// # Errors
    /// The server fails.
    pub async fn run_until_stopped(self, shutdown: CancellationToken) -> std::io::Result<()> {
        let app = routes::router(self.shop);
        axum::serve(self.listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await
    }
}

/// A shop running in the background.
#[derive(Debug)]
pub struct SpawnedShop {
    /// Its address.
    pub addr: SocketAddr,
    /// `http://127.0.0.1:<port>`.
    pub base_url: String,
    /// Its state.
    pub shop: Arc<Shop>,
    shutdown: CancellationToken,
    handle: JoinHandle<std::io::Result<()>>,
}

impl SpawnedShop {
    /// Every order submission so far.
    pub fn submissions(&self) -> Vec<Submission> {
        self.shop.submissions()
    }

    /// Stops the server and waits for it.
    pub async fn stop(self) {
        self.shutdown.cancel();
        let _ = self.handle.await;
    }
}

/// Builds and starts a shop in the background.
///
/// # Errors
/// The address cannot be bound.
pub async fn spawn(config: ShopConfig) -> std::io::Result<SpawnedShop> {
    let app = Application::build(config).await?;
    let addr = app.addr();
    let shop = app.shop();
    let shutdown = CancellationToken::new();
    let handle = tokio::spawn(app.run_until_stopped(shutdown.clone()));
    Ok(SpawnedShop {
        addr,
        base_url: format!("http://{addr}"),
        shop,
        shutdown,
        handle,
    })
}
