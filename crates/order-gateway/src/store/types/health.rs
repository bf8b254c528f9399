//! What `/health`, the alerts and the console's overview read: worker heartbeats, the health
//! snapshot, each instance's clock signal and its freshness, status counts and the tasks that
//! need a person.

use std::time::Duration;

use rakuten_types::order::TaskSummary;
use rakuten_types::{TaskStatus, Timestamp};

/// A worker's heartbeat.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerSeen {
    /// The worker.
    pub worker_id: String,
    /// Its last lease request (or valid renew/report).
    pub last_seen_at: Timestamp,
}

/// What `/health` and the alerts need, read in one go.
#[derive(Debug, Clone, Default)]
pub struct HealthSnapshot {
    /// Queued tasks.
    pub queued: i64,
    /// The leased/running tasks.
    pub active: Vec<TaskSummary>,
    /// Stale tasks, all of them counted.
    pub stale_count: i64,
    /// Stale tasks (each one is an alert; at most 100 listed, oldest first).
    pub stale: Vec<TaskSummary>,
    /// Queued tasks created before the threshold asked for (at most 100, oldest first).
    pub queued_too_long: Vec<TaskSummary>,
    /// Queued tasks created before the threshold, all of them counted.
    pub queued_too_long_count: i64,
    /// Workers, longest silent first (so every offline one comes first), at most
    /// [`HEALTH_WORKERS_LISTED`].
    pub workers: Vec<WorkerSeen>,
    /// Every worker, listed or not.
    pub workers_total: i64,
    /// Each instance's clock signal, most recently written first (at most
    /// [`CLOCK_SIGNALS_LISTED`]; [`crate::jobs::alerts::compute`] keeps the fresh ones).
    pub clocks: Vec<rakuten_types::order::InstanceClock>,
}

/// What an instance's sweeper saw of its clock, written to `clock_signals`.
#[derive(Debug, Clone, PartialEq)]
pub struct ClockSignal {
    /// The instance (`<hostname>/<8 hex digits>`, fixed at start-up).
    pub instance_id: String,
    /// The database's clock minus the instance's, milliseconds; `None` when there is nothing to
    /// compare (SQLite).
    pub offset_ms: Option<i64>,
    /// `|offset_ms|` is over the tolerance (the instance does not sweep).
    pub skewed: bool,
    /// A clock jump seen since the last signal, described; `None` keeps the last one recorded.
    pub jump: Option<String>,
}

/// `at` (on an instance's clock) moved by that instance's `offset_ms` (the database's clock
/// minus its own): the same instant on the shared clock.
pub fn on_shared_clock(at: Timestamp, offset_ms: Option<i64>) -> Timestamp {
    match offset_ms {
        Some(o) if o >= 0 => at.plus(Duration::from_millis(o.unsigned_abs())),
        Some(o) => at.minus(Duration::from_millis(o.unsigned_abs())),
        None => at,
    }
}

/// Whether an instance's clock signal was written within [`CLOCK_SIGNAL_FRESH`] of `now`
/// (compared on the shared clock, so an instance whose clock runs behind still counts as
/// running).
pub fn clock_signal_fresh(c: &rakuten_types::order::InstanceClock, now: Timestamp) -> bool {
    on_shared_clock(c.updated_at, c.offset_ms) >= now.minus(CLOCK_SIGNAL_FRESH)
}

/// A clock signal not written for this long is an instance that stopped (or lost the database):
/// it no longer raises `clock_skew` and `/health` no longer lists it.
pub const CLOCK_SIGNAL_FRESH: Duration = Duration::from_secs(300);

/// `clock_jump` is an event, not a state: its alert clears once the instance saw no new jump for
/// this long (D-clock-alerts).
pub const CLOCK_JUMP_QUIET: Duration = Duration::from_secs(600);

/// Rows of `clock_signals` not written for this long are deleted (every start-up has a new id).
pub const CLOCK_SIGNAL_RETENTION: Duration = Duration::from_secs(86_400);

/// Most clock signals `/health` and the alert sync read.
pub const CLOCK_SIGNALS_LISTED: i64 = 100;

/// Most workers a [`HealthSnapshot`] lists.
pub const HEALTH_WORKERS_LISTED: i64 = 1000;

/// Tasks per status and the oldest queued task (the console's overview).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatusCounts {
    /// Every status with its number of tasks (zero included), in [`TaskStatus::ALL`] order, each
    /// counted up to [`COUNT_CAP`] + 1.
    pub by_status: Vec<(TaskStatus, i64)>,
    /// When the oldest queued task was created.
    pub oldest_queued: Option<Timestamp>,
}

/// "resolved by operator NAME: REASON" ("cancelled by …" for a cancel): who ended a task and
/// why, as the console says it. `task_attention`'s query builds the same words in SQL.
pub fn ended_by(
    action: rakuten_types::alert::OperatorActionKind,
    actor: &str,
    reason: &str,
) -> String {
    let done = match action {
        rakuten_types::alert::OperatorActionKind::Cancel => "cancelled",
        _ => "resolved",
    };
    format!("{done} by operator {actor}: {reason}")
}

/// A task that needs a person (the console's "needs attention"), with its latest report's words.
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionTask {
    /// The task.
    pub task: TaskSummary,
    /// The latest report's free text.
    pub last_detail: Option<String>,
    /// The operator who ended it, for a task ended by a resolve or a cancel: [`ended_by`]'s
    /// words (the latest such action). A worker's last words no longer say why such a task
    /// failed.
    pub ended_by: Option<String>,
    /// The latest report's error code.
    pub last_error_code: Option<i32>,
    /// The latest site order number any report of the task carried.
    pub last_site_order_id: Option<String>,
}
