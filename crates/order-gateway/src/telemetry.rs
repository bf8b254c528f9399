//! `GET /metrics`: Prometheus text format through `metrics` and
//! `metrics-exporter-prometheus`, rendered into our own route (no exporter listener).
//!
//! Two sources, rendered one after the other:
//! - [`GatewayMetrics`], one per application (never the process-global recorder, so several
//!   gateways in one process — the tests — never mix): counters and histograms kept current
//!   in-process where that is exact — grants, renewals, reports, finished tasks, open long-polls,
//!   the SQLite writer's group-commit batch size and commit latency.
//! - [`scrape`]: gauges read from the database at scrape time with bounded queries
//!   ([`crate::store::observe`]) into a fresh recorder, so a series that is gone (a finished
//!   status, a deleted worker) is gone from the next scrape too.
//!
//! | metric | kind | labels |
//! |---|---|---|
//! | `gateway_tasks` | gauge | `status` (open statuses) |
//! | `gateway_task_oldest_age_seconds` | gauge | `status`: `queued` since creation; `stale`, `needs_human` since their last change |
//! | `gateway_worker_last_seen_seconds` | gauge | `worker_id` (1,000 most recent) |
//! | `gateway_account_queries` | gauge | `status` (`queued`, `leased`) |
//! | `gateway_lease_grants_total` | counter | `channel` (`orders`, `queries`) |
//! | `gateway_lease_renewals_total` | counter | |
//! | `gateway_reports_total` | counter | (new, non-duplicate order reports) |
//! | `gateway_query_results_total` | counter | |
//! | `gateway_tasks_finished_total` | counter | `outcome` |
//! | `gateway_open_long_polls` | gauge | `channel` |
//! | `gateway_commit_batch_size` | histogram | (SQLite group commit: operations per commit) |
//! | `gateway_commit_seconds` | histogram | (SQLite: `BEGIN` to end of `COMMIT`) |
//! | `gateway_alerts_open` | gauge | `kind` (every kind; set by each alert job run, D-alert-metrics) |
//! | `gateway_webhook_deliveries_total` | counter | `result` (`delivered`, `failed`: each attempt; `dropped`: each pending delivery of a receiver no longer configured, D-webhook-removed-receiver-dropped) |

use metrics::{Counter, Gauge, Histogram, Key, Label, Level, Metadata, Recorder, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusRecorder};
use rakuten_types::Timestamp;
use rakuten_types::alert::AlertKind;

use crate::store::StoreError;
use crate::store::observe::{OPEN_QUERY_STATUSES, OPEN_TASK_STATUSES, StoreCounts};

const META: Metadata<'static> = Metadata::new(module_path!(), Level::INFO, None);

/// Content type of the Prometheus text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

const BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];
const SECONDS_BUCKETS: &[f64] = &[
    0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// A long-poll channel.
#[derive(Debug, Clone, Copy)]
pub enum Channel {
    /// `GET /api/orders/lease`.
    Orders,
    /// `GET /api/account/queries/lease`.
    Queries,
}

impl Channel {
    fn label(self) -> &'static str {
        match self {
            Channel::Orders => "orders",
            Channel::Queries => "queries",
        }
    }
}

fn key(name: &'static str, labels: &[(&'static str, &str)]) -> Key {
    let labels: Vec<Label> = labels
        .iter()
        .map(|(k, v)| Label::new(*k, v.to_string()))
        .collect();
    Key::from_parts(name, labels)
}

/// The in-process metrics of one gateway.
pub struct GatewayMetrics {
    recorder: PrometheusRecorder,
    /// New order state reports (not duplicates).
    pub reports: Counter,
    /// Successful renewals.
    pub renewals: Counter,
    /// Account-query results recorded.
    pub query_results: Counter,
    /// Operations per SQLite group commit.
    pub commit_batch_size: Histogram,
    /// SQLite commit latency, seconds.
    pub commit_seconds: Histogram,
}

impl std::fmt::Debug for GatewayMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GatewayMetrics")
    }
}

