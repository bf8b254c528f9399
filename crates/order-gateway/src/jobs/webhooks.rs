//! Alert delivery to a person: every row of the durable outbox (`alert_outbox`, one
//! per alert event and receiver, written in the same transaction as the alert) is POSTed until
//! the receiver answers 2xx. At least once: a receiver that is down, answers non-2xx or times out
//! is tried again after an exponential backoff with jitter (`backon`'s schedule, stored as the
//! row's `next_attempt_at`, so the schedule survives a restart); a gateway killed with -9 finds
//! the row pending and delivers after restart. Receivers deduplicate on `event_id` (also in the
//! `X-Rakuten-Event-Id` header).
//!
//! What a receiver can rely on:
//! - **Each receiver is its own queue** (D-webhook-per-receiver-queues): a run delivers to every
//!   receiver with due rows independently, each with its own [`PER_RECEIVER_CONCURRENCY`] attempts
//!   in flight, and a receiver whose previous run is still going (a hung one, waiting out its
//!   timeouts) is skipped rather than started twice. One attempt takes at most
//!   `RAKUTEN_ALERT_WEBHOOK_TIMEOUT_SECONDS` (at most [`MAX_ATTEMPT_SECONDS`]); a slow or dead
//!   receiver delays only its own events.
//! - **The events of one alert arrive in the order they happened** (D-webhook-per-alert-order):
//!   a later event (`cleared`) is not sent to a receiver while an earlier one (`raised`) to that
//!   receiver is still pending; it waits, it does not supersede.
//! - **`sequence`** (D-webhook-event-sequence): every event carries the number the database gave
//!   it when it was written (`alert_events.seq`), in the body and in `X-Rakuten-Event-Sequence`;
//!   strictly increasing across the events of one alert, never given to two events. Keep the
//!   highest seen per `alert_id` and drop an event at or below it.
//! - **Signed as sent** (D-webhook-sign-at-send): with `RAKUTEN_ALERT_WEBHOOK_SECRET`,
//!   `X-Rakuten-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>` ([`sign`],
//!   [`verify`]), Stripe's scheme, with `t` read from the clock as each attempt leaves, so a
//!   receiver's replay window (commonly 300 s) never refuses a fresh attempt.
//!
//! Body: the [`AlertNotice`] JSON, or `{"text": …}` with `RAKUTEN_ALERT_WEBHOOK_FORMAT=slack`
//! (client text escaped, [`AlertNotice::slack_text`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
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
/// The event sequence header (the same as the body's `sequence`).
pub const SEQUENCE_HEADER: &str = "X-Rakuten-Event-Sequence";
/// Rows one receiver's run takes from the outbox at a time.
const BATCH: i64 = 100;
/// Batches one receiver's run takes before it leaves the rest to the next tick.
const MAX_BATCHES: usize = 10;
/// Receivers with due rows one run looks at.
const RECEIVERS: i64 = 1000;
/// Attempts in flight to one receiver at once; every receiver has its own.
pub const PER_RECEIVER_CONCURRENCY: usize = 4;
/// The longest `RAKUTEN_ALERT_WEBHOOK_TIMEOUT_SECONDS` accepted: one attempt's bound. The
/// settings own the rule (they refuse a longer one at start-up); the delivery relies on it.
pub use crate::settings::MAX_WEBHOOK_ATTEMPT_SECONDS as MAX_ATTEMPT_SECONDS;

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
    /// Bound of one attempt (connection, request and answer).
    pub timeout: Duration,
    /// Longest wait between two attempts.
    pub max_backoff: Duration,
    /// The receivers configured (`RAKUTEN_ALERT_WEBHOOK_URLS`): pending rows of any other URL
    /// are dropped, never sent (D-webhook-removed-receiver-dropped).
    pub receivers: Vec<String>,
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
            receivers: a.urls(),
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

impl DeliveryRun {
    fn merge(&mut self, other: DeliveryRun) {
        self.delivered.extend(other.delivered);
        self.failed.extend(other.failed);
    }
}

/// The receivers with a run in flight in this process, so that a receiver is never delivered to
/// by two runs at once (a hung receiver's run waits out its timeouts; the next tick skips it).
type Busy = Arc<Mutex<HashSet<String>>>;

