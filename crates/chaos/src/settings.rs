//! Settings of one chaos run: clap derive (`chaos --orders 300 --seed 7 …`, every flag also a
//! `CHAOS_*` variable), validated once by [`Settings::validate`].

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::faults::FaultKind;

// Defined with the processes a run starts, which depend on it; the settings only parse it.
pub use crate::procs::SiteChoice;

/// `chaos` command line.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "chaos",
    version,
    about = "Fault-injection harness: runs the real gateway, shop-sim and worker, injects faults, checks at-most-once"
)]
pub struct Settings {
    /// Order intents the upstream submits (each with its own task_id).
    #[arg(long, env = "RAKUTEN_CHAOS_ORDERS", default_value_t = 300)]
    pub orders: u32,

    /// Seed of every random choice (fault kinds, moments, rates, intents). Printed at start.
    #[arg(long, env = "RAKUTEN_CHAOS_SEED", default_value_t = 7)]
    pub seed: u64,

    /// Global deadline of the whole run, seconds: orders still unfinished then are violations.
    #[arg(long, env = "RAKUTEN_CHAOS_DEADLINE_SECONDS", default_value_t = 900)]
    pub deadline_seconds: u64,

    /// Upstream submission rate, orders per second.
    #[arg(long, env = "RAKUTEN_CHAOS_SUBMIT_RATE", default_value_t = 10.0)]
    pub submit_rate: f64,

    /// Mean pause between two faults, seconds (the actual pause is uniform in 0.5×…1.5×).
    #[arg(
        long,
        env = "RAKUTEN_CHAOS_FAULT_INTERVAL_SECONDS",
        default_value_t = 2.0
    )]
    pub fault_interval_seconds: f64,

    /// Fault kinds to inject (comma separated); default: all of them. Every listed kind is
    /// injected at least once, in a seeded order, before kinds are drawn at random.
    #[arg(long, env = "RAKUTEN_CHAOS_FAULTS", value_delimiter = ',', value_enum)]
    pub faults: Vec<FaultKind>,

    /// Injectors running at once (their faults overlap); each has its own seeded RNG.
    #[arg(long, env = "RAKUTEN_CHAOS_INJECTORS", default_value_t = 1)]
    pub injectors: u32,

    /// The gateway's `RAKUTEN_LEASE_TTL_SECONDS` (short, so that lease expiry happens).
    #[arg(long, env = "RAKUTEN_CHAOS_LEASE_TTL_SECONDS", default_value_t = 4.0)]
    pub lease_ttl_seconds: f64,

    /// How many times the operator reclaims one stale task before leaving it to a human.
    #[arg(long, env = "RAKUTEN_CHAOS_MAX_RECLAIMS", default_value_t = 8)]
    pub max_reclaims: u32,

    /// Directory holding `order-gateway`, `trading-worker` and `shop-sim`; default: the directory
    /// of this executable (`target/debug` for `cargo run -p chaos`).
    #[arg(long, env = "RAKUTEN_CHAOS_BIN_DIR")]
    pub bin_dir: Option<PathBuf>,

    /// Run `cargo build -p order-gateway -p trading-worker -p shop-sim --features
    /// trading-worker/failpoints` first.
    #[arg(long, env = "RAKUTEN_CHAOS_BUILD")]
    pub build: bool,

    /// Keep the run directory (databases, logs, evidence) here instead of a temporary one that is
    /// deleted on success.
    #[arg(long, env = "RAKUTEN_CHAOS_DATA_DIR")]
    pub data_dir: Option<PathBuf>,

    /// Gateway database URL (`RAKUTEN_GATEWAY_DB_URL`), e.g. `postgres://…`; empty = the
    /// default SQLite file in the run directory. Needed for more than one gateway.
    #[arg(
        long,
        env = "RAKUTEN_CHAOS_GATEWAY_DB_URL",
        default_value = "",
        hide_env_values = true
    )]
    pub gateway_db_url: String,

    /// Gateway instances behind the proxy (more than one needs a shared database URL).
    #[arg(long, env = "RAKUTEN_CHAOS_GATEWAYS", default_value_t = 1)]
    pub gateways: u32,

    /// How the worker works the shop: `sim` (the worker's own HTTP seam), `http-adapter` or
    /// `browser-adapter` (a `site-adapter` process between worker and shop, speaking the site
    /// adapter protocol; the browser one drives headless Chromium and writes a PNG per step).
    #[arg(long, env = "RAKUTEN_CHAOS_SITE", value_enum, default_value = "sim")]
    pub site: SiteChoice,

    /// Print each fault as it is injected.
    #[arg(long, short, env = "RAKUTEN_CHAOS_VERBOSE")]
    pub verbose: bool,
}

