//! Settings: clap derive with `RAKUTEN_POLL_*` environment variables (a `.env` file is read by
//! `main` through dotenvy), validated once at start.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::domain::TaskTypes;
use crate::domain::task_type::DEFAULT_TASK_TYPES;
use crate::upstream::SimConfig;

/// Command line.
#[derive(Debug, Parser)]
#[command(
    name = "card-polling",
    version,
    about = "Priority polling queue for IoT cards"
)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the HTTP API and run the scheduler, the executor pool and the expiry job.
    Serve(Settings),
}

pub use rakuten_types::Secret;

/// `RAKUTEN_POLL_ADMIN_TOKEN`: the one token rule ([`rakuten_types::secret::is_token`]).
fn parse_secret(s: &str) -> Result<Secret, String> {
    if !rakuten_types::secret::is_token(s) {
        return Err("the admin token must be 16-256 characters without spaces".into());
    }
    Ok(Secret::new(s))
}

/// `RAKUTEN_POLL_CONSOLE_KEY`: the shared rule ([`web_console::session::check_key`]).
fn parse_console_key(s: &str) -> Result<String, String> {
    web_console::session::check_key(s).map(|()| s.to_owned())
}

fn parse_pg_url(s: &str) -> Result<Secret, String> {
    if !(s.starts_with("postgres://") || s.starts_with("postgresql://")) {
        return Err("the database URL must start with postgres:// or postgresql://".into());
    }
    Ok(Secret::new(s))
}

/// The HTTP carrier's base URL (`RAKUTEN_POLL_CARRIER_URL`). It may carry userinfo or an API
/// key in its query, so Debug prints only its redacted form (scheme, host, port, path).
#[derive(Clone, PartialEq, Eq)]
pub struct CarrierUrl(reqwest::Url);

impl CarrierUrl {
    /// The URL itself; use only where it is needed (the HTTP carrier).
    pub fn expose(&self) -> &reqwest::Url {
        &self.0
    }
}

impl std::fmt::Debug for CarrierUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CarrierUrl({})",
            crate::upstream::http::redact_url(&self.0)
        )
    }
}

impl std::str::FromStr for CarrierUrl {
    type Err = String;

    /// An `http://` or `https://` URL with a host; the error never repeats the URL.
    fn from_str(s: &str) -> Result<Self, String> {
        crate::upstream::http::parse_carrier_url(s).map(CarrierUrl)
    }
}

fn parse_carrier_url(s: &str) -> Result<CarrierUrl, String> {
    s.parse()
}

fn parse_carrier_token(s: &str) -> Result<Secret, String> {
    if s.is_empty() || s.len() > 4096 || s.chars().any(|c| c.is_control() || c == ' ') {
        return Err("the carrier token must be 1-4096 characters without spaces".into());
    }
    Ok(Secret::new(s))
}

/// Where the hint and manual lanes live.
#[derive(Clone, PartialEq, Eq)]
pub enum HintChannelSetting {
    /// In-process (default; lost on restart, which the recovery read covers).
    Memory,
    /// A Redis server (`redis://…` or `rediss://…`); the URL may hold a password, never printed.
    Redis(Secret),
}

impl std::fmt::Debug for HintChannelSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HintChannelSetting::Memory => f.write_str("Memory"),
            HintChannelSetting::Redis(_) => f.write_str("Redis(***)"),
        }
    }
}

fn parse_hint_channel(s: &str) -> Result<HintChannelSetting, String> {
    let s = s.trim();
    if s.is_empty() || s == "memory" {
        return Ok(HintChannelSetting::Memory);
    }
    if (s.starts_with("redis://") || s.starts_with("rediss://")) && s.len() <= 1024 {
        return Ok(HintChannelSetting::Redis(Secret::new(s)));
    }
    Err("must be `memory` or a redis:// or rediss:// URL (at most 1024 bytes)".into())
}

