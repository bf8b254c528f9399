//! Typed settings (spec §7 plus `RAKUTEN_API_TOKEN`), read once at start from the command line,
//! the environment and a `.env` file (loaded by `main` through `dotenvy`), validated by
//! [`Settings::validate`]. `order-gateway serve --help` lists every variable with its default.
//!
//! This file: [`Settings`] and its checks; one file per group it flattens in (`alerts.rs` the alert
//! delivery, `edge.rs` the HTTP edge) and `error.rs`, the refusal every check returns.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use crate::roles::{Credentials, CredentialsError, NamedTokens, Role};

mod alerts;
mod edge;
mod error;

pub use alerts::{AlertSettings, MAX_WEBHOOK_ATTEMPT_SECONDS, WebhookFormat};
pub use edge::EdgeSettings;
pub use error::SettingsError;

pub use rakuten_types::{MAX_TOKEN_CHARS, MIN_TOKEN_CHARS, Secret};

/// `RAKUTEN_API_TOKEN`: the one token rule ([`rakuten_types::secret::is_token`]). The message
/// never quotes it.
fn parse_token(s: &str) -> Result<Secret, String> {
    if s.chars().count() > MAX_TOKEN_CHARS {
        return Err(format!(
            "the token must be at most {MAX_TOKEN_CHARS} characters"
        ));
    }
    if !rakuten_types::secret::is_token(s) {
        return Err(format!(
            "the token must be at least {MIN_TOKEN_CHARS} characters, without spaces"
        ));
    }
    Ok(Secret::new(s))
}

/// `RAKUTEN_CONSOLE_KEY`: the shared rule ([`web_console::session::check_key`]).
fn parse_console_key(s: &str) -> Result<Secret, String> {
    web_console::session::check_key(s).map(|()| Secret::new(s))
}

/// Scope of the one-active-task gate (§4.3): one task at a time overall, or one per site.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LeaseScope {
    /// At most one leased/running task in total (the default, §1 constraint 2).
    #[default]
    Global,
    /// At most one leased/running task per site.
    Site,
}

impl LeaseScope {
    /// The `tasks.gate_key` a task of `site` takes while active.
    pub fn gate_key(self, site: &str) -> String {
        match self {
            LeaseScope::Global => "*".to_owned(),
            LeaseScope::Site => site.to_owned(),
        }
    }
}

/// Every setting of the gateway. Durations are in seconds on the command line and in the
/// environment; fractional values are accepted where noted.
#[derive(Debug, Clone, clap::Args)]
pub struct Settings {
    /// Full-access (operator) token, actor name `api`. Optional when the role lists below name
    /// at least one token.
    #[arg(long, env = "RAKUTEN_API_TOKEN", hide_env_values = true, value_parser = rakuten_cli::secret_arg::secret(parse_token))]
    pub api_token: Option<Secret>,

    /// Address to listen on.
    #[arg(long, env = "RAKUTEN_GATEWAY_HOST", default_value = "127.0.0.1")]
    pub host: String,

    /// Port to listen on (0 picks a free port).
    #[arg(long, env = "RAKUTEN_GATEWAY_PORT", default_value_t = 31109, value_parser = rakuten_cli::number::whole::<u16>(0..=65535))]
    pub port: u16,

