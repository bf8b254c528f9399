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
    /// Serve the HTTP API and run the executor and expiry loops.
    Serve(Settings),
}

/// A secret string: never printed by Debug or Display.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The secret itself; use only where it is needed.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

fn parse_secret(s: &str) -> Result<Secret, String> {
    if s.chars().count() < 16 || s.len() > 256 || s.chars().any(|c| c.is_control() || c == ' ') {
        return Err("the admin token must be 16-256 characters without spaces".into());
    }
    Ok(Secret(s.to_owned()))
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
    /// Listen address.
    #[arg(long, env = "RAKUTEN_POLL_LISTEN", default_value = "127.0.0.1:8090")]
    pub listen: SocketAddr,
    /// SQLite database file.
    #[arg(
        long,
        env = "RAKUTEN_POLL_DB_PATH",
        default_value = "data/card-polling.db"
    )]
    pub db_path: PathBuf,
    /// Bootstrap super_admin Bearer token (16-256 characters); account id `admin`.
    #[arg(long, env = "RAKUTEN_POLL_ADMIN_TOKEN", hide_env_values = true, value_parser = parse_secret)]
    pub admin_token: Secret,
    /// Polling task types with their normal intervals in seconds: `name=secs,…`.
    #[arg(long, env = "RAKUTEN_POLL_TASK_TYPES", default_value = DEFAULT_TASK_TYPES, value_parser = TaskTypes::parse)]
    pub task_types: TaskTypes,
    /// Milliseconds between executor rounds (until issue #6's scheduler replaces the timer).
    #[arg(long, env = "RAKUTEN_POLL_EXECUTOR_TICK_MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub executor_tick_ms: u64,
    /// Due items taken per executor round.
    #[arg(long, env = "RAKUTEN_POLL_EXECUTOR_BATCH", default_value_t = 200, value_parser = clap::value_parser!(i64).range(1..=10_000))]
    pub executor_batch: i64,
    /// Concurrent executions per round.
    #[arg(long, env = "RAKUTEN_POLL_EXECUTOR_CONCURRENCY", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub executor_concurrency: u64,
    /// Seconds between expiry job runs.
    #[arg(long, env = "RAKUTEN_POLL_EXPIRY_EVERY_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub expiry_every_secs: u64,
    /// Simulated carrier: latency per call, milliseconds.
    #[arg(long, env = "RAKUTEN_POLL_SIM_LATENCY_MS", default_value_t = 50, value_parser = clap::value_parser!(u64).range(0..=60_000))]
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
}

impl Settings {
    /// Settings for tests: given database and admin token, defaults elsewhere.
    pub fn for_tests(db_path: PathBuf, admin_token: &str) -> Self {
        Settings {
            listen: "127.0.0.1:0".parse().expect("literal address"),
            db_path,
            admin_token: Secret::new(admin_token),
            task_types: TaskTypes::default(),
            executor_tick_ms: 1000,
            executor_batch: 200,
            executor_concurrency: 16,
            expiry_every_secs: 60,
            sim_latency_ms: 0,
            sim_failure_rate: 0.0,
            sim_timeout_rate: 0.0,
            sim_unknown_iccids: vec![],
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
