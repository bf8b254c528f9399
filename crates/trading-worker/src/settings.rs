//! Settings (spec §7, trading side, plus this worker's own knobs): clap derive with `RAKUTEN_*`
//! environment variables and `.env` (loaded by `main` through dotenvy), validated once at start by
//! [`Settings::validate`]. Secrets live in [`Secret`], which never prints.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use rakuten_types::WorkerId;

/// Default amount limit, yen, when neither the intent nor the environment gives one
/// (`docs/DECISIONS.md` D-amount-limit-default; the spec's sample intent uses 30,000).
pub const DEFAULT_MAX_TOTAL_YEN: i64 = 30_000;

pub use rakuten_types::Secret;

/// Which site implementation drives the account.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SiteKind {
    /// Rakuten Ichiba: the steps the spec marks unverified (§10) answer "not implemented" (5003).
    Rakuten,
    /// The simulated shop (`shop-sim`) at `RAKUTEN_SITE_BASE_URL`.
    Sim,
    /// A site adapter process at `RAKUTEN_SITE_ADAPTER_URL` (the adapter protocol).
    Adapter,
}

/// Default `RAKUTEN_SITE_ADAPTER_URL`: loopback.
pub const DEFAULT_SITE_ADAPTER_URL: &str = "http://127.0.0.1:31111";

impl fmt::Display for SiteKind {
    /// The setting's own spelling (`rakuten`, `sim`, `adapter`), as in `RAKUTEN_SITE`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SiteKind::Rakuten => "rakuten",
            SiteKind::Sim => "sim",
            SiteKind::Adapter => "adapter",
        })
    }
}

/// `trading-worker` command line.
#[derive(Debug, Parser)]
#[command(
    name = "trading-worker",
    version,
    about = "Local trading worker (outbound only)"
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
// Parsed once at start: the size difference of the variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the order loop and the post-payment monitor until Ctrl-C / SIGTERM.
    Run(Settings),
    /// Run the site adapter protocol's conformance kit against an adapter that drives the
    /// simulated shop; prints one line per check, exits non-zero when one fails.
    AdapterCheck(AdapterCheckArgs),
}

/// `trading-worker adapter-check`.
#[derive(Debug, Clone, clap::Args)]
pub struct AdapterCheckArgs {
    /// The adapter's base URL.
    #[arg(long, env = "RAKUTEN_SITE_ADAPTER_URL", default_value = DEFAULT_SITE_ADAPTER_URL)]
    pub url: String,
    /// The simulated shop the adapter drives (its `/admin/*` routes set up each check).
    #[arg(long, env = "RAKUTEN_SITE_BASE_URL")]
    pub shop_url: String,
    /// Allow an adapter that is not on loopback.
    #[arg(
        long,
        env = "RAKUTEN_SITE_ADAPTER_ALLOW_REMOTE",
        default_value_t = false
    )]
    pub allow_remote: bool,
    /// Timeout of one adapter call, seconds.
    #[arg(long, default_value_t = 60.0)]
    pub timeout_seconds: f64,
}

