//! Alert delivery to a person: every row of the durable outbox (`alert_outbox`, one
//! per alert event and receiver, written in the same transaction as the alert) is POSTed until
//! the receiver answers 2xx. At least once: a receiver that is down, answers non-2xx or times out
//! is tried again after an exponential backoff with jitter (`backon`'s schedule, stored as the
//! row's `next_attempt_at`, so the schedule survives a restart); a gateway killed with -9 finds
//! the row pending and delivers after restart. Receivers deduplicate on `event_id` (also in the
//! `X-Rakuten-Event-Id` header).
//!
//! Body: the [`AlertNotice`] JSON, or `{"text": …}` with `RAKUTEN_ALERT_WEBHOOK_FORMAT=slack`.
//! With `RAKUTEN_ALERT_WEBHOOK_SECRET`, `X-Rakuten-Signature: t=<unix seconds>,v1=<hex
//! HMAC-SHA256(secret, "<t>.<body>")>` ([`sign`], [`verify`]): Stripe's scheme, so a receiver
//! can refuse forged and replayed requests.

use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use futures::StreamExt;
use hmac::{Hmac, Mac};
use rakuten_types::alert::{AlertNotice, DeliveryEvent};
use rakuten_types::{Clock, Timestamp};
use sha2::Sha256;
use tokio_util::sync::CancellationToken;

use crate::settings::{AlertSettings, Secret, WebhookFormat};
use crate::store::operator::{DeliveryAttempt, OutboxItem};
use crate::store::{OperatorStore, OrderStore, StoreError};
use crate::telemetry::GatewayMetrics;

/// The signature header.
pub const SIGNATURE_HEADER: &str = "X-Rakuten-Signature";
/// The event id header (the same as the body's `event_id`).
pub const EVENT_ID_HEADER: &str = "X-Rakuten-Event-Id";
/// Rows attempted per run.
const BATCH: i64 = 100;
/// Receivers called at once.
const CONCURRENCY: usize = 8;

/// `t=<unix>,v1=<hex HMAC-SHA256(secret, "t.body")>`.
pub fn sign(secret: &[u8], unix_seconds: i64, body: &[u8]) -> String {
    format!(
        "t={unix_seconds},v1={}",
        hex(&mac(secret, unix_seconds, body))
    )
}

fn mac(secret: &[u8], unix_seconds: i64, body: &[u8]) -> Vec<u8> {
    // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret)
        .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    m.update(unix_seconds.to_string().as_bytes());
    m.update(b".");
    m.update(body);
    m.finalize().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Checks a signature header as a receiver would: the MAC matches (constant time) and `t` is
/// within `tolerance_seconds` of `now_unix` (replay protection).
pub fn verify(
    secret: &[u8],
    header: &str,
    body: &[u8],
    now_unix: i64,
    tolerance_seconds: i64,
) -> bool {
    let mut t = None;
    let mut v1 = None;
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", v)) => t = v.parse::<i64>().ok(),
            Some(("v1", v)) => v1 = Some(v),
            _ => {}
        }
    }
    let (Some(t), Some(v1)) = (t, v1) else {
        return false;
    };
    if (now_unix - t).abs() > tolerance_seconds {
        return false;
    }
    let Ok(mut m) = <Hmac<Sha256> as Mac>::new_from_slice(secret) else {
        return false;
    };
    m.update(t.to_string().as_bytes());
    m.update(b".");
    m.update(body);
    let Some(sent) = unhex(v1) else {
        return false;
    };
    m.verify_slice(&sent).is_ok()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// What the delivery job needs.
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    /// Period of [`WebhookDelivery::run`].
    pub interval: Duration,
    /// Signing key.
    pub secret: Option<Secret>,
    /// Body shape.
    pub format: WebhookFormat,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Longest wait between two attempts.
    pub max_backoff: Duration,
}

impl WebhookSettings {
    /// From the alert settings, run every `interval`.
    pub fn from_settings(a: &AlertSettings, interval: Duration) -> Self {
        WebhookSettings {
            interval,
            secret: a.webhook_secret.clone(),
            format: a.webhook_format,
            timeout: Duration::from_secs_f64(a.webhook_timeout_seconds),
            max_backoff: Duration::from_secs_f64(a.webhook_max_backoff_seconds),
        }
    }
}

/// What one run did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeliveryRun {
    /// `(event_id, url)` delivered.
    pub delivered: Vec<(String, String)>,
    /// `(event_id, url)` failed this time (tried again later).
    pub failed: Vec<(String, String)>,
}

/// The delivery service.
#[derive(Debug, Clone)]
pub struct WebhookDelivery {
    ops: Arc<dyn OperatorStore>,
    orders: Arc<dyn OrderStore>,
    clock: Arc<dyn Clock>,
    client: reqwest::Client,
    settings: WebhookSettings,
    metrics: Arc<GatewayMetrics>,
}