fn parse_prefix(s: &str) -> Result<String, String> {
    if s.len() > 64 || s.chars().any(|c| c.is_control() || c == ' ') {
        return Err("at most 64 characters, no spaces".into());
    }
    Ok(s.to_owned())
}

fn parse_backpressure_secs(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|v| (0.0..=3600.0).contains(v))
        .ok_or_else(|| "seconds between 0 and 3600 (decimals allowed)".into())
}

fn parse_rate(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|r| (0.0..=1.0).contains(r))
        .ok_or_else(|| "a rate between 0 and 1".into())
}

/// Settings of `card-polling serve`.
#[derive(Debug, Clone, Args)]
pub struct Settings {
    /// Address to listen on (named like the gateway's `RAKUTEN_GATEWAY_HOST`).
    #[arg(long, env = "RAKUTEN_POLL_HOST", default_value = "127.0.0.1")]
    pub host: std::net::IpAddr,
    /// Port to listen on (0 picks a free port).
    #[arg(long, env = "RAKUTEN_POLL_PORT", default_value_t = 8090, value_parser = rakuten_cli::number::whole::<u16>(0..=65535))]
    pub port: u16,
    /// DEPRECATED `host:port` (D-settings-convention): when set it wins over host and port, with a warning
    /// at start. Not listed in `--help`.
    #[arg(long, env = "RAKUTEN_POLL_LISTEN", hide = true)]
    pub listen: Option<SocketAddr>,
    /// SQLite database file.
    #[arg(
        long,
        env = "RAKUTEN_POLL_DB_PATH",
        default_value = "data/card-polling.db"
    )]
    pub db_path: PathBuf,
    /// PostgreSQL URL (`postgres://user:pass@host:5432/db`); when set, the store lives in
    /// PostgreSQL instead of the SQLite file. Never printed.
    #[arg(long, env = "RAKUTEN_POLL_DB_URL", hide_env_values = true, value_parser = rakuten_cli::secret_arg::secret(parse_pg_url))]
    pub db_url: Option<Secret>,
    /// How long a request waits for the database (SQLite busy timeout, PostgreSQL `lock_timeout`,
    /// a pool connection) before it answers 503 with `Retry-After`, in milliseconds.
    #[arg(long, env = "RAKUTEN_POLL_DB_LOCK_TIMEOUT_MS", default_value_t = 5000, value_parser = rakuten_cli::number::whole::<u64>(10..=60_000))]
    pub db_lock_timeout_ms: u64,
    /// Bootstrap super_admin Bearer token (16-256 characters); account id `admin`.
    #[arg(long, env = "RAKUTEN_POLL_ADMIN_TOKEN", hide_env_values = true, value_parser = rakuten_cli::secret_arg::secret(parse_secret))]
    pub admin_token: Secret,
    /// Polling task types with their normal intervals in seconds: `name=secs,…`.
    #[arg(long, env = "RAKUTEN_POLL_TASK_TYPES", default_value = DEFAULT_TASK_TYPES, value_parser = TaskTypes::parse)]
    pub task_types: TaskTypes,
    /// Milliseconds between scheduling cycles (a quarter of it after a cycle that hit a bound).
    #[arg(long, env = "RAKUTEN_POLL_EXECUTOR_TICK_MS", default_value_t = 250, value_parser = rakuten_cli::number::whole::<u64>(10..=60_000))]
    pub executor_tick_ms: u64,
    /// Due priority items the scheduler's recovery read takes per cycle.
    #[arg(long, env = "RAKUTEN_POLL_EXECUTOR_BATCH", default_value_t = 1000, value_parser = rakuten_cli::number::whole::<i64>(1..=100_000))]
    pub executor_batch: i64,
    /// Concurrent executions per task type (the executor pool's cap — at most this many carrier
    /// calls of a task type at once; all lanes share it). Size it by Little's law: at least the
    /// task type's due polls per second × the carrier's latency in seconds, with headroom
    /// (1,000,000 cards at `card_status=300` and 20 ms: 3,333/s × 0.02 s ≈ 67; D-scheduler-settings).
    #[arg(long, env = "RAKUTEN_POLL_EXECUTOR_CONCURRENCY", default_value_t = 128, value_parser = rakuten_cli::number::whole::<u64>(1..=1024))]
    pub executor_concurrency: u64,
    /// Hint channel: `memory` (in-process) or a Redis URL (`redis://127.0.0.1:6379/`).
    #[arg(long, env = "RAKUTEN_POLL_HINT_CHANNEL", default_value = "memory", hide_env_values = true, value_parser = rakuten_cli::secret_arg::secret(parse_hint_channel))]
    pub hint_channel: HintChannelSetting,
    /// CA certificate (PEM) that a `rediss://` hint channel's server certificate must chain to,
    /// instead of the system's trust store (a private CA of a managed Redis, or a test CA).
    #[arg(long, env = "RAKUTEN_POLL_REDIS_CA_PATH")]
    pub redis_ca_path: Option<PathBuf>,
    /// Prefix of the hint and manual lane keys (`{prefix}poll:hint:{type}`).
    #[arg(long, env = "RAKUTEN_POLL_HINT_PREFIX", default_value = "card-polling:", value_parser = parse_prefix)]
    pub hint_prefix: String,
    /// Shards per task type for ordinary polling (cards by a stable ICCID hash).
    #[arg(long, env = "RAKUTEN_POLL_SHARDS", default_value_t = 16, value_parser = rakuten_cli::number::whole::<u32>(1..=1024))]
    pub shards: u32,
    /// Ordinary cards taken per shard per cycle.
    #[arg(long, env = "RAKUTEN_POLL_SHARD_BATCH", default_value_t = 500, value_parser = rakuten_cli::number::whole::<i64>(1..=100_000))]
    pub shard_batch: i64,
    /// Upper bound: a shard queue holding more queued ordinary polls than this skips its batch
    /// that cycle, whatever `RAKUTEN_POLL_BACKPRESSURE_SECS` allows.
    #[arg(long, env = "RAKUTEN_POLL_BACKPRESSURE_DEPTH", default_value_t = 2000, value_parser = rakuten_cli::number::whole::<u64>(0..=10_000_000))]
    pub backpressure_depth: u64,
    /// Seconds of queued work (queued entries ÷ measured execution rate) a task type's execution
    /// queue may hold before ordinary batches stop for the cycle; a priority hint waits about this
    /// plus one cycle. Decimal (`0.5`); 0 turns it off (only the depth bound applies).
    #[arg(long, env = "RAKUTEN_POLL_BACKPRESSURE_SECS", default_value = "0.35", value_parser = parse_backpressure_secs)]
    pub backpressure_secs: f64,
    /// Hints (and manual triggers) drained per task type per cycle.
    #[arg(long, env = "RAKUTEN_POLL_DRAIN_MAX", default_value_t = 1000, value_parser = rakuten_cli::number::whole::<u64>(1..=100_000))]
    pub drain_max: u64,
    /// Accepted ordinary manual triggers per operator per UTC day (one per card and task type).
    #[arg(long, env = "RAKUTEN_POLL_MANUAL_DAILY_QUOTA", default_value_t = 100, value_parser = rakuten_cli::number::whole::<u32>(0..=1_000_000))]
    pub manual_daily_quota: u32,
    /// PostgreSQL: an instance whose clock differs from the database's by more than this many
    /// seconds logs it, shows it in `/health` and `/metrics`, and makes no claims (another
    /// instance's claim in flight must never look lapsed by a wrong clock); 0 turns the check off.
    #[arg(long, env = "RAKUTEN_POLL_CLOCK_MAX_SKEW_SECS", default_value_t = 2, value_parser = rakuten_cli::number::whole::<u64>(0..=3600))]
    pub clock_max_skew_secs: u64,
    /// Seconds between expiry job runs.
    #[arg(long, env = "RAKUTEN_POLL_EXPIRY_EVERY_SECS", default_value_t = 60, value_parser = rakuten_cli::number::whole::<u64>(1..=3600))]
    pub expiry_every_secs: u64,
    /// Days interaction logs are kept; rows of an active item are kept longer.
    #[arg(long, env = "RAKUTEN_POLL_RETENTION_LOG_DAYS", default_value_t = 7, value_parser = rakuten_cli::number::whole::<u64>(1..=3650))]
    pub retention_log_days: u64,
    /// Unset (the default): priority facts (ended items with their sources, audit facts, trigger
    /// events) are kept for good, as the spec requires. Set: DEPARTS FROM THE SPEC, they are
    /// deleted this many days after the item ended (2 to 36500).
    #[arg(long, env = "RAKUTEN_POLL_RETENTION_HISTORY_DAYS", value_parser = rakuten_cli::number::whole::<u64>(2..=36500))]
    pub retention_history_days: Option<u64>,
    /// Days done ordinary manual triggers (executed or refused) are kept after their request (at
    /// least 2: the 24 h dedupe and the daily quota read them).
    #[arg(long, env = "RAKUTEN_POLL_RETENTION_MANUAL_TRIGGER_DAYS", default_value_t = 90, value_parser = rakuten_cli::number::whole::<u64>(2..=36500))]
    pub retention_manual_trigger_days: u64,
    /// Rows the retention job deletes per transaction.
    #[arg(long, env = "RAKUTEN_POLL_RETENTION_BATCH", default_value_t = 1000, value_parser = rakuten_cli::number::whole::<i64>(1..=100_000))]
    pub retention_batch: i64,
    /// Milliseconds the retention job pauses between two batches (lets other writers in).
    #[arg(long, env = "RAKUTEN_POLL_RETENTION_PAUSE_MS", default_value_t = 100, value_parser = rakuten_cli::number::whole::<u64>(0..=60_000))]
    pub retention_pause_ms: u64,
    /// Seconds between retention job runs.
    #[arg(long, env = "RAKUTEN_POLL_RETENTION_EVERY_SECS", default_value_t = 3600, value_parser = rakuten_cli::number::whole::<u64>(1..=86_400))]
    pub retention_every_secs: u64,
    /// HTTP carrier gateway base URL (`https://carrier.example/api`): when set, every poll and
    /// resume is a JSON `POST` to `{url}/poll` / `{url}/resume` (docs/carrier-http-contract.md)
    /// bounded by the spec's 30 s upstream timeout, instead of the simulated carrier. Only its
    /// scheme, host, port and path are ever printed.
    #[arg(long, env = "RAKUTEN_POLL_CARRIER_URL", hide_env_values = true, value_parser = rakuten_cli::secret_arg::secret(parse_carrier_url))]
    pub carrier_url: Option<CarrierUrl>,
    /// Bearer token sent to the HTTP carrier (`Authorization: Bearer …`); never printed, logged
    /// or written to interaction logs.
    #[arg(long, env = "RAKUTEN_POLL_CARRIER_TOKEN", hide_env_values = true, value_parser = rakuten_cli::secret_arg::secret(parse_carrier_token))]
    pub carrier_token: Option<Secret>,
    /// Largest answer body read from the HTTP carrier, bytes (1024 to 16777216): the answer is read
    /// in chunks and a longer one fails the call (`answer_too_large`, retried like any carrier
    /// failure) without being read further, so no call holds more than this.
    #[arg(long, env = "RAKUTEN_POLL_CARRIER_MAX_ANSWER_BYTES", default_value_t = crate::upstream::http::DEFAULT_MAX_ANSWER_BYTES, value_parser = rakuten_cli::number::whole::<usize>(1024..=16 * 1024 * 1024))]
    pub carrier_max_answer_bytes: usize,
    /// Simulated carrier: latency per call, milliseconds.
    #[arg(long, env = "RAKUTEN_POLL_SIM_LATENCY_MS", default_value_t = 50, value_parser = rakuten_cli::number::whole::<u64>(0..=60_000))]
    pub sim_latency_ms: u64,
    /// Simulated carrier: probability of a failed call.
    #[arg(long, env = "RAKUTEN_POLL_SIM_FAILURE_RATE", default_value = "0", value_parser = parse_rate)]
    pub sim_failure_rate: f64,
    /// Simulated carrier: probability of a timed-out call.
    #[arg(long, env = "RAKUTEN_POLL_SIM_TIMEOUT_RATE", default_value = "0", value_parser = parse_rate)]
    pub sim_timeout_rate: f64,
    /// Simulated carrier: ICCIDs it does not know (comma-separated).
    #[arg(long, env = "RAKUTEN_POLL_SIM_UNKNOWN_ICCIDS", value_delimiter = ',')]
    pub sim_unknown_iccids: Vec<String>,
    /// This process's instance id, recorded on the audit facts of the transitions it makes
    /// (claim, takeover, retry, failure, complete, expire); 1-64 printable ASCII characters.
    /// Unset: `<hostname>-<pid>-<6 random hex>`, new at every start.
    #[arg(long, env = "RAKUTEN_POLL_INSTANCE_ID", value_parser = crate::instance::parse_instance_id)]
    pub instance_id: Option<String>,
    /// Signing key of the operator console's session cookies; every instance must
    /// share it. Unset: a random key per process (sessions end at restart).
    #[arg(long, env = "RAKUTEN_POLL_CONSOLE_KEY", hide_env_values = true, value_parser = rakuten_cli::secret_arg::secret(parse_console_key))]
    pub console_key: Option<String>,
    /// TLS, connection bounds and shutdown deadline of the HTTP edge.
    #[command(flatten)]
    pub edge: EdgeSettings,
}