/// A setting that cannot work.
#[derive(Debug, thiserror::Error)]
#[error("invalid setting {name}: {reason}")]
pub struct SettingsError {
    /// The flag.
    pub name: &'static str,
    /// Why.
    pub reason: String,
}

fn bad(name: &'static str, reason: impl Into<String>) -> SettingsError {
    SettingsError {
        name,
        reason: reason.into(),
    }
}

impl Settings {
    /// Settings for a test: `orders` orders, the given seed, every fault kind, defaults otherwise.
    pub fn for_tests(orders: u32, seed: u64) -> Self {
        Settings {
            orders,
            seed,
            deadline_seconds: 120,
            submit_rate: 10.0,
            fault_interval_seconds: 1.5,
            faults: Vec::new(),
            injectors: 1,
            lease_ttl_seconds: 3.0,
            max_reclaims: 8,
            bin_dir: None,
            build: false,
            data_dir: None,
            gateway_db_url: String::new(),
            gateways: 1,
            site: SiteChoice::Sim,
            verbose: false,
        }
    }

    /// Checks every value once.
    ///
    /// # Errors
    /// The first bad flag.
    pub fn validate(&self) -> Result<(), SettingsError> {
        if !(1..=100_000).contains(&self.orders) {
            return Err(bad("--orders", "must be 1..=100000"));
        }
        if !(self.submit_rate.is_finite() && self.submit_rate > 0.0) {
            return Err(bad("--submit-rate", "must be a positive number"));
        }
        if !(self.fault_interval_seconds.is_finite() && self.fault_interval_seconds > 0.0) {
            return Err(bad("--fault-interval-seconds", "must be a positive number"));
        }
        if !(self.lease_ttl_seconds.is_finite() && (1.0..=600.0).contains(&self.lease_ttl_seconds))
        {
            return Err(bad("--lease-ttl-seconds", "must be 1..=600 seconds"));
        }
        if !(1..=4).contains(&self.injectors) {
            return Err(bad("--injectors", "must be 1..=4"));
        }
        if self.deadline_seconds < 10 {
            return Err(bad("--deadline-seconds", "must be at least 10"));
        }
        if self.gateways == 0 || self.gateways > 16 {
            return Err(bad("--gateways", "must be 1..=16"));
        }
        if self.gateways > 1 && !self.gateway_db_url.starts_with("postgres") {
            return Err(bad(
                "--gateways",
                "several gateways share one queue only on PostgreSQL (--gateway-db-url postgres://…)",
            ));
        }
        Ok(())
    }

    /// The fault kinds of this run (all when none were named).
    pub fn fault_kinds(&self) -> Vec<FaultKind> {
        if self.faults.is_empty() {
            FaultKind::ALL.to_vec()
        } else {
            let mut v = self.faults.clone();
            v.dedup();
            v
        }
    }