    /// SQLite database file; its parent directory is created if missing.
    #[arg(
        long,
        env = "RAKUTEN_GATEWAY_DB_PATH",
        default_value = "data/gateway.db"
    )]
    pub db_path: PathBuf,

    /// PostgreSQL URL (`postgres://user:pass@host:5432/db`). When set, the gateway stores its
    /// queue in PostgreSQL instead of the SQLite file, and any number of instances may share it;
    /// unset = SQLite at `RAKUTEN_GATEWAY_DB_PATH`.
    #[arg(long, env = "RAKUTEN_GATEWAY_DB_URL", hide_env_values = true)]
    pub db_url: Option<Secret>,

    /// Lease time-to-live, seconds (§4.3); a worker renews before it lapses.
    #[arg(long, env = "RAKUTEN_LEASE_TTL_SECONDS", default_value_t = 300.0, value_parser = rakuten_cli::number::seconds())]
    pub lease_ttl_seconds: f64,

    /// Longest long-poll a lease request may ask for with `wait`, seconds.
    #[arg(long, env = "RAKUTEN_LEASE_MAX_WAIT_SECONDS", default_value_t = 60.0, value_parser = rakuten_cli::number::seconds())]
    pub lease_max_wait_seconds: f64,

    /// A worker silent longer than this raises `worker_offline`, seconds (§4.7).
    #[arg(
        long,
        env = "RAKUTEN_WORKER_OFFLINE_ALERT_SECONDS",
        default_value_t = 300.0,
        value_parser = rakuten_cli::number::seconds(),
    )]
    pub worker_offline_alert_seconds: f64,

    /// A task queued longer than this raises `task_queued_too_long`, seconds (§4.7).
    #[arg(long, env = "RAKUTEN_QUEUED_ALERT_SECONDS", default_value_t = 600.0, value_parser = rakuten_cli::number::seconds())]
    pub queued_alert_seconds: f64,

    /// PostgreSQL: an instance whose clock differs from the database's by more than this raises
    /// a `clock_skew` alert (cleared once it is back within) and leaves lease sweeps to the other
    /// instances, seconds; 0 turns the check off.
    #[arg(long, env = "RAKUTEN_CLOCK_SKEW_ALERT_SECONDS", default_value_t = 2.0, value_parser = rakuten_cli::number::seconds())]
    pub clock_skew_alert_seconds: f64,

    /// Period of the lease-expiry sweeper, seconds (fractional allowed).
    #[arg(long, env = "RAKUTEN_SWEEP_INTERVAL_SECONDS", default_value_t = 1.0, value_parser = rakuten_cli::number::seconds())]
    pub sweep_interval_seconds: f64,

    /// `global`: one active task overall; `site`: one active task per site.
    #[arg(long, env = "RAKUTEN_LEASE_SCOPE", value_enum, default_value_t = LeaseScope::Global)]
    pub lease_scope: LeaseScope,

    /// Account-query lease TTL, seconds (§11.5); a lapsed lease is redelivered automatically.
    #[arg(long, env = "RAKUTEN_QUERY_LEASE_TTL_SECONDS", default_value_t = 180.0, value_parser = rakuten_cli::number::seconds())]
    pub query_lease_ttl_seconds: f64,

    /// Longest life of an account query since submit, seconds (§11.5); older → `expired`.
    #[arg(long, env = "RAKUTEN_QUERY_TTL_SECONDS", default_value_t = 900.0, value_parser = rakuten_cli::number::seconds())]
    pub query_ttl_seconds: f64,

    /// Most leases of one account query (§11.5); exhausted → `failed`.
    #[arg(long, env = "RAKUTEN_QUERY_MAX_ATTEMPTS", default_value_t = 3, value_parser = rakuten_cli::number::whole::<u32>(1..=100))]
    pub query_max_attempts: u32,

    /// How long finished account queries are kept, seconds (§11.5); older ones are deleted.
    #[arg(
        long,
        env = "RAKUTEN_QUERY_RETENTION_SECONDS",
        default_value_t = 604_800.0,
        value_parser = rakuten_cli::number::seconds(),
    )]
    pub query_retention_seconds: f64,

    /// How long a worker id that stopped polling is kept, seconds: past it its row is deleted
    /// (and its `worker_offline` alert clears), unless it holds a lease (D-worker-retention).
    #[arg(
        long,
        env = "RAKUTEN_WORKER_RETENTION_SECONDS",
        default_value_t = 604_800.0,
        value_parser = rakuten_cli::number::seconds(),
    )]
    pub worker_retention_seconds: f64,

    /// Largest stored result JSON, bytes (§11.5): over → raw pages dropped; still over → failed.
    #[arg(
        long,
        env = "RAKUTEN_QUERY_RESULT_MAX_BYTES",
        default_value_t = 1_048_576,
        value_parser = rakuten_cli::number::whole::<usize>(1024..=64 * 1024 * 1024),
    )]
    pub query_result_max_bytes: usize,

    // Roles (crate::roles): `name:token,name:token…`; one name twice = rotation.
    /// Upstream tokens: submit and read orders and account queries.
    #[arg(long, env = "RAKUTEN_UPSTREAM_TOKENS", hide_env_values = true, value_parser = rakuten_cli::secret_arg::secret(<NamedTokens as FromStr>::from_str))]
    pub upstream_tokens: Option<NamedTokens>,
    /// Worker tokens: lease, renew, report; account-query lease and result.
    #[arg(long, env = "RAKUTEN_WORKER_TOKENS", hide_env_values = true, value_parser = rakuten_cli::secret_arg::secret(<NamedTokens as FromStr>::from_str))]
    pub worker_tokens: Option<NamedTokens>,
    /// Operator tokens: every route, operator actions included.
    #[arg(long, env = "RAKUTEN_OPERATOR_TOKENS", hide_env_values = true, value_parser = rakuten_cli::secret_arg::secret(<NamedTokens as FromStr>::from_str))]
    pub operator_tokens: Option<NamedTokens>,
    /// Metrics tokens: `GET /metrics` only (for a Prometheus scraper; operators may read it too).
    #[arg(long, env = "RAKUTEN_METRICS_TOKENS", hide_env_values = true, value_parser = rakuten_cli::secret_arg::secret(<NamedTokens as FromStr>::from_str))]
    pub metrics_tokens: Option<NamedTokens>,

    /// Signing key of the operator console's session cookies; every instance on one
    /// database must share it. Unset: a random key per process (sessions end at restart).
    #[arg(long, env = "RAKUTEN_CONSOLE_KEY", hide_env_values = true, value_parser = rakuten_cli::secret_arg::secret(parse_console_key))]
    pub console_key: Option<Secret>,
    /// Alert delivery and stale-task evidence.
    #[command(flatten)]
    pub alerts: AlertSettings,

    /// TLS, connection bounds and shutdown deadline of the HTTP edge.
    #[command(flatten)]
    pub edge: EdgeSettings,
}

