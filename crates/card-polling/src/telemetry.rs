//! `GET /metrics`: Prometheus text through `metrics` and
//! `metrics-exporter-prometheus`, rendered into our own route.
//!
//! [`PollMetrics`] belongs to the [`crate::executor::Executor`] (one per application, never the
//! process-global recorder): carrier calls by operation and result, scheduling cycle duration,
//! hint-to-execution latency (from the cycle putting a priority item into its execution queue to
//! the execution taking it; the time the hint waited in its lane before that cycle — at most one
//! tick — is not included). [`render_counts`] adds the scrape-time gauges from a fresh recorder:
//! open items by status and task type (bounded, [`crate::store::observe`]) and lane depths.
//!
//! | metric | kind | labels |
//! |---|---|---|
//! | `cardpoll_items` | gauge | `status` (`pending`, `running`), `task_type` |
//! | `cardpoll_lane_depth` | gauge | `task_type`, `lane` (`priority`, `manual`, `ordinary`, `in_flight`: the execution queue; `hint_channel`, `manual_channel`: the hint channel) |
//! | `cardpoll_carrier_calls_total` | counter | `operation` (`poll`, `resume`), `result` (`ok` or the error label) |
//! | `cardpoll_pruned_rows_total` | counter | `table` (`interaction_logs`, `audit_facts`, `trigger_events`, `manual_triggers`, `priority_items`): rows the retention job deleted (`priority_items` counts items; each item's source rows go with it) |
//! | `cardpoll_cycle_seconds` | histogram | |
//! | `cardpoll_hint_to_execution_seconds` | histogram | (from a priority entry entering its queue to its turn to run, whether or not its claim then succeeds: the queue wait; count executions by `executed_priority` in `/health`) |
//! | `cardpoll_writer_batch_ops` | histogram | (SQLite: writes committed together by the group-commit writer, per commit) |
//! | `cardpoll_writer_commit_seconds` | histogram | (SQLite: one batch, `BEGIN` to the end of `COMMIT`, the fsync included) |
//! | `cardpoll_clock_offset_seconds` | gauge | (the database's clock minus this instance's, at the last check; PostgreSQL) |
//! | `cardpoll_clock_skewed` | gauge | (1 while the offset is past `RAKUTEN_POLL_CLOCK_MAX_SKEW_SECS`: no claims) |
//! | `cardpoll_claims_refused_total` | counter | `reason` (`clock_skew`, `clock_check_failed`) |
//! | `cardpoll_items_set_aside_total` | counter | (items set aside as failed since start: their row could not be decoded) |

use std::time::Duration;

use metrics::{Histogram, Key, Label, Level, Metadata, Recorder, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusRecorder};

const META: Metadata<'static> = Metadata::new(module_path!(), Level::INFO, None);

/// Content type of the Prometheus text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

fn key(name: &'static str, labels: &[(&'static str, &str)]) -> Key {
    let labels: Vec<Label> = labels
        .iter()
        .map(|(k, v)| Label::new(*k, v.to_string()))
        .collect();
    Key::from_parts(name, labels)
}

/// The in-process metrics of one card-polling service.
pub struct PollMetrics {
    recorder: PrometheusRecorder,
    cycle: Histogram,
    hint_to_execution: Histogram,
    writer_batch_ops: Histogram,
    writer_commit: Histogram,
}

/// Buckets of `cardpoll_writer_batch_ops` (writes per commit; the writer's batch is at most 512).
const BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];

impl std::fmt::Debug for PollMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PollMetrics")
    }
}

impl Default for PollMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl PollMetrics {
    /// A fresh registry with every metric described.
    pub fn new() -> Self {
        let builder = [
            ("cardpoll_cycle_seconds", SECONDS_BUCKETS),
            ("cardpoll_hint_to_execution_seconds", SECONDS_BUCKETS),
            ("cardpoll_writer_commit_seconds", SECONDS_BUCKETS),
            ("cardpoll_writer_batch_ops", BATCH_BUCKETS),
        ]
        .into_iter()
        .try_fold(PrometheusBuilder::new(), |b, (name, buckets)| {
            b.set_buckets_for_metric(Matcher::Full(name.into()), buckets)
        })
        .unwrap_or_else(|_| PrometheusBuilder::new());
        let recorder = builder.build_recorder();
        recorder.describe_counter(
            "cardpoll_carrier_calls_total".into(),
            Some(Unit::Count),
            "Carrier calls by operation and result.".into(),
        );
        recorder.describe_counter(
            "cardpoll_pruned_rows_total".into(),
            Some(Unit::Count),
            "Rows deleted by the retention job, per table.".into(),
        );
        recorder.describe_counter(
            "cardpoll_items_set_aside_total".into(),
            Some(Unit::Count),
            "Priority items set aside as failed because their stored row could not be decoded."
                .into(),
        );
        recorder.describe_histogram(
            "cardpoll_cycle_seconds".into(),
            Some(Unit::Seconds),
            "Wall time of one scheduling cycle.".into(),
        );
        recorder.describe_histogram(
            "cardpoll_hint_to_execution_seconds".into(),
            Some(Unit::Seconds),
            "From a priority item entering its execution queue to its execution.".into(),
        );
        recorder.describe_histogram(
            "cardpoll_writer_batch_ops".into(),
            Some(Unit::Count),
            "SQLite: writes committed together by the group-commit writer, per commit.".into(),
        );
        recorder.describe_histogram(
            "cardpoll_writer_commit_seconds".into(),
            Some(Unit::Seconds),
            "SQLite: one group-commit batch, BEGIN to the end of COMMIT (the fsync).".into(),
        );
        let h = |name| recorder.register_histogram(&key(name, &[]), &META);
        PollMetrics {
            cycle: h("cardpoll_cycle_seconds"),
            hint_to_execution: h("cardpoll_hint_to_execution_seconds"),
            writer_batch_ops: h("cardpoll_writer_batch_ops"),
            writer_commit: h("cardpoll_writer_commit_seconds"),
            recorder,
        }
    }