    /// The `chaos …` command line that repeats this run's choices (the seed fixes every random
    /// choice; moments relative to the work still depend on scheduling).
    pub fn command_line(&self) -> String {
        let mut c = format!(
            "cargo run -p chaos -- --orders {} --seed {} --deadline-seconds {} --submit-rate {} --fault-interval-seconds {} --lease-ttl-seconds {} --max-reclaims {}",
            self.orders,
            self.seed,
            self.deadline_seconds,
            self.submit_rate,
            self.fault_interval_seconds,
            self.lease_ttl_seconds,
            self.max_reclaims
        );
        if !self.faults.is_empty() {
            let names: Vec<String> = self
                .faults
                .iter()
                .map(|k| k.name().replace('_', "-"))
                .collect();
            c.push_str(&format!(" --faults {}", names.join(",")));
        }
        if self.injectors > 1 {
            c.push_str(&format!(" --injectors {}", self.injectors));
        }
        if self.gateways > 1 {
            c.push_str(&format!(" --gateways {}", self.gateways));
        }
        if !self.gateway_db_url.is_empty() {
            c.push_str(" --gateway-db-url <url>");
        }
        if self.site != SiteChoice::Sim {
            c.push_str(&format!(" --site {}", self.site.name()));
        }
        c
    }

    /// The lease TTL.
    pub fn lease_ttl(&self) -> Duration {
        Duration::from_secs_f64(self.lease_ttl_seconds)
    }

    /// The global deadline.
    pub fn deadline(&self) -> Duration {
        Duration::from_secs(self.deadline_seconds)
    }
}

/// The variables' names before they followed the `RAKUTEN_*` convention; still read, with a
/// warning, when the new name is not set (D-settings-convention).
pub const DEPRECATED_ENV: [rakuten_cli::Alias; 15] = [
    rakuten_cli::Alias {
        deprecated: "CHAOS_ORDERS",
        current: "RAKUTEN_CHAOS_ORDERS",
    },
    rakuten_cli::Alias {
        deprecated: "CHAOS_SEED",
        current: "RAKUTEN_CHAOS_SEED",
    },
    rakuten_cli::Alias {
        deprecated: "CHAOS_DEADLINE_SECONDS",
        current: "RAKUTEN_CHAOS_DEADLINE_SECONDS",
    },
    rakuten_cli::Alias {
        deprecated: "CHAOS_SUBMIT_RATE",
        current: "RAKUTEN_CHAOS_SUBMIT_RATE",
    },
    rakuten_cli::Alias {
        deprecated: "CHAOS_FAULT_INTERVAL_SECONDS",
        current: "RAKUTEN_CHAOS_FAULT_INTERVAL_SECONDS",
    },
    rakuten_cli::Alias {
        deprecated: "CHAOS_FAULTS",
        current: "RAKUTEN_CHAOS_FAULTS",
    },
    rakuten_cli::Alias {
        deprecated: "CHAOS_INJECTORS",
        current: "RAKUTEN_CHAOS_INJECTORS",
    },
    rakuten_cli::Alias {
        deprecated: "CHAOS_LEASE_TTL_SECONDS",
        current: "RAKUTEN_CHAOS_LEASE_TTL_SECONDS",
    },
    rakuten_cli::Alias {
        deprecated: "CHAOS_MAX_RECLAIMS",
        current: "RAKUTEN_CHAOS_MAX_RECLAIMS",
    },
    rakuten_cli::Alias {
        deprecated: "CHAOS_BIN_DIR",
        current: "RAKUTEN_CHAOS_BIN_DIR",
    },
    rakuten_cli::Alias {
        deprecated: "CHAOS_BUILD",
        current: "RAKUTEN_CHAOS_BUILD",
    },
    rakuten_cli::Alias {
        deprecated: "CHAOS_DATA_DIR",
        current: "RAKUTEN_CHAOS_DATA_DIR",
    },
    rakuten_cli::Alias {
        deprecated: "CHAOS_GATEWAY_DB_URL",
        current: "RAKUTEN_CHAOS_GATEWAY_DB_URL",
    },
    rakuten_cli::Alias {
        deprecated: "CHAOS_GATEWAYS",
        current: "RAKUTEN_CHAOS_GATEWAYS",
    },
    rakuten_cli::Alias {
        deprecated: "CHAOS_VERBOSE",
        current: "RAKUTEN_CHAOS_VERBOSE",
    },
];