impl Settings {
    /// Settings for tests and the demo: port 0 on 127.0.0.1, the given database file and token,
    /// every other value at its default.
    pub fn for_tests(db_path: impl Into<PathBuf>, api_token: &str) -> Self {
        Settings {
            api_token: Some(Secret::new(api_token)),
            host: "127.0.0.1".into(),
            port: 0,
            db_path: db_path.into(),
            db_url: None,
            lease_ttl_seconds: 300.0,
            lease_max_wait_seconds: 60.0,
            worker_offline_alert_seconds: 300.0,
            queued_alert_seconds: 600.0,
            sweep_interval_seconds: 1.0,
            // Off: tests run a ManualClock far from the database's clock.
            clock_skew_alert_seconds: 0.0,
            lease_scope: LeaseScope::Global,
            query_lease_ttl_seconds: 180.0,
            query_ttl_seconds: 900.0,
            query_max_attempts: 3,
            query_retention_seconds: 604_800.0,
            worker_retention_seconds: 604_800.0,
            query_result_max_bytes: 1_048_576,
            alerts: AlertSettings::default(),
            upstream_tokens: None,
            worker_tokens: None,
            operator_tokens: None,
            metrics_tokens: None,
            edge: EdgeSettings::default(),
            console_key: None,
        }
    }