    /// Counts one carrier call.
    pub fn carrier_call(&self, operation: &str, result: &str) {
        self.recorder
            .register_counter(
                &key(
                    "cardpoll_carrier_calls_total",
                    &[("operation", operation), ("result", result)],
                ),
                &META,
            )
            .increment(1);
    }

    /// Counts `n` rows deleted from `table` by the retention job.
    pub fn pruned(&self, table: &str, n: u64) {
        self.recorder
            .register_counter(
                &key("cardpoll_pruned_rows_total", &[("table", table)]),
                &META,
            )
            .increment(n);
    }

    /// Records a check of this instance's clock against the database's.
    pub fn clock_check(&self, offset_ms: i64, skewed: bool) {
        self.recorder
            .register_gauge(&key("cardpoll_clock_offset_seconds", &[]), &META)
            .set(offset_ms as f64 / 1000.0);
        self.recorder
            .register_gauge(&key("cardpoll_clock_skewed", &[]), &META)
            .set(if skewed { 1.0 } else { 0.0 });
    }

    /// Counts a claim this instance did not make, by `reason`.
    pub fn claim_refused(&self, reason: &str) {
        self.recorder
            .register_counter(
                &key("cardpoll_claims_refused_total", &[("reason", reason)]),
                &META,
            )
            .increment(1);
    }

    /// Sets `cardpoll_items_set_aside_total` to the store's count (read at scrape time).
    pub fn items_set_aside(&self, total: u64) {
        self.recorder
            .register_counter(&key("cardpoll_items_set_aside_total", &[]), &META)
            .absolute(total);
    }

    /// Observes one scheduling cycle.
    pub fn cycle(&self, took: Duration) {
        self.cycle.record(took.as_secs_f64());
    }

    /// Observes one commit of the SQLite group-commit writer: `ops` writes, `took` from `BEGIN` to
    /// the end of `COMMIT`.
    pub fn writer_commit(&self, ops: u64, took: Duration) {
        self.writer_batch_ops.record(ops as f64);
        self.writer_commit.record(took.as_secs_f64());
    }

    /// Observes one priority item's wait in its execution queue.
    pub fn hint_to_execution(&self, waited: Duration) {
        self.hint_to_execution.record(waited.as_secs_f64());
    }

    /// The in-process metrics as Prometheus text.
    pub fn render(&self) -> String {
        self.recorder.handle().render()
    }
}

/// Whether the scrape's reads of the database and of the hint channel were answered.
#[derive(Debug, Clone, Copy)]
pub struct Up {
    /// The item counts were read and writes are not failing.
    pub database: bool,
    /// Every lane depth was read.
    pub hint_channel: bool,
}

/// Scrape-time gauges: open items `(status, task_type, count)`, lane depths
/// `(task_type, lane, depth)` and whether the database and the hint channel answered, as
/// Prometheus text.
pub fn render_counts(
    items: &[(String, String, i64)],
    lanes: &[(String, &str, u64)],
    up: Up,
) -> String {
    let r = PrometheusBuilder::new().build_recorder();
    for (name, help, value) in [
        (
            "cardpoll_database_up",
            "1 when the database answered this scrape's read and takes writes, 0 when it did not or its last write batch failed (SQLite).",
            up.database,
        ),
        (
            "cardpoll_hint_channel_up",
            "1 when the hint channel answered this scrape's reads, 0 when it did not (its lane depths are then absent).",
            up.hint_channel,
        ),
    ] {
        r.describe_gauge(name.into(), None, help.into());
        r.register_gauge(&key(name, &[]), &META)
            .set(if value { 1.0 } else { 0.0 });
    }
    r.describe_gauge(
        "cardpoll_items".into(),
        None,
        "Open priority items by status and task type.".into(),
    );
    r.describe_gauge(
        "cardpoll_lane_depth".into(),
        None,
        "Entries waiting per task type and lane.".into(),
    );
    for (status, task_type, n) in items {
        r.register_gauge(
            &key(
                "cardpoll_items",
                &[("status", status), ("task_type", task_type)],
            ),
            &META,
        )
        .set(*n as f64);
    }
    for (task_type, lane, n) in lanes {
        r.register_gauge(
            &key(
                "cardpoll_lane_depth",
                &[("task_type", task_type), ("lane", lane)],
            ),
            &META,
        )
        .set(*n as f64);
    }
    r.handle().render()
}
