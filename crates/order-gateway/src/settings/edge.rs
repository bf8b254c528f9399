//! The HTTP edge's settings (`RAKUTEN_GATEWAY_TLS_*`, timeouts, connection cap, shutdown deadline,
//! address file), turned into the shared `rakuten_edge` configuration.

use std::path::PathBuf;
use std::time::Duration;

use super::error::SettingsError;

/// The HTTP edge: HTTPS from PEM files (reloaded on SIGHUP), head/idle timeout, connection cap,
/// shutdown deadline (served by `rakuten_edge::serve`).
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct EdgeSettings {
    /// Certificate chain (PEM) to serve HTTPS with; set together with the key. Unset = plain HTTP.
    #[arg(long, env = "RAKUTEN_GATEWAY_TLS_CERT_PATH")]
    pub tls_cert_path: Option<PathBuf>,
    /// Private key (PEM) of the TLS certificate.
    #[arg(long, env = "RAKUTEN_GATEWAY_TLS_KEY_PATH")]
    pub tls_key_path: Option<PathBuf>,
    /// A request head must be complete within this many seconds of the connection opening or
    /// of the previous response (so it is also the idle keep-alive timeout).
    #[arg(
        long,
        env = "RAKUTEN_GATEWAY_HEADER_TIMEOUT_SECONDS",
        default_value_t = 10.0,
        value_parser = rakuten_cli::number::seconds(),
    )]
    pub header_timeout_seconds: f64,
    /// A request body must arrive in full within this many seconds of its head; past it the
    /// request is answered 408 and the connection closed.
    #[arg(
        long,
        env = "RAKUTEN_GATEWAY_BODY_TIMEOUT_SECONDS",
        default_value_t = 30.0,
        value_parser = rakuten_cli::number::seconds(),
    )]
    pub body_timeout_seconds: f64,
    /// Most open connections, long-polls included; past it a new connection gets a 503.
    #[arg(long, env = "RAKUTEN_GATEWAY_MAX_CONNECTIONS", default_value_t = 2048, value_parser = rakuten_cli::number::whole::<usize>(1..=1_000_000))]
    pub max_connections: usize,
    /// Longest graceful shutdown, seconds; connections still open then are dropped.
    #[arg(
        long,
        env = "RAKUTEN_GATEWAY_SHUTDOWN_DEADLINE_SECONDS",
        default_value_t = 10.0,
        value_parser = rakuten_cli::number::seconds(),
    )]
    pub shutdown_deadline_seconds: f64,
    /// Once listening, write the bound address (`127.0.0.1:PORT`) to this file (for scripts
    /// and tests that start the gateway on port 0).
    #[arg(long, env = "RAKUTEN_GATEWAY_ADDR_FILE")]
    pub addr_file: Option<PathBuf>,
}

impl Default for EdgeSettings {
    fn default() -> Self {
        EdgeSettings {
            tls_cert_path: None,
            tls_key_path: None,
            header_timeout_seconds: 10.0,
            body_timeout_seconds: 30.0,
            max_connections: 2048,
            shutdown_deadline_seconds: 10.0,
            addr_file: None,
        }
    }
}

impl EdgeSettings {
    /// The TLS files, when both paths are set.
    ///
    /// # Errors
    /// Only one of the two is set.
    pub fn tls_files(&self) -> Result<Option<rakuten_edge::TlsFiles>, SettingsError> {
        rakuten_edge::TlsFiles::from_pair(
            self.tls_cert_path.clone(),
            self.tls_key_path.clone(),
            TLS_VARS,
        )
        .map_err(|reason| SettingsError {
            name: "RAKUTEN_GATEWAY_TLS_CERT_PATH",
            reason,
        })
    }

    /// The edge configuration, loading the TLS files when set.
    ///
    /// # Errors
    /// Unpaired or unreadable TLS files, a key that does not match its certificate.
    pub fn edge_config(&self) -> anyhow::Result<rakuten_edge::EdgeConfig> {
        let mut config = rakuten_edge::EdgeConfig::load(
            self.tls_files()?,
            Duration::from_secs_f64(self.header_timeout_seconds),
            self.max_connections,
            Duration::from_secs_f64(self.shutdown_deadline_seconds),
        )?;
        config.addr_file = self.addr_file.clone();
        config.body_timeout = Duration::from_secs_f64(self.body_timeout_seconds);
        Ok(config)
    }
}

/// The variables of the TLS certificate and key paths.
pub(super) const TLS_VARS: (&str, &str) = (
    "RAKUTEN_GATEWAY_TLS_CERT_PATH",
    "RAKUTEN_GATEWAY_TLS_KEY_PATH",
);