    /// Checks every value once, at start.
    ///
    /// # Errors
    /// [`SettingsError`] naming the first bad variable.
    pub fn validate(&self) -> Result<(), SettingsError> {
        self.credentials()?;
        let positive = [
            ("RAKUTEN_LEASE_TTL_SECONDS", self.lease_ttl_seconds),
            (
                "RAKUTEN_WORKER_OFFLINE_ALERT_SECONDS",
                self.worker_offline_alert_seconds,
            ),
            ("RAKUTEN_QUEUED_ALERT_SECONDS", self.queued_alert_seconds),
            (
                "RAKUTEN_SWEEP_INTERVAL_SECONDS",
                self.sweep_interval_seconds,
            ),
            (
                "RAKUTEN_QUERY_LEASE_TTL_SECONDS",
                self.query_lease_ttl_seconds,
            ),
            ("RAKUTEN_QUERY_TTL_SECONDS", self.query_ttl_seconds),
            (
                "RAKUTEN_QUERY_RETENTION_SECONDS",
                self.query_retention_seconds,
            ),
            (
                "RAKUTEN_WORKER_RETENTION_SECONDS",
                self.worker_retention_seconds,
            ),
            (
                "RAKUTEN_GATEWAY_HEADER_TIMEOUT_SECONDS",
                self.edge.header_timeout_seconds,
            ),
            (
                "RAKUTEN_GATEWAY_BODY_TIMEOUT_SECONDS",
                self.edge.body_timeout_seconds,
            ),
            (
                "RAKUTEN_GATEWAY_SHUTDOWN_DEADLINE_SECONDS",
                self.edge.shutdown_deadline_seconds,
            ),
        ];
        for (name, v) in positive {
            if !(v.is_finite() && v > 0.0 && v < 1.0e9) {
                return Err(SettingsError {
                    name,
                    reason: format!("must be a positive number of seconds, got {v}"),
                });
            }
        }
        if !(1..=100).contains(&self.query_max_attempts) {
            return Err(SettingsError {
                name: "RAKUTEN_QUERY_MAX_ATTEMPTS",
                reason: format!("must be 1..=100, got {}", self.query_max_attempts),
            });
        }
        if !(1024..=64 * 1024 * 1024).contains(&self.query_result_max_bytes) {
            return Err(SettingsError {
                name: "RAKUTEN_QUERY_RESULT_MAX_BYTES",
                reason: format!(
                    "must be 1 KiB..=64 MiB, got {} bytes",
                    self.query_result_max_bytes
                ),
            });
        }
        let w = self.lease_max_wait_seconds;
        if !(w.is_finite() && (0.0..=3600.0).contains(&w)) {
            return Err(SettingsError {
                name: "RAKUTEN_LEASE_MAX_WAIT_SECONDS",
                reason: format!("must be between 0 and 3600 seconds, got {w}"),
            });
        }
        if let Some(url) = &self.db_url {
            let u = url.expose();
            if !(u.starts_with("postgres://") || u.starts_with("postgresql://")) {
                return Err(SettingsError {
                    name: "RAKUTEN_GATEWAY_DB_URL",
                    reason: "must start with postgres:// or postgresql://".into(),
                });
            }
        }
        if !(1..=1_000_000).contains(&self.edge.max_connections) {
            return Err(SettingsError {
                name: "RAKUTEN_GATEWAY_MAX_CONNECTIONS",
                reason: format!("must be 1..=1000000, got {}", self.edge.max_connections),
            });
        }
        if let Some(tls) = self.edge.tls_files()? {
            // A missing or unusable file is a bad setting (exit 2), not a run-time error.
            tls.check(edge::TLS_VARS)
                .map_err(|(name, reason)| SettingsError { name, reason })?;
        }
        if let Some(f) = &self.edge.addr_file {
            rakuten_edge::check_addr_file(f).map_err(|reason| SettingsError {
                name: "RAKUTEN_GATEWAY_ADDR_FILE",
                reason,
            })?;
        }
        if self.db_path.as_os_str().is_empty() {
            return Err(SettingsError {
                name: "RAKUTEN_GATEWAY_DB_PATH",
                reason: "must not be empty".into(),
            });
        }
        self.alerts.validate()?;
        self.listen_addr().map(|_| ())
    }

    /// The token table of every role (`RAKUTEN_API_TOKEN` is the operator `api`).
    ///
    /// # Errors
    /// [`SettingsError`] naming `RAKUTEN_API_TOKEN` when no token is configured, the variables
    /// of both when one token is configured twice, else `RAKUTEN_*_TOKENS` (a name under two
    /// roles).
    pub fn credentials(&self) -> Result<Credentials, SettingsError> {
        let empty = NamedTokens::default();
        let lists = [
            (Role::Upstream, &self.upstream_tokens),
            (Role::Worker, &self.worker_tokens),
            (Role::Operator, &self.operator_tokens),
            (Role::Metrics, &self.metrics_tokens),
        ]
        .map(|(r, l)| (r, l.as_ref().unwrap_or(&empty)));
        Credentials::build(self.api_token.as_ref(), &lists).map_err(|e| SettingsError {
            name: match e {
                CredentialsError::Empty => "RAKUTEN_API_TOKEN",
                // The reason names the other variable (D-admin-token-is-nobody-elses).
                CredentialsError::DuplicateToken(_, _, _, second) => second,
                CredentialsError::NameInTwoRoles(..) => "RAKUTEN_*_TOKENS",
            },
            reason: e.to_string(),
        })
    }