/// Every setting of the worker.
#[derive(Debug, Clone, clap::Args)]
pub struct Settings {
    /// Gateway base URL; empty = the order loop does not start (§7).
    #[arg(long, env = "RAKUTEN_ORDER_GATEWAY_URL", default_value = "")]
    pub gateway_url: String,
    /// This worker's id (default: the host name). Must be unique per worker process and
    /// account: the gateway re-grants a worker's active task to its id first, so two processes
    /// with one id take the task from each other on every poll. Two processes must never share
    /// a journal either (the worker refuses to start when `{db}.lock` is held).
    #[arg(long, env = "RAKUTEN_WORKER_ID")]
    pub worker_id: Option<String>,
    /// Local SQLite journal; one worker process per journal (locked through `{path}.lock`).
    #[arg(
        long,
        env = "RAKUTEN_TRADING_DB_PATH",
        default_value = "data/trading.db"
    )]
    pub db_path: PathBuf,
    /// Evidence root directory (§6.1).
    #[arg(long, env = "RAKUTEN_EVIDENCE_DIR", default_value = "data/evidence")]
    pub evidence_dir: PathBuf,
    /// Scraper service base URL for `POST /api/item_detail`; empty with the sim site = the sim.
    #[arg(long, env = "RAKUTEN_SCRAPER_BASE_URL", default_value = "")]
    pub scraper_base_url: String,
    /// Amount limit, yen, when the intent has no `max_total_yen`.
    #[arg(long, env = "RAKUTEN_ORDER_MAX_TOTAL_YEN", default_value_t = DEFAULT_MAX_TOTAL_YEN)]
    pub max_total_yen: i64,
    /// Bearer token for the gateway (and the scraper).
    #[arg(
        long,
        env = "RAKUTEN_API_TOKEN",
        default_value = "",
        hide_env_values = true,
        hide_default_value = true
    )]
    pub api_token: Secret,
    /// Site implementation.
    #[arg(long, env = "RAKUTEN_SITE", value_enum, default_value = "rakuten")]
    pub site: SiteKind,
    /// Base URL of the simulated shop (site `sim` only).
    #[arg(long, env = "RAKUTEN_SITE_BASE_URL", default_value = "")]
    pub site_base_url: String,
    /// Base URL of the site adapter (site `adapter` only); must be loopback unless
    /// `RAKUTEN_SITE_ADAPTER_ALLOW_REMOTE` is true.
    #[arg(long, env = "RAKUTEN_SITE_ADAPTER_URL", default_value = DEFAULT_SITE_ADAPTER_URL)]
    pub site_adapter_url: String,
    /// Allow a site adapter that is not on loopback (it sees the account's pages and session).
    #[arg(
        long,
        env = "RAKUTEN_SITE_ADAPTER_ALLOW_REMOTE",
        default_value_t = false
    )]
    pub site_adapter_allow_remote: bool,
    /// Session cookie value for the simulated shop.
    #[arg(
        long,
        env = "RAKUTEN_SITE_SESSION",
        default_value = "sim-session",
        hide_env_values = true,
        hide_default_value = true
    )]
    pub site_session: Secret,
    /// Long-poll wait of a lease request, seconds (the gateway caps it).
    #[arg(long, env = "RAKUTEN_LEASE_WAIT_SECONDS", default_value_t = 30)]
    pub lease_wait_seconds: u64,
    /// Lease renewal period while executing, seconds (fractional allowed).
    #[arg(
        long,
        env = "RAKUTEN_LEASE_RENEW_INTERVAL_SECONDS",
        default_value_t = 60.0
    )]
    pub renew_interval_seconds: f64,
    /// Post-payment monitor period, seconds (fractional allowed).
    #[arg(
        long,
        env = "RAKUTEN_MONITOR_INTERVAL_SECONDS",
        default_value_t = 300.0
    )]
    pub monitor_interval_seconds: f64,
    /// Largest backoff between gateway retries, seconds.
    #[arg(
        long,
        env = "RAKUTEN_GATEWAY_RETRY_MAX_SECONDS",
        default_value_t = 10.0
    )]
    pub retry_max_seconds: f64,
    /// Timeout of one site or gateway request (not the long-poll), seconds.
    #[arg(long, env = "RAKUTEN_HTTP_TIMEOUT_SECONDS", default_value_t = 30.0)]
    pub http_timeout_seconds: f64,
    /// PEM CA certificate the gateway's HTTPS certificate may chain to, besides the system roots
    /// (a private CA or a self-signed gateway). The certificate is always verified.
    #[arg(long, env = "RAKUTEN_GATEWAY_CA_FILE")]
    pub gateway_ca_file: Option<PathBuf>,
    /// How many order-list pages the recovery check reads at most.
    #[arg(long, env = "RAKUTEN_VERIFY_MAX_PAGES", default_value_t = 5)]
    pub verify_max_pages: u32,
    /// Upper bound of one account query's site read, account-lock wait included, seconds
    /// (§11.5); over it the query is reported failed with 5007.
    #[arg(
        long,
        env = "RAKUTEN_ACCOUNT_QUERY_TIMEOUT_SECONDS",
        default_value_t = 120.0
    )]
    pub account_query_timeout_seconds: f64,
    /// Order-list pages an `order_list` query reads when it does not say `max_pages` (§11.5).
    #[arg(
        long,
        env = "RAKUTEN_ACCOUNT_QUERY_DEFAULT_MAX_PAGES",
        default_value_t = 3
    )]
    pub account_query_default_max_pages: u32,
    /// TEST ONLY: abort the process at a step boundary:
    /// `before_submit | after_submit | before_report[:state] | after_report[:state]` (state
    /// defaults to `ordered`). Only in builds with the cargo feature `failpoints`.
    #[cfg(feature = "failpoints")]
    #[arg(long, env = "RAKUTEN_WORKER_FAILPOINT", default_value = "")]
    pub failpoint: String,
}