/// The HTTP edge: HTTPS from PEM files (reloaded on SIGHUP), head/idle timeout, connection cap,
/// shutdown deadline (served by `rakuten_edge::serve`).
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct EdgeSettings {
    /// Certificate chain (PEM) to serve HTTPS with; set together with the key. Unset = plain HTTP.
    #[arg(long, env = "RAKUTEN_POLL_TLS_CERT_PATH", requires = "tls_key_path")]
    pub tls_cert_path: Option<PathBuf>,
    /// Private key (PEM) of the TLS certificate.
    #[arg(long, env = "RAKUTEN_POLL_TLS_KEY_PATH", requires = "tls_cert_path")]
    pub tls_key_path: Option<PathBuf>,
    /// Seconds within which a request head must be complete, from the connection opening or
    /// the previous response (so also the idle keep-alive timeout).
    #[arg(long, env = "RAKUTEN_POLL_HEADER_TIMEOUT_SECS", default_value_t = 10, value_parser = rakuten_cli::number::whole::<u64>(1..=3600))]
    pub header_timeout_secs: u64,
    /// Seconds within which a request body must arrive in full after its head; past it the
    /// request is answered 408 and the connection closed.
    #[arg(long, env = "RAKUTEN_POLL_BODY_TIMEOUT_SECS", default_value_t = 30, value_parser = rakuten_cli::number::whole::<u64>(1..=3600))]
    pub body_timeout_secs: u64,
    /// Most open connections; past it a new connection gets a 503.
    #[arg(long, env = "RAKUTEN_POLL_MAX_CONNECTIONS", default_value_t = 2048, value_parser = rakuten_cli::number::whole::<u64>(1..=1_000_000))]
    pub max_connections: u64,
    /// Longest graceful shutdown, seconds; connections still open then are dropped.
    #[arg(long, env = "RAKUTEN_POLL_SHUTDOWN_DEADLINE_SECS", default_value_t = 10, value_parser = rakuten_cli::number::whole::<u64>(0..=3600))]
    pub shutdown_deadline_secs: u64,
    /// Once listening, write the bound address (`127.0.0.1:PORT`) to this file (for scripts
    /// and tests that start the service on port 0).
    #[arg(long, env = "RAKUTEN_POLL_ADDR_FILE")]
    pub addr_file: Option<PathBuf>,
}