    /// The socket address from host and port.
    ///
    /// # Errors
    /// [`SettingsError`] when the host is not an IP address.
    pub fn listen_addr(&self) -> Result<SocketAddr, SettingsError> {
        let ip = self.host.parse().map_err(|_| SettingsError {
            name: "RAKUTEN_GATEWAY_HOST",
            reason: format!("not an IP address: {:?}", self.host),
        })?;
        Ok(SocketAddr::new(ip, self.port))
    }

    /// The clock-skew tolerance, `None` when the check is off.
    pub fn clock_skew_alert(&self) -> Option<Duration> {
        (self.clock_skew_alert_seconds > 0.0)
            .then(|| Duration::from_secs_f64(self.clock_skew_alert_seconds))
    }

    /// Lease TTL as a duration.
    pub fn lease_ttl(&self) -> Duration {
        Duration::from_secs_f64(self.lease_ttl_seconds)
    }

    /// Longest long-poll.
    pub fn lease_max_wait(&self) -> Duration {
        Duration::from_secs_f64(self.lease_max_wait_seconds)
    }

    /// Worker-offline alert threshold.
    pub fn worker_offline_alert(&self) -> Duration {
        Duration::from_secs_f64(self.worker_offline_alert_seconds)
    }

    /// Queued-too-long alert threshold.
    pub fn queued_alert(&self) -> Duration {
        Duration::from_secs_f64(self.queued_alert_seconds)
    }

    /// Sweeper period.
    pub fn sweep_interval(&self) -> Duration {
        Duration::from_secs_f64(self.sweep_interval_seconds)
    }

    /// Account-query lease TTL.
    pub fn query_lease_ttl(&self) -> Duration {
        Duration::from_secs_f64(self.query_lease_ttl_seconds)
    }

    /// Account-query life since submit.
    pub fn query_ttl(&self) -> Duration {
        Duration::from_secs_f64(self.query_ttl_seconds)
    }

    /// Retention of a worker id that stopped polling (D-worker-retention).
    pub fn worker_retention(&self) -> Duration {
        Duration::from_secs_f64(self.worker_retention_seconds)
    }

    /// Retention of finished account queries.
    pub fn query_retention(&self) -> Duration {
        Duration::from_secs_f64(self.query_retention_seconds)
    }

    /// Body limit of `POST /api/account/queries/{id}/result`, bytes: twice the result limit
    /// plus 64 KiB, so a result somewhat over the limit still arrives and gets its raw pages
    /// dropped (rather than a bare 413).
    pub fn query_result_body_limit(&self) -> usize {
        self.query_result_max_bytes
            .saturating_mul(2)
            .saturating_add(64 * 1024)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_never_prints() {
        let s = Settings::for_tests("x.db", "hunter2");
        assert!(!format!("{s:?}").contains("hunter2"));
        assert_eq!(format!("{}", s.api_token.unwrap()), "***");
    }

    #[test]
    fn a_database_url_must_be_postgres_and_never_prints() {
        let mut s = Settings::for_tests("x.db", "t");
        s.db_url = Some(Secret::new("mysql://u:pw@h/db"));
        assert_eq!(s.validate().unwrap_err().name, "RAKUTEN_GATEWAY_DB_URL");
        s.db_url = Some(Secret::new("postgres://u:pw@127.0.0.1/db"));
        assert!(s.validate().is_ok());
        assert!(!format!("{s:?}").contains("pw@"));
    }

    #[test]
    fn a_webhook_attempt_bound_over_a_minute_is_refused() {
        let mut s = Settings::for_tests("x.db", "t");
        s.alerts.webhook_timeout_seconds = 60.0;
        assert!(s.validate().is_ok());
        s.alerts.webhook_timeout_seconds = 61.0;
        let e = s.validate().unwrap_err();
        assert_eq!(e.name, "RAKUTEN_ALERT_WEBHOOK_TIMEOUT_SECONDS");
        assert!(e.reason.contains("at most 60"), "{}", e.reason);
    }

    #[test]
    fn empty_token_is_refused() {
        let s = Settings::for_tests("x.db", " ");
        assert_eq!(s.validate().unwrap_err().name, "RAKUTEN_API_TOKEN");
        assert!(Settings::for_tests("x.db", "t").validate().is_ok());
    }
}