impl Default for Settings {
    /// The documented defaults (the same as the command line's), without reading the environment.
    fn default() -> Self {
        Settings {
            gateway_url: String::new(),
            worker_id: None,
            db_path: "data/trading.db".into(),
            evidence_dir: "data/evidence".into(),
            scraper_base_url: String::new(),
            max_total_yen: DEFAULT_MAX_TOTAL_YEN,
            api_token: Secret::default(),
            site: SiteKind::Rakuten,
            site_base_url: String::new(),
            site_adapter_url: DEFAULT_SITE_ADAPTER_URL.into(),
            site_adapter_allow_remote: false,
            site_session: Secret::new("sim-session"),
            lease_wait_seconds: 30,
            renew_interval_seconds: 60.0,
            monitor_interval_seconds: 300.0,
            retry_max_seconds: 10.0,
            http_timeout_seconds: 30.0,
            gateway_ca_file: None,
            verify_max_pages: 5,
            account_query_timeout_seconds: 120.0,
            account_query_default_max_pages: 3,
            #[cfg(feature = "failpoints")]
            failpoint: String::new(),
        }
    }
}

/// A setting that cannot work.
#[derive(Debug, thiserror::Error)]
#[error("invalid setting {name}: {reason}")]
pub struct SettingsError {
    /// The environment variable.
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

fn positive(name: &'static str, v: f64) -> Result<Duration, SettingsError> {
    if v.is_finite() && v > 0.0 && v < 86_400.0 {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(bad(name, "must be a number of seconds > 0 and < 86400"))
    }
}

fn url_or_empty(name: &'static str, s: &str) -> Result<Option<String>, SettingsError> {
    let s = s.trim().trim_end_matches('/');
    if s.is_empty() {
        return Ok(None);
    }
    let u = reqwest::Url::parse(s).map_err(|e| bad(name, e.to_string()))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(bad(name, "must be an http(s) URL"));
    }
    Ok(Some(s.to_owned()))
}

/// Settings after validation, in the units the code uses.
#[derive(Debug, Clone)]
pub struct Valid {
    /// `None`: the order loop does not start.
    pub gateway_url: Option<String>,
    /// Worker id.
    pub worker_id: WorkerId,
    /// Journal path.
    pub db_path: PathBuf,
    /// Evidence root.
    pub evidence_dir: PathBuf,
    /// Scraper base URL (`None` with the rakuten site: item details are not available).
    pub scraper_base_url: Option<String>,
    /// Default amount limit, yen.
    pub max_total_yen: i64,
    /// Gateway token.
    pub api_token: Secret,
    /// Site implementation.
    pub site: SiteKind,
    /// Simulated shop URL.
    pub site_base_url: Option<String>,
    /// Site adapter URL (checked: loopback unless allowed), site `adapter` only.
    pub site_adapter_url: Option<String>,
    /// Simulated shop session.
    pub site_session: Secret,
    /// Long-poll wait, seconds.
    pub lease_wait_seconds: u64,
    /// Renewal period.
    pub renew_interval: Duration,
    /// Monitor period.
    pub monitor_interval: Duration,
    /// Largest retry backoff.
    pub retry_max: Duration,
    /// Per-request timeout.
    pub http_timeout: Duration,
    /// Extra root the gateway's certificate may chain to (`RAKUTEN_GATEWAY_CA_FILE`).
    pub gateway_ca: Option<reqwest::Certificate>,
    /// Recovery listing page limit.
    pub verify_max_pages: u32,
    /// One account query's bound, lock wait included.
    pub account_query_timeout: Duration,
    /// Default `max_pages` of an `order_list` query.
    pub account_query_default_max_pages: u32,
    /// The crash point (feature `failpoints`; otherwise always off).
    pub failpoint: crate::failpoint::Failpoint,
}