impl Default for GatewayMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl GatewayMetrics {
    /// A fresh registry with every metric described.
    pub fn new() -> Self {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(
                Matcher::Full("gateway_commit_batch_size".into()),
                BATCH_BUCKETS,
            )
            .and_then(|b| {
                b.set_buckets_for_metric(
                    Matcher::Full("gateway_commit_seconds".into()),
                    SECONDS_BUCKETS,
                )
            })
            .unwrap_or_else(|_| PrometheusBuilder::new())
            .build_recorder();
        for (name, help) in [
            (
                "gateway_lease_grants_total",
                "Leases granted (orders and account queries).",
            ),
            ("gateway_lease_renewals_total", "Order leases renewed."),
            ("gateway_reports_total", "New order state reports recorded."),
            (
                "gateway_query_results_total",
                "Account-query results recorded.",
            ),
            (
                "gateway_tasks_finished_total",
                "Order tasks that reached a terminal status.",
            ),
        ] {
            recorder.describe_counter(name.into(), Some(Unit::Count), help.into());
        }
        recorder.describe_counter(
            "gateway_webhook_deliveries_total".into(),
            Some(Unit::Count),
            "Alert webhook delivery attempts by result; dropped: deliveries of a receiver no longer configured.".into(),
        );
        recorder.describe_gauge(
            "gateway_alerts_open".into(),
            None,
            "Open alerts per kind, as of the last alert job run.".into(),
        );
        recorder.describe_gauge(
            "gateway_clock_offset_seconds".into(),
            Some(Unit::Seconds),
            "The shared database's clock minus this instance's, as of the last sweep (0 on SQLite).".into(),
        );
        recorder.describe_gauge(
            "gateway_clock_skewed".into(),
            None,
            "1 while this instance's clock is off from the database's by more than RAKUTEN_CLOCK_SKEW_ALERT_SECONDS (it does not sweep leases).".into(),
        );
        recorder.describe_gauge(
            "gateway_open_long_polls".into(),
            None,
            "Lease long-polls waiting now.".into(),
        );
        recorder.describe_histogram(
            "gateway_commit_batch_size".into(),
            None,
            "Operations per SQLite group commit.".into(),
        );
        recorder.describe_histogram(
            "gateway_commit_seconds".into(),
            Some(Unit::Seconds),
            "SQLite group commit latency, BEGIN to the end of COMMIT.".into(),
        );
        let c = |name| recorder.register_counter(&key(name, &[]), &META);
        let h = |name| recorder.register_histogram(&key(name, &[]), &META);
        let m = GatewayMetrics {
            reports: c("gateway_reports_total"),
            renewals: c("gateway_lease_renewals_total"),
            query_results: c("gateway_query_results_total"),
            commit_batch_size: h("gateway_commit_batch_size"),
            commit_seconds: h("gateway_commit_seconds"),
            recorder,
        };
        // Present from the first scrape, at zero.
        for ch in [Channel::Orders, Channel::Queries] {
            m.grants(ch).absolute(0);
            m.open_long_polls(ch).increment(0.0);
        }
        for kind in AlertKind::ALL {
            m.set_open_alerts(kind, 0);
        }
        for delivered in [true, false] {
            m.webhook_deliveries(delivered).absolute(0);
        }
        m.set_clock(None, false);
        m
    }

    /// Sets `gateway_clock_offset_seconds` (the database's clock minus ours; 0 when there is
    /// nothing to compare) and `gateway_clock_skewed` (the sweeper, each sweep).
    pub fn set_clock(&self, offset_ms: Option<i64>, skewed: bool) {
        let gauge = |name| self.recorder.register_gauge(&key(name, &[]), &META);
        gauge("gateway_clock_offset_seconds").set(offset_ms.unwrap_or_default() as f64 / 1000.0);
        gauge("gateway_clock_skewed").set(f64::from(u8::from(skewed)));
    }

    /// The grant counter of `channel`.
    pub fn grants(&self, channel: Channel) -> Counter {
        self.recorder.register_counter(
            &key(
                "gateway_lease_grants_total",
                &[("channel", channel.label())],
            ),
            &META,
        )
    }

    fn open_long_polls(&self, channel: Channel) -> Gauge {
        self.recorder.register_gauge(
            &key("gateway_open_long_polls", &[("channel", channel.label())]),
            &META,
        )
    }

    /// Counts a task that reached the terminal `outcome` (`succeeded`, `failed`, `needs_human`).
    pub fn task_finished(&self, outcome: &str) {
        self.recorder
            .register_counter(
                &key("gateway_tasks_finished_total", &[("outcome", outcome)]),
                &META,
            )
            .increment(1);
    }

    /// Sets `gateway_alerts_open{kind}` (the alert job, each run).
    pub fn set_open_alerts(&self, kind: AlertKind, open: i64) {
        self.recorder
            .register_gauge(
                &key("gateway_alerts_open", &[("kind", kind.as_str())]),
                &META,
            )
            .set(open as f64);
    }

