//! Alert delivery settings (`RAKUTEN_ALERT_*`, `RAKUTEN_STALE_EVIDENCE_MARGIN_SECONDS`): the webhook
//! receivers, their signing key, body format and retry bounds, and the stale task's evidence window.

use rakuten_types::{MIN_TOKEN_CHARS, Secret};

use super::error::SettingsError;

/// `RAKUTEN_ALERT_WEBHOOK_SECRET`: at least [`MIN_TOKEN_CHARS`]. One signed request seen in a
/// receiver's log is enough to guess a short key offline (a 4-character one falls at once).
fn parse_webhook_secret(s: &str) -> Result<Secret, String> {
    if s.chars().count() < MIN_TOKEN_CHARS {
        return Err(format!(
            "the secret must be at least {MIN_TOKEN_CHARS} characters (e.g. `openssl rand -hex 32`)"
        ));
    }
    Ok(Secret::new(s))
}

/// The longest `RAKUTEN_ALERT_WEBHOOK_TIMEOUT_SECONDS` accepted: one delivery attempt holds one of
/// its receiver's slots that long (D-webhook-per-receiver-queues).
pub const MAX_WEBHOOK_ATTEMPT_SECONDS: f64 = 60.0;

/// How a webhook body is shaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum WebhookFormat {
    /// The notice as JSON (`alert_id`, `kind`, `state`, …).
    #[default]
    Json,
    /// Slack-compatible `{"text": "…"}`.
    Slack,
}

/// Alert delivery to a person and the evidence gathered for a stale task.
#[derive(Debug, Clone, clap::Args)]
pub struct AlertSettings {
    /// Comma-separated receivers: each alert raise and clear is POSTed to every one (unset: alerts
    /// are records and log lines only). Kept secret: a receiver URL may embed a token.
    #[arg(long, env = "RAKUTEN_ALERT_WEBHOOK_URLS", hide_env_values = true)]
    pub webhook_urls: Option<Secret>,
    /// HMAC-SHA256 key: each request carries `X-Rakuten-Signature: t=<unix>,v1=<hex>`.
    #[arg(long, env = "RAKUTEN_ALERT_WEBHOOK_SECRET", hide_env_values = true, value_parser = rakuten_cli::secret_arg::secret(parse_webhook_secret))]
    pub webhook_secret: Option<Secret>,
    /// `json` (the notice) or `slack` (`{"text": …}`).
    #[arg(long, env = "RAKUTEN_ALERT_WEBHOOK_FORMAT", value_enum, default_value_t = WebhookFormat::Json)]
    pub webhook_format: WebhookFormat,
    /// Bound of one delivery attempt (connect, send, answer), seconds; at most 60.
    #[arg(
        long,
        env = "RAKUTEN_ALERT_WEBHOOK_TIMEOUT_SECONDS",
        default_value_t = 10.0,
        value_parser = rakuten_cli::number::seconds(),
    )]
    pub webhook_timeout_seconds: f64,
    /// Longest wait between two attempts of one delivery, seconds (exponential from 1 s, jittered).
    #[arg(
        long,
        env = "RAKUTEN_ALERT_WEBHOOK_MAX_BACKOFF_SECONDS",
        default_value_t = 300.0,
        value_parser = rakuten_cli::number::seconds(),
    )]
    pub webhook_max_backoff_seconds: f64,
    /// Failed attempts of one delivery that raise `webhook_failing` for its host.
    #[arg(long, env = "RAKUTEN_ALERT_WEBHOOK_FAILING_AFTER", default_value_t = 3, value_parser = rakuten_cli::number::whole::<u32>(1..=u32::MAX))]
    pub webhook_failing_after: u32,
    /// The evidence `order_list` query of a stale task starts this long before the task's
    /// creation, seconds.
    #[arg(
        long,
        env = "RAKUTEN_STALE_EVIDENCE_MARGIN_SECONDS",
        default_value_t = 3600.0,
        value_parser = rakuten_cli::number::seconds(),
    )]
    pub stale_evidence_margin_seconds: f64,
}

impl Default for AlertSettings {
    fn default() -> Self {
        AlertSettings {
            webhook_urls: None,
            webhook_secret: None,
            webhook_format: WebhookFormat::Json,
            webhook_timeout_seconds: 10.0,
            webhook_max_backoff_seconds: 300.0,
            webhook_failing_after: 3,
            stale_evidence_margin_seconds: 3600.0,
        }
    }
}

impl AlertSettings {
    /// The receivers, trimmed, empty entries dropped.
    pub fn urls(&self) -> Vec<String> {
        self.webhook_urls
            .as_ref()
            .map(|s| {
                s.expose()
                    .split(',')
                    .map(str::trim)
                    .filter(|u| !u.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(super) fn validate(&self) -> Result<(), SettingsError> {
        for u in self.urls() {
            let ok = reqwest::Url::parse(&u)
                .is_ok_and(|p| matches!(p.scheme(), "http" | "https") && p.host_str().is_some());
            if !ok {
                return Err(SettingsError {
                    name: "RAKUTEN_ALERT_WEBHOOK_URLS",
                    reason: "every entry must be an http(s) URL with a host".into(),
                });
            }
        }
        for (name, v) in [
            (
                "RAKUTEN_ALERT_WEBHOOK_TIMEOUT_SECONDS",
                self.webhook_timeout_seconds,
            ),
            (
                "RAKUTEN_ALERT_WEBHOOK_MAX_BACKOFF_SECONDS",
                self.webhook_max_backoff_seconds,
            ),
            (
                "RAKUTEN_STALE_EVIDENCE_MARGIN_SECONDS",
                self.stale_evidence_margin_seconds,
            ),
        ] {
            if !(v.is_finite() && v > 0.0 && v < 1.0e9) {
                return Err(SettingsError {
                    name,
                    reason: format!("must be a positive number of seconds, got {v}"),
                });
            }
        }
        // One attempt's bound: it holds one of its receiver's slots that long
        // (D-webhook-per-receiver-queues).
        let max = MAX_WEBHOOK_ATTEMPT_SECONDS;
        if self.webhook_timeout_seconds > max {
            return Err(SettingsError {
                name: "RAKUTEN_ALERT_WEBHOOK_TIMEOUT_SECONDS",
                reason: format!(
                    "must be at most {max} seconds (one delivery attempt's bound), got {}",
                    self.webhook_timeout_seconds
                ),
            });
        }
        if self.webhook_failing_after == 0 {
            return Err(SettingsError {
                name: "RAKUTEN_ALERT_WEBHOOK_FAILING_AFTER",
                reason: "must be at least 1".into(),
            });
        }
        Ok(())
    }
}