impl Default for EdgeSettings {
    fn default() -> Self {
        EdgeSettings {
            tls_cert_path: None,
            tls_key_path: None,
            header_timeout_secs: 10,
            body_timeout_secs: 30,
            max_connections: 2048,
            shutdown_deadline_secs: 10,
            addr_file: None,
        }
    }
}

/// The variables of the TLS certificate and key paths.
const TLS_VARS: (&str, &str) = ("RAKUTEN_POLL_TLS_CERT_PATH", "RAKUTEN_POLL_TLS_KEY_PATH");

impl EdgeSettings {
    /// Loads the TLS files when set, as start-up will, so that a missing or unusable one is a
    /// bad setting (exit 2) naming its variable, not a run-time error (D-exit-2-or-3); checks
    /// the address file's folder the same way.
    ///
    /// # Errors
    /// The variable to blame and why.
    pub fn check_tls(&self) -> Result<(), (&'static str, String)> {
        if let Some(f) = &self.addr_file {
            rakuten_edge::check_addr_file(f).map_err(|r| ("RAKUTEN_POLL_ADDR_FILE", r))?;
        }
        match rakuten_edge::TlsFiles::from_pair(
            self.tls_cert_path.clone(),
            self.tls_key_path.clone(),
            TLS_VARS,
        ) {
            Ok(Some(tls)) => tls.check(TLS_VARS),
            Ok(None) => Ok(()),
            Err(reason) => Err((TLS_VARS.0, reason)),
        }
    }

