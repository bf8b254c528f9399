//! The harness's gateway client (upstream, operator, checks): the shared `gateway-client`,
//! direct to the gateway(s), not through the proxy, retrying transient failures (transport
//! errors, 5xx) on the next gateway for up to [`PATIENCE`] while a gateway is being restarted.
//! Only the HTTP API is used, so the checks work unchanged on any gateway storage backend.

use std::time::Duration;

use anyhow::Context;
pub use gateway_client::Client as GatewayApi;
use gateway_client::Retry;

use crate::procs::API_TOKEN;

/// How long one call keeps retrying.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// A client over one or more gateway base URLs (tried in turn).
///
/// # Errors
/// The HTTP client cannot be built.
pub fn connect(urls: &[String]) -> anyhow::Result<GatewayApi> {
    GatewayApi::builder_multi(urls, API_TOKEN)
        .timeout(Duration::from_secs(10))
        .retry_max(Duration::from_millis(300))
        .retry(Retry::For(PATIENCE))
        .build()
        .context("build the gateway client")
}