impl Settings {
    /// Checks every setting once.
    ///
    /// # Errors
    /// [`SettingsError`] naming the first bad variable.
    pub fn validate(&self) -> Result<Valid, SettingsError> {
        let worker_id = match &self.worker_id {
            Some(w) if !w.trim().is_empty() => w.clone(),
            _ => hostname::get()
                .ok()
                .and_then(|h| h.into_string().ok())
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "local-worker".into()),
        };
        let worker_id =
            WorkerId::parse(&worker_id).map_err(|e| bad("RAKUTEN_WORKER_ID", e.to_string()))?;
        let site_base_url = url_or_empty("RAKUTEN_SITE_BASE_URL", &self.site_base_url)?;
        if self.site == SiteKind::Sim && site_base_url.is_none() {
            return Err(bad(
                "RAKUTEN_SITE_BASE_URL",
                "required when RAKUTEN_SITE=sim",
            ));
        }
        let site_adapter_url = if self.site == SiteKind::Adapter {
            Some(
                crate::site::adapter::check_adapter_url(
                    &self.site_adapter_url,
                    self.site_adapter_allow_remote,
                )
                .map_err(|e| bad("RAKUTEN_SITE_ADAPTER_URL", e.to_string()))?,
            )
        } else {
            None
        };
        let mut scraper_base_url =
            url_or_empty("RAKUTEN_SCRAPER_BASE_URL", &self.scraper_base_url)?;
        if scraper_base_url.is_none() && self.site == SiteKind::Sim {
            // The simulated shop also answers the scraper's item_detail.
            scraper_base_url = site_base_url.clone();
        }
        if self.max_total_yen <= 0 {
            return Err(bad("RAKUTEN_ORDER_MAX_TOTAL_YEN", "must be > 0 yen"));
        }
        if self.lease_wait_seconds > 600 {
            return Err(bad("RAKUTEN_LEASE_WAIT_SECONDS", "must be at most 600"));
        }
        if !(1..=rakuten_types::query::MAX_PAGES_LIMIT)
            .contains(&self.account_query_default_max_pages)
        {
            return Err(bad(
                "RAKUTEN_ACCOUNT_QUERY_DEFAULT_MAX_PAGES",
                format!("must be 1..={}", rakuten_types::query::MAX_PAGES_LIMIT),
            ));
        }
        if !(1..=100).contains(&self.verify_max_pages) {
            return Err(bad("RAKUTEN_VERIFY_MAX_PAGES", "must be 1..=100"));
        }
        let gateway_url = url_or_empty("RAKUTEN_ORDER_GATEWAY_URL", &self.gateway_url)?;
        if gateway_url.is_some() && self.api_token.expose().is_empty() {
            return Err(bad(
                "RAKUTEN_API_TOKEN",
                "required when RAKUTEN_ORDER_GATEWAY_URL is set",
            ));
        }
        // The gateway refuses tokens under 16 characters at its own start (D-secret-minimum-lengths), so a
        // shorter one here can only ever be answered 401.
        if gateway_url.is_some() && !rakuten_types::secret::is_token(self.api_token.expose()) {
            return Err(bad(
                "RAKUTEN_API_TOKEN",
                format!(
                    "must be at least {} characters (at most {}) without spaces, as the gateway \
                     requires of its tokens",
                    rakuten_types::MIN_TOKEN_CHARS,
                    rakuten_types::MAX_TOKEN_CHARS
                ),
            ));
        }
        if self.site != SiteKind::Sim && scraper_base_url.is_none() && gateway_url.is_some() {
            // Without it every task would fail at its first step (item detail): refuse to start.
            return Err(bad(
                "RAKUTEN_SCRAPER_BASE_URL",
                "required with RAKUTEN_SITE=rakuten or adapter: every order reads the item's purchase block from the scraper (POST /api/item_detail)",
            ));
        }
        #[cfg(feature = "failpoints")]
        let failpoint = crate::failpoint::Failpoint::parse(&self.failpoint)
            .map_err(|e| bad("RAKUTEN_WORKER_FAILPOINT", e))?;
        #[cfg(not(feature = "failpoints"))]
        let failpoint = crate::failpoint::Failpoint::default();
        Ok(Valid {
            gateway_url,
            worker_id,
            db_path: self.db_path.clone(),
            evidence_dir: self.evidence_dir.clone(),
            scraper_base_url,
            max_total_yen: self.max_total_yen,
            api_token: self.api_token.clone(),
            site: self.site,
            site_base_url,
            site_adapter_url,
            site_session: self.site_session.clone(),
            lease_wait_seconds: self.lease_wait_seconds,
            renew_interval: positive(
                "RAKUTEN_LEASE_RENEW_INTERVAL_SECONDS",
                self.renew_interval_seconds,
            )?,
            monitor_interval: positive(
                "RAKUTEN_MONITOR_INTERVAL_SECONDS",
                self.monitor_interval_seconds,
            )?,
            retry_max: positive("RAKUTEN_GATEWAY_RETRY_MAX_SECONDS", self.retry_max_seconds)?,
            http_timeout: positive("RAKUTEN_HTTP_TIMEOUT_SECONDS", self.http_timeout_seconds)?,
            gateway_ca: (self.gateway_ca_file.as_ref())
                .map(|p| {
                    let pem = std::fs::read(p).map_err(|e| e.to_string());
                    pem.and_then(|b| reqwest::Certificate::from_pem(&b).map_err(|e| e.to_string()))
                        .map_err(|e| {
                            bad("RAKUTEN_GATEWAY_CA_FILE", format!("{}: {e}", p.display()))
                        })
                })
                .transpose()?,
            verify_max_pages: self.verify_max_pages,
            account_query_timeout: positive(
                "RAKUTEN_ACCOUNT_QUERY_TIMEOUT_SECONDS",
                self.account_query_timeout_seconds,
            )?,
            account_query_default_max_pages: self.account_query_default_max_pages,
            failpoint,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_leave_the_order_loop_off() {
        let v = Settings::default().validate().unwrap();
        assert!(v.gateway_url.is_none());
        assert_eq!(v.max_total_yen, DEFAULT_MAX_TOTAL_YEN);
        assert_eq!(v.renew_interval, Duration::from_secs(60));
        assert_eq!(v.account_query_timeout, Duration::from_secs(120));
        assert_eq!(v.account_query_default_max_pages, 3);
    }

    #[test]
    fn bad_values_name_their_variable() {
        let sim = Settings {
            site: SiteKind::Sim,
            ..Settings::default()
        };
        assert_eq!(sim.validate().unwrap_err().name, "RAKUTEN_SITE_BASE_URL");
        let id = Settings {
            worker_id: Some("a/b".into()),
            ..Settings::default()
        };
        assert_eq!(id.validate().unwrap_err().name, "RAKUTEN_WORKER_ID");
        let renew = Settings {
            renew_interval_seconds: 0.0,
            ..Settings::default()
        };
        assert_eq!(
            renew.validate().unwrap_err().name,
            "RAKUTEN_LEASE_RENEW_INTERVAL_SECONDS"
        );
        let url = Settings {
            gateway_url: "ftp://x".into(),
            ..Settings::default()
        };
        assert_eq!(
            url.validate().unwrap_err().name,
            "RAKUTEN_ORDER_GATEWAY_URL"
        );
    }

    #[test]
    fn rakuten_site_without_a_scraper_url_is_refused_at_start() {
        let s = Settings {
            gateway_url: "http://127.0.0.1:31109".into(),
            api_token: Secret::new("t"),
            ..Settings::default()
        };
        // A token the gateway could never hold is refused at start.
        let e = s.validate().unwrap_err();
        assert_eq!(e.name, "RAKUTEN_API_TOKEN");
        assert!(e.reason.contains("at least 16 characters"), "{e}");
        let s = Settings {
            api_token: Secret::new("worker-token-0123456789"),
            ..s
        };
        let e = s.validate().unwrap_err();
        assert_eq!(e.name, "RAKUTEN_SCRAPER_BASE_URL");
        assert!(e.reason.contains("RAKUTEN_SITE=rakuten"), "{e}");
        let ok = Settings {
            scraper_base_url: "http://127.0.0.1:31107".into(),
            ..s
        };
        assert!(ok.validate().is_ok());
    }

    #[test]
    fn a_gateway_ca_file_is_read_once_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let pem = dir.path().join("ca.pem");
        std::fs::write(&pem, rakuten_edge::testing::TestCa::new("gw CA").pem()).unwrap();
        let ok = Settings {
            gateway_ca_file: Some(pem),
            ..Settings::default()
        };
        assert!(ok.validate().unwrap().gateway_ca.is_some());
        for bad in [dir.path().join("missing.pem"), dir.path().to_path_buf()] {
            let s = Settings {
                gateway_ca_file: Some(bad),
                ..Settings::default()
            };
            assert_eq!(s.validate().unwrap_err().name, "RAKUTEN_GATEWAY_CA_FILE");
        }
    }

    #[test]
    fn non_loopback_site_adapter_url_is_refused_unless_allowed() {
        let remote = Settings {
            site: SiteKind::Adapter,
            site_adapter_url: "http://192.0.2.7:31111".into(),
            ..Settings::default()
        };
        let e = remote.validate().unwrap_err();
        assert_eq!(e.name, "RAKUTEN_SITE_ADAPTER_URL");
        assert!(e.reason.contains("loopback"), "{e}");
        let allowed = Settings {
            site_adapter_allow_remote: true,
            ..remote.clone()
        };
        assert_eq!(
            allowed.validate().unwrap().site_adapter_url.as_deref(),
            Some("http://192.0.2.7:31111")
        );
        let default = Settings {
            site: SiteKind::Adapter,
            ..Settings::default()
        };
        assert_eq!(
            default.validate().unwrap().site_adapter_url.as_deref(),
            Some(DEFAULT_SITE_ADAPTER_URL)
        );
    }

    #[test]
    fn secrets_never_print() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?} {s}"), "*** ***");
        let settings = Settings {
            api_token: s,
            ..Settings::default()
        };
        assert!(!format!("{settings:?}").contains("hunter2"));
    }
}