    /// The edge configuration, loading the TLS files when set.
    ///
    /// # Errors
    /// Only one TLS path set, unreadable files, a key that does not match its certificate.
    pub fn edge_config(&self) -> anyhow::Result<rakuten_edge::EdgeConfig> {
        let tls = rakuten_edge::TlsFiles::from_pair(
            self.tls_cert_path.clone(),
            self.tls_key_path.clone(),
            TLS_VARS,
        )
        .map_err(anyhow::Error::msg)?;
        let mut config = rakuten_edge::EdgeConfig::load(
            tls,
            Duration::from_secs(self.header_timeout_secs),
            usize::try_from(self.max_connections)?,
            Duration::from_secs(self.shutdown_deadline_secs),
        )?;
        config.addr_file = self.addr_file.clone();
        config.body_timeout = Duration::from_secs(self.body_timeout_secs);
        Ok(config)
    }
}

/// A setting refused after the settings were read, when start-up could check it (a token the
/// database also holds): `main` exits 2 with the one line every bad setting prints, naming
/// `name`, like the refusals of clap (D-admin-token-is-nobody-elses).
#[derive(Debug, thiserror::Error)]
#[error("invalid setting {name}: {reason}")]
pub struct InvalidSetting {
    /// The variable to fix.
    pub name: &'static str,
    /// Why, naming the other setting or row it collides with.
    pub reason: String,
}