/// One receiver's turn: holds its place in [`Busy`] until dropped.
#[derive(Debug)]
struct Lane {
    url: String,
    busy: Busy,
}

impl Drop for Lane {
    fn drop(&mut self) {
        self.busy
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.url);
    }
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
    busy: Busy,
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
            .connect_timeout(settings.timeout)
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
            busy: Busy::default(),
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

    /// The body sent: the stored notice with the sequence the database gave its event (events
    /// stored before sequences existed carry none in their stored body), as JSON or Slack text.
    fn body(&self, item: &OutboxItem) -> Result<String, String> {
        let mut n: AlertNotice = serde_json::from_str(&item.body_json)
            .map_err(|e| StoreError::Corrupt(format!("outbox body: {e}")).to_string())?;
        n.sequence = item.sequence;
        match self.settings.format {
            WebhookFormat::Json => serde_json::to_string(&n).map_err(|e| e.to_string()),
            WebhookFormat::Slack => Ok(serde_json::json!({ "text": n.slack_text() }).to_string()),
        }
    }

    /// One POST; `Err` says why it failed (no secrets: the URL is reduced to its host). Signed
    /// with the clock's time as it leaves (D-webhook-sign-at-send), and bounded by the timeout
    /// as a whole.
    async fn attempt(&self, item: &OutboxItem) -> Result<(), String> {
        let body = self.body(item)?;
        let mut req = self
            .client
            .post(&item.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(EVENT_ID_HEADER, &item.event_id)
            .header(SEQUENCE_HEADER, item.sequence.to_string());
        if let Some(secret) = &self.settings.secret {
            let t = self.clock.now().as_millis().div_euclid(1000);
            req = req.header(
                SIGNATURE_HEADER,
                sign(secret.expose().as_bytes(), t, body.as_bytes()),
            );
        }
        match tokio::time::timeout(self.settings.timeout, req.body(body).send()).await {
            Err(_) => Err("timed out".into()),
            Ok(Ok(r)) if r.status().is_success() => Ok(()),
            Ok(Ok(r)) => Err(format!("HTTP {}", r.status().as_u16())),
            Ok(Err(e)) if e.is_timeout() => Err("timed out".into()),
            Ok(Err(e)) if e.is_connect() => Err("connection failed".into()),
            Ok(Err(_)) => Err("request failed".into()),
        }
    }

    /// Records one attempt as soon as it ends (not when the batch ends), with the clock's time
    /// then; returns whether it was delivered.
    async fn record(
        &self,
        item: OutboxItem,
        result: Result<(), String>,
    ) -> Result<bool, StoreError> {
        let host = crate::store::operator::webhook_host(&item.url);
        self.metrics.webhook_delivery(result.is_ok());
        let ok = result.is_ok();
        let (event, error) = match result {
            Ok(()) => {
                tracing::info!(event_id = %item.event_id, sequence = item.sequence, host = %host, "alert delivered");
                (DeliveryEvent::Delivered, None)
            }
            Err(e) => {
                tracing::warn!(event_id = %item.event_id, sequence = item.sequence, host = %host, attempt = item.attempts + 1, error = %e, "alert delivery failed; will retry");
                (DeliveryEvent::Failed, Some(e))
            }
        };
        let at = self.clock.now();
        self.ops
            .outbox_record(
                DeliveryAttempt {
                    event_id: item.event_id,
                    url: item.url,
                    event,
                    next_attempt_at: at.plus(self.backoff(item.attempts)),
                    error,
                },
                at,
            )
            .await?;
        Ok(ok)
    }

    /// Deletes the pending rows of receivers no longer configured, before any is started: the
    /// outbox names each row's URL, and a receiver the operator removed (a revoked URL holding a
    /// token, a host taken down) must not be sent to, nor retried for ever
    /// (D-webhook-removed-receiver-dropped). Logged with the host only: a URL may carry a token.
    async fn drop_unconfigured(&self) -> Result<(), StoreError> {
        for (url, rows) in self
            .ops
            .outbox_drop_unconfigured(self.settings.receivers.clone())
            .await?
        {
            let host = crate::store::operator::webhook_host(&url);
            tracing::warn!(host = %host, rows, "alert deliveries to a receiver no longer in RAKUTEN_ALERT_WEBHOOK_URLS dropped");
            self.metrics.webhook_dropped(rows);
        }
        Ok(())
    }

    /// The receiver's turn, unless a run of it is in flight already.
    fn lane(&self, url: String) -> Option<Lane> {
        let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        busy.insert(url.clone()).then(|| Lane {
            url,
            busy: self.busy.clone(),
        })
    }

    /// Delivers one receiver's due rows, in `sequence` order, [`PER_RECEIVER_CONCURRENCY`] at a
    /// time; after a batch in which something got through, looks again (an alert's next event
    /// may be due now that its earlier one arrived), up to [`MAX_BATCHES`].
    async fn run_receiver(&self, lane: Lane, now: Timestamp) -> Result<DeliveryRun, StoreError> {
        let mut run = DeliveryRun::default();
        let mut due_at = now;
        for _ in 0..MAX_BATCHES {
            let due = self.ops.outbox_due(&lane.url, due_at, BATCH).await?;
            let full = due.len() as i64 == BATCH;
            if due.is_empty() {
                break;
            }
            let results: Vec<Result<(String, String, bool), StoreError>> =
                futures::stream::iter(due)
                    .map(|item| async move {
                        let key = (item.event_id.clone(), item.url.clone());
                        let r = self.attempt(&item).await;
                        self.record(item, r).await.map(|ok| (key.0, key.1, ok))
                    })
                    .buffer_unordered(PER_RECEIVER_CONCURRENCY)
                    .collect()
                    .await;
            let mut progress = false;
            for r in results {
                let (event_id, url, ok) = r?;
                if ok {
                    progress = true;
                    run.delivered.push((event_id, url));
                } else {
                    run.failed.push((event_id, url));
                }
            }
            if !progress && !full {
                break;
            }
            due_at = now.max(self.clock.now());
        }
        drop(lane);
        Ok(run)
    }

    /// Attempts every pending delivery due at `now` once, every receiver independently and at
    /// the same time (a receiver with a run in flight already is skipped); returns when every
    /// receiver's run has ended. Each attempt is signed when it leaves, not at `now`.
    ///
    /// # Errors
    /// [`StoreError`] from the outbox (every receiver's run still ends first).
    pub async fn run_once(&self, now: Timestamp) -> Result<DeliveryRun, StoreError> {
        self.drop_unconfigured().await?;
        let lanes: Vec<Lane> = self
            .ops
            .outbox_receivers_due(now, RECEIVERS)
            .await?
            .into_iter()
            .filter_map(|url| self.lane(url))
            .collect();
        let runs =
            futures::future::join_all(lanes.into_iter().map(|l| self.run_receiver(l, now))).await;
        let mut all = DeliveryRun::default();
        let mut first_error = None;
        for r in runs {
            match r {
                Ok(r) => all.merge(r),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(all),
        }
    }

    /// Starts a run for every receiver with due rows and none in flight, each on a task of its
    /// own, and returns at once: a tick never waits for a slow receiver, so the next tick serves
    /// the others again (D-webhook-per-receiver-queues). Runs stop at `shutdown` (a row whose
    /// attempt was cut off stays pending: at least once).
    async fn start_receivers(&self, shutdown: &CancellationToken) -> Result<usize, StoreError> {
        self.drop_unconfigured().await?;
        let now = self.clock.now();
        let mut started = 0;
        for url in self.ops.outbox_receivers_due(now, RECEIVERS).await? {
            let Some(lane) = self.lane(url) else {
                continue;
            };
            let (me, stop) = (self.clone(), shutdown.clone());
            tokio::spawn(async move {
                tokio::select! {
                    _ = stop.cancelled() => {}
                    r = me.run_receiver(lane, now) => if let Err(e) = r {
                        tracing::error!(error = ?e, "alert delivery to a receiver failed; retried next tick");
                    },
                }
            });
            started += 1;
        }
        Ok(started)
    }

    /// Delivers every interval until `shutdown`, on the elected instance only when several share
    /// one database (another instance takes over when it dies; at least once either way).
    pub async fn run(self, shutdown: CancellationToken) {
        let stop = shutdown.clone();
        super::every_tick_as_leader(
            self.settings.interval,
            shutdown,
            self.orders.clone(),
            "alert delivery",
            || self.start_receivers(&stop),
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