impl WebhookDelivery {
    /// A delivery job over the outbox.
    ///
    /// # Errors
    /// The HTTP client cannot be built (TLS roots).
    pub fn new(
        ops: Arc<dyn OperatorStore>,
        orders: Arc<dyn OrderStore>,
        clock: Arc<dyn Clock>,
        settings: WebhookSettings,
        metrics: Arc<GatewayMetrics>,
    ) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(settings.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent("order-gateway-alerts")
            .build()?;
        Ok(WebhookDelivery {
            ops,
            orders,
            clock,
            client,
            settings,
            metrics,
        })
    }

    /// The wait before attempt `failed + 1`: exponential from 1 s (factor 2), capped at
    /// `max_backoff`, jittered.
    fn backoff(&self, failed: i64) -> Duration {
        ExponentialBuilder::default()
            .with_min_delay(Duration::from_secs(1))
            .with_max_delay(self.settings.max_backoff)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times()
            .build()
            .nth(usize::try_from(failed.clamp(0, 64)).unwrap_or(0))
            .unwrap_or(self.settings.max_backoff)
    }

    fn body(&self, item: &OutboxItem) -> Result<String, StoreError> {
        Ok(match self.settings.format {
            WebhookFormat::Json => item.body_json.clone(),
            WebhookFormat::Slack => {
                let n: AlertNotice = serde_json::from_str(&item.body_json)
                    .map_err(|e| StoreError::Corrupt(format!("outbox body: {e}")))?;
                serde_json::json!({ "text": n.slack_text() }).to_string()
            }
        })
    }

    /// One POST; `Err` says why it failed (no secrets: the URL is reduced to its host).
    async fn post(&self, item: &OutboxItem, now: Timestamp) -> Result<(), String> {
        let body = self.body(item).map_err(|e| e.to_string())?;
        let mut req = self
            .client
            .post(&item.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(EVENT_ID_HEADER, &item.event_id);
        if let Some(secret) = &self.settings.secret {
            let t = now.as_millis().div_euclid(1000);
            req = req.header(
                SIGNATURE_HEADER,
                sign(secret.expose().as_bytes(), t, body.as_bytes()),
            );
        }
        match req.body(body).send().await {
            Ok(r) if r.status().is_success() => Ok(()),
            Ok(r) => Err(format!("HTTP {}", r.status().as_u16())),
            Err(e) if e.is_timeout() => Err("timed out".into()),
            Err(e) if e.is_connect() => Err("connection failed".into()),
            Err(_) => Err("request failed".into()),
        }
    }

    /// Attempts every pending delivery due at `now` once.
    ///
    /// # Errors
    /// [`StoreError`] from the outbox.
    pub async fn run_once(&self, now: Timestamp) -> Result<DeliveryRun, StoreError> {
        let due = self.ops.outbox_due(now, BATCH).await?;
        let results: Vec<(OutboxItem, Result<(), String>)> = futures::stream::iter(due)
            .map(|item| async move {
                let r = self.post(&item, now).await;
                (item, r)
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        let mut run = DeliveryRun::default();
        for (item, result) in results {
            let host = crate::store::operator::webhook_host(&item.url);
            self.metrics.webhook_delivery(result.is_ok());
            let (event, error) = match result {
                Ok(()) => {
                    tracing::info!(event_id = %item.event_id, host = %host, "alert delivered");
                    run.delivered
                        .push((item.event_id.clone(), item.url.clone()));
                    (DeliveryEvent::Delivered, None)
                }
                Err(e) => {
                    tracing::warn!(event_id = %item.event_id, host = %host, attempt = item.attempts + 1, error = %e, "alert delivery failed; will retry");
                    run.failed.push((item.event_id.clone(), item.url.clone()));
                    (DeliveryEvent::Failed, Some(e))
                }
            };
            let next_attempt_at = now.plus(self.backoff(item.attempts));
            self.ops
                .outbox_record(
                    DeliveryAttempt {
                        event_id: item.event_id,
                        url: item.url,
                        event,
                        next_attempt_at,
                        error,
                    },
                    now,
                )
                .await?;
        }
        Ok(run)
    }

    /// Delivers every interval until `shutdown`, on the elected instance only when several share
    /// one database (another instance takes over when it dies; at least once either way).
    pub async fn run(self, shutdown: CancellationToken) {
        super::every_tick_as_leader(
            self.settings.interval,
            shutdown,
            self.orders.clone(),
            "alert delivery",
            || self.run_once(self.clock.now()),
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_and_a_tampered_one_does_not() {
        let h = sign(b"k", 1_700_000_000, b"{\"a\":1}");
        assert!(h.starts_with("t=1700000000,v1="));
        assert!(verify(b"k", &h, b"{\"a\":1}", 1_700_000_010, 300));
        assert!(!verify(b"k", &h, b"{\"a\":2}", 1_700_000_010, 300));
        assert!(!verify(b"other", &h, b"{\"a\":1}", 1_700_000_010, 300));
        assert!(
            !verify(b"k", &h, b"{\"a\":1}", 1_700_001_000, 300),
            "replayed"
        );
    }
}