impl Settings {
    /// Settings for tests: given database and admin token, defaults elsewhere.
    pub fn for_tests(db_path: PathBuf, admin_token: &str) -> Self {
        Settings {
            host: std::net::Ipv4Addr::LOCALHOST.into(),
            port: 0,
            listen: None,
            db_path,
            db_url: None,
            db_lock_timeout_ms: 5000,
            admin_token: Secret::new(admin_token),
            task_types: TaskTypes::default(),
            executor_tick_ms: 250,
            executor_batch: 1000,
            executor_concurrency: 16,
            hint_channel: HintChannelSetting::Memory,
            redis_ca_path: None,
            hint_prefix: String::new(),
            shards: 4,
            shard_batch: 500,
            backpressure_depth: 2000,
            backpressure_secs: crate::scheduler::backpressure::DEFAULT_SECS,
            drain_max: 1000,
            manual_daily_quota: 100,
            expiry_every_secs: 60,
            retention_log_days: 7,
            retention_history_days: None,
            retention_manual_trigger_days: 90,
            retention_batch: 1000,
            retention_pause_ms: 0,
            retention_every_secs: 3600,
            // Off: tests run a ManualClock far from the database's clock.
            clock_max_skew_secs: 0,
            carrier_url: None,
            carrier_token: None,
            carrier_max_answer_bytes: crate::upstream::http::DEFAULT_MAX_ANSWER_BYTES,
            sim_latency_ms: 0,
            sim_failure_rate: 0.0,
            sim_timeout_rate: 0.0,
            sim_unknown_iccids: vec![],
            instance_id: None,
            console_key: None,
            edge: EdgeSettings::default(),
        }
    }