    /// Counts `rows` pending deliveries dropped because their receiver is no longer configured.
    pub fn webhook_dropped(&self, rows: u64) {
        self.recorder
            .register_counter(
                &key("gateway_webhook_deliveries_total", &[("result", "dropped")]),
                &META,
            )
            .increment(rows);
    }

    fn webhook_deliveries(&self, delivered: bool) -> Counter {
        let result = if delivered { "delivered" } else { "failed" };
        self.recorder.register_counter(
            &key("gateway_webhook_deliveries_total", &[("result", result)]),
            &META,
        )
    }

    /// Counts one webhook delivery attempt (the delivery job).
    pub fn webhook_delivery(&self, delivered: bool) {
        self.webhook_deliveries(delivered).increment(1);
    }

    /// Counts a waiting long-poll until the guard is dropped.
    pub fn long_poll(&self, channel: Channel) -> LongPollGuard {
        let g = self.open_long_polls(channel);
        g.increment(1.0);
        LongPollGuard(g)
    }

    /// Observes one SQLite commit.
    pub fn observe_commit(&self, ops: u64, took: std::time::Duration) {
        // Batches are at most 256 operations: exact in f64.
        self.commit_batch_size.record(ops as f64);
        self.commit_seconds.record(took.as_secs_f64());
    }

    /// The in-process metrics as Prometheus text.
    pub fn render(&self) -> String {
        self.recorder.handle().render()
    }
}

/// Decrements `gateway_open_long_polls` when the long-poll ends (answered or dropped).
#[derive(Debug)]
pub struct LongPollGuard(Gauge);

impl Drop for LongPollGuard {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// The scrape-time gauges from `counts` at `now`, as Prometheus text.
pub fn render_counts(counts: &StoreCounts, now: Timestamp) -> String {
    let r = PrometheusBuilder::new().build_recorder();
    r.describe_gauge(
        "gateway_tasks".into(),
        None,
        "Order tasks per open status.".into(),
    );
    r.describe_gauge(
        "gateway_task_oldest_age_seconds".into(),
        Some(Unit::Seconds),
        "Oldest queued task since creation; oldest stale / needs_human task since its last change."
            .into(),
    );
    r.describe_gauge(
        "gateway_worker_last_seen_seconds".into(),
        Some(Unit::Seconds),
        "Seconds since each worker's last lease poll, renew or report.".into(),
    );
    r.describe_gauge(
        "gateway_account_queries".into(),
        None,
        "Account queries per open status (the channel's depth).".into(),
    );
    let gauge = |name, labels: &[(&'static str, &str)]| r.register_gauge(&key(name, labels), &META);
    for status in OPEN_TASK_STATUSES {
        let c = counts.tasks.iter().find(|c| c.status == status);
        gauge("gateway_tasks", &[("status", status)]).set(c.map_or(0.0, |c| c.count as f64));
        let oldest = match status {
            "queued" => Some(c.and_then(|c| c.oldest_created)),
            "stale" | "needs_human" => Some(c.and_then(|c| c.oldest_updated)),
            _ => None,
        };
        if let Some(oldest) = oldest {
            let age = oldest.map_or(0.0, |t| now.seconds_since(t).max(0.0));
            gauge("gateway_task_oldest_age_seconds", &[("status", status)]).set(age);
        }
    }
    for status in OPEN_QUERY_STATUSES {
        let n = counts
            .queries
            .iter()
            .find(|(s, _)| s == status)
            .map_or(0, |(_, n)| *n);
        gauge("gateway_account_queries", &[("status", status)]).set(n as f64);
    }
    for w in &counts.workers {
        let seen = now.seconds_since(w.last_seen_at).max(0.0);
        gauge(
            "gateway_worker_last_seen_seconds",
            &[("worker_id", &w.worker_id)],
        )
        .set(seen);
    }
    r.handle().render()
}

/// The whole `/metrics` body: scrape-time gauges from the store, then the in-process metrics.
///
/// # Errors
/// The store's counts could not be read.
pub async fn scrape(
    store: &dyn crate::store::OrderStore,
    metrics: &GatewayMetrics,
    now: Timestamp,
) -> Result<String, StoreError> {
    let counts = store.store_counts().await?;
    let mut body = render_counts(&counts, now);
    body.push_str(&metrics.render());
    Ok(body)
}