    /// Tokens that must differ (D-admin-token-is-nobody-elses): the carrier token is sent to the carrier on
    /// every call, so one equal to the admin token would hand the carrier super_admin here.
    ///
    /// # Errors
    /// The variable to blame and why, naming the other.
    pub fn check_tokens(&self) -> Result<(), (&'static str, String)> {
        if self
            .carrier_token
            .as_ref()
            .is_some_and(|c| c.expose() == self.admin_token.expose())
        {
            return Err((
                "RAKUTEN_POLL_CARRIER_TOKEN",
                "is the same as RAKUTEN_POLL_ADMIN_TOKEN: the carrier would hold this service's \
                 super_admin token; give each its own"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Reads the Redis CA file when set, as start-up will, so that a missing or unreadable one is
    /// a bad setting (exit 2) naming its variable, like the TLS files (D-exit-2-or-3).
    ///
    /// # Errors
    /// The variable to blame and why.
    pub fn check_redis_ca(&self) -> Result<(), (&'static str, String)> {
        match &self.redis_ca_path {
            Some(path) => std::fs::read(path).map(drop).map_err(|e| {
                (
                    "RAKUTEN_POLL_REDIS_CA_PATH",
                    format!("cannot read the CA file {}: {e}", path.display()),
                )
            }),
            None => Ok(()),
        }
    }

    /// The clock-skew tolerance of claims, `None` when the check is off.
    pub fn clock_max_skew(&self) -> Option<Duration> {
        (self.clock_max_skew_secs > 0).then(|| Duration::from_secs(self.clock_max_skew_secs))
    }

    /// The address to bind: the deprecated `RAKUTEN_POLL_LISTEN` when set, else host and port.
    pub fn listen_addr(&self) -> SocketAddr {
        self.listen
            .unwrap_or_else(|| SocketAddr::new(self.host, self.port))
    }

    /// The retention job's configuration.
    pub fn retention(&self) -> crate::jobs::retention::Retention {
        const DAY: u64 = 24 * 3600;
        crate::jobs::retention::Retention {
            logs: Duration::from_secs(self.retention_log_days * DAY),
            history: self
                .retention_history_days
                .map(|days| Duration::from_secs(days * DAY)),
            manual_triggers: Duration::from_secs(self.retention_manual_trigger_days * DAY),
            batch: self.retention_batch,
            pause: Duration::from_millis(self.retention_pause_ms),
            every: Duration::from_secs(self.retention_every_secs),
        }
    }

    /// The simulated carrier's configuration.
    pub fn sim_config(&self) -> SimConfig {
        SimConfig {
            latency: Duration::from_millis(self.sim_latency_ms),
            failure_rate: self.sim_failure_rate,
            timeout_rate: self.sim_timeout_rate,
            unknown_iccids: self.sim_unknown_iccids.iter().cloned().collect(),
        }
    }
}
