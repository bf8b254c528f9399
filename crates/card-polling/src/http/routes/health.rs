//! Health and configuration reads.

use axum::Json;
use axum::extract::{FromRequestParts, State};
use axum::http::StatusCode;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use rakuten_types::{Envelope, ErrorCode};

use crate::domain::{Action, authorize};
use crate::executor::clock_guard::ClockHealth;
use crate::executor::pool::QueueDepth;
use crate::hints::ChannelLane;
use crate::http::auth::{Allowed, Auth, rule};
use crate::http::error::ApiError;
use crate::http::ok;
use crate::jobs::schedule_config::ScheduleConfigHealth;
use crate::state::AppState;

/// Health answer.
#[derive(Debug, Serialize)]
pub struct Health {
    /// `ok` when the database answers, `unavailable` (with HTTP 503) when it does not.
    pub status: &'static str,
    /// What the database answered.
    pub database: DatabaseHealth,
    /// Hint channel backend: `memory` or `redis`.
    pub hint_backend: &'static str,
    /// Whether the hint channel answered this request's reads of its lanes (D-metrics).
    /// `false` does not make the status `unavailable`: hints are lossy by design and the
    /// recovery read still finds every due item, one cycle later.
    pub hint_channel_reachable: bool,
    /// Per task type: execution queue depths per lane, plus the channel lanes' lengths.
    pub queues: Vec<TypeQueues>,
    /// When the last scheduling cycle ran (absent before the first).
    pub last_cycle_at: Option<rakuten_types::Timestamp>,
    /// This instance's clock and its check against the shared database's:
    /// `status` `off`, `no_shared_clock` (SQLite), `not_yet_measured` (before the first claim),
    /// `ok` or `skewed` (this instance makes no claims), never `null` (D-poll-clock-skew-no-claims).
    pub clock: ClockHealth,
    /// Whether the ordinary polling schedule's configuration stored for every instance is still
    /// this instance's (checked every 30 s; D-schedule-config-check), with both.
    pub schedule_config: ScheduleConfigHealth,
}

/// The database's part of `/health` (D-poll-health-reads-items).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct DatabaseHealth {
    /// `true` when the priority items could be read within [`READY_TIMEOUT`].
    pub reachable: bool,
    /// Open priority items by status (`pending`, `running`); `null` when unreachable. Finished
    /// items are not counted (D-metrics).
    pub items: Option<ItemStatusCounts>,
    /// Whole seconds since the oldest `pending` item was enqueued, by the service clock; `null`
    /// when none is pending or the database is unreachable.
    pub oldest_pending_age_secs: Option<u64>,
    /// `true` when the database reads but takes no writes (SQLite: the last write batch failed
    /// on a full disk, an I/O error or a read-only file, and none committed since); the status
    /// is then `unavailable` (D-writes-failing-is-503-and-unready).
    pub writes_failing: bool,
}

/// Open priority items by status.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct ItemStatusCounts {
    /// Waiting for a claim.
    pub pending: i64,
    /// Claimed, executing.
    pub running: i64,
}

/// Queue depths of one task type.
#[derive(Debug, Serialize)]
pub struct TypeQueues {
    /// The execution queue, per lane and shard.
    #[serde(flatten)]
    pub execution: QueueDepth,
    /// Hints waiting in the hint lane (`null` when the channel does not answer).
    pub hint_lane: Option<u64>,
    /// Triggers waiting in the manual lane (`null` when the channel does not answer).
    pub manual_lane: Option<u64>,
}

/// What `/health` shows: everything to a caller with a valid token, the status alone otherwise.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum HealthView {
    /// Database state, queue depths and the last cycle (boxed: far larger than the summary).
    Full(Box<Health>),
    /// `{"status": "ok"|"unavailable", "database": "reachable"|"writes_failing"|"unreachable"}`.
    Summary {
        /// `ok` or `unavailable`.
        status: &'static str,
        /// `reachable`; `writes_failing` when it reads but takes no writes (a full disk, a lock
        /// held past the timeout); `unreachable` when it cannot be read.
        database: &'static str,
    },
}

/// `GET /health`: with the token of an account that may read the queues (super_admin, platform),
/// the database's state (open items by status, oldest pending age), liveness and queue depths per
/// task type and lane; without an `Authorization` header, or with an agent's token, only the
/// status and whether the database answers; an enterprise account's token is
/// 403, a wrong token 401. When the database cannot be read within [`READY_TIMEOUT`] the answer is
/// 503 with code 1503, `success: false`, and `data` still describing the state.
#[utoipa::path(
    get, path = "/health", tag = "health",
    summary = "database reachability (503 when it cannot be read); with a super_admin or platform token also open items by status, oldest pending age, queue depths (an agent's token: the status alone)",
    responses(
        (status = 200, description = "ok", body = crate::http::envelope::HealthEnvelope),
        (status = 401, description = "a token was sent and is not an account's (1001)", body = crate::http::envelope::ErrorEnvelope),
        (status = 403, description = "an enterprise account's token (1002)", body = crate::http::envelope::ErrorEnvelope),
    )
)]
pub async fn health(State(st): State<AppState>, parts: Parts) -> Result<Response, ApiError> {
    // The queues' state across every shop is for operators; an agent sees what an anonymous
    // probe sees; an enterprise account is refused (D-access-health-by-role).
    let full = if parts.headers.contains_key(AUTHORIZATION) {
        let mut parts = parts;
        let Auth(who) = Auth::from_request_parts(&mut parts, &st).await?;
        if authorize(&who, Action::ReadQueues).is_ok() {
            true
        } else if authorize(&who, Action::ReadConfig).is_ok() {
            false
        } else {
            return Err(ApiError::forbidden());
        }
    } else {
        false
    };
    let database = database_health(&st).await;
    let reachable = database.reachable && !database.writes_failing;
    let status = if reachable { "ok" } else { "unavailable" };
    let view = if full {
        HealthView::Full(Box::new(full_health(&st, status, database).await))
    } else {
        HealthView::Summary {
            status,
            database: if reachable {
                "reachable"
            } else if database.reachable {
                "writes_failing"
            } else {
                "unreachable"
            },
        }
    };
    if reachable {
        return Ok(ok(view).into_response());
    }
    let body = Envelope {
        success: false,
        msg: "database unavailable".to_owned(),
        data: Some(view),
        code: ErrorCode::Unavailable.as_i32(),
    };
    Ok((
        StatusCode::SERVICE_UNAVAILABLE,
        [(RETRY_AFTER, "1")],
        Json(body),
    )
        .into_response())
}

/// `read` within [`READY_TIMEOUT`]; a failure or a timeout is logged as `what` and is `None`.
async fn within_ready_timeout<T>(
    what: &str,
    read: impl std::future::Future<Output = Result<T, crate::store::StoreError>>,
) -> Option<T> {
    match tokio::time::timeout(READY_TIMEOUT, read).await {
        Ok(Ok(v)) => Some(v),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "{what}: the database cannot be read");
            None
        }
        Err(_) => {
            tracing::warn!("{what}: the database did not answer in time");
            None
        }
    }
}

/// Reads the open items within [`READY_TIMEOUT`]; a failure or a timeout is `reachable: false`.
async fn database_health(st: &AppState) -> DatabaseHealth {
    let Some(q) = within_ready_timeout("health", st.store.queue_health()).await else {
        return DatabaseHealth {
            reachable: false,
            items: None,
            oldest_pending_age_secs: None,
            writes_failing: st.store.writes_failing(),
        };
    };
    let now = st.clock.now();
    DatabaseHealth {
        reachable: true,
        items: Some(ItemStatusCounts {
            pending: q.pending,
            running: q.running,
        }),
        oldest_pending_age_secs: q
            .oldest_pending_enqueued_at
            .map(|at| (now.as_millis().saturating_sub(at.as_millis()).max(0) / 1000) as u64),
        writes_failing: st.store.writes_failing(),
    }
}

/// `GET /livez`: the process answers (no database, no channel).
#[utoipa::path(
    get, path = "/livez", tag = "health",
    summary = "the process answers (no database, no channel)",
    responses(
        (status = 200, description = "ok", body = crate::http::envelope::Envelope),
    ),
)]
pub async fn livez() -> Json<Envelope<ProbeStatus>> {
    ok(ProbeStatus { status: "alive" })
}

/// `GET /readyz`: the database answers within [`READY_TIMEOUT`], else 503.
#[utoipa::path(
    get, path = "/readyz", tag = "health",
    summary = "the database answers within 2 s and takes writes (else 503, code 1503)",
    responses(
        (status = 200, description = "ok", body = crate::http::envelope::Envelope),
    ),
)]
pub async fn readyz(State(st): State<AppState>) -> Result<Json<Envelope<ProbeStatus>>, ApiError> {
    if st.store.writes_failing() {
        tracing::warn!("readiness: the database takes no writes (the last write batch failed)");
        return Err(ApiError::generic(
            ErrorCode::Unavailable,
            "database unavailable: writes are failing",
        ));
    }
    match within_ready_timeout("readiness", st.store.ping()).await {
        Some(()) => Ok(ok(ProbeStatus { status: "ready" })),
        None => Err(ApiError::generic(
            ErrorCode::Unavailable,
            "database unavailable",
        )),
    }
}

/// `GET /metrics` (accounts that may administer: super_admin, platform): Prometheus text,
/// [`crate::telemetry`]. A database that does not answer within [`READY_TIMEOUT`] does not fail
/// the scrape: the item counts are left out and `cardpoll_database_up` is 0, so the outage is
/// itself on the dashboard (D-metrics); a hint channel that does not answer leaves out its
/// lane depths and sets `cardpoll_hint_channel_up` to 0.
#[utoipa::path(
    get, path = "/metrics", tag = "health",
    summary = "Prometheus text (`text/plain; version=0.0.4`), not the envelope: open items, lane depths, cycles, carrier calls (super_admin, platform)",
    responses((status = 200, description = "ok", body = String, content_type = "text/plain")),
    security(("bearer" = []))
)]
pub async fn metrics(
    _: Allowed<rule::ReadQueues>,
    State(st): State<AppState>,
) -> Result<Response, ApiError> {
    let items = within_ready_timeout("metrics", st.store.item_counts())
        .await
        .map(|found| {
            // Every configured task type's `pending` and `running` series, 0 when none is open:
            // an absent series cannot be told from a failed scrape (D-metrics).
            let mut all: Vec<(String, String, i64)> = Vec::new();
            for tt in st.task_types.names() {
                for status in ["pending", "running"] {
                    let n = found
                        .iter()
                        .find(|(s, t, _)| s == status && *t == tt)
                        .map_or(0, |(_, _, n)| *n);
                    all.push((status.to_owned(), tt.clone(), n));
                }
            }
            all
        });
    let mut channel_up = true;
    let mut lanes = Vec::new();
    for d in st.scheduler.pool().depths() {
        let tt = d.task_type.clone();
        for (lane, n) in [
            ("priority", d.priority),
            ("manual", d.manual),
            ("ordinary", d.ordinary),
            ("in_flight", d.in_flight),
        ] {
            lanes.push((tt.clone(), lane, n as u64));
        }
        for (lane, ch) in [
            ("hint_channel", ChannelLane::Hint),
            ("manual_channel", ChannelLane::Manual),
        ] {
            // One failed read marks the channel down; the rest are not tried (each could wait).
            if !channel_up {
                continue;
            }
            match st.hints.depth(ch, &tt).await {
                Ok(n) => lanes.push((tt.clone(), lane, n)),
                Err(_) => channel_up = false,
            }
        }
    }
    let up = crate::telemetry::Up {
        database: items.is_some() && !st.store.writes_failing(),
        hint_channel: channel_up,
    };
    let mut body =
        crate::telemetry::render_counts(items.as_deref().unwrap_or_default(), &lanes, up);
    let metrics = st.scheduler.pool().executor().metrics();
    metrics.items_set_aside(st.store.items_set_aside());
    body.push_str(&metrics.render());
    Ok(([(CONTENT_TYPE, crate::telemetry::CONTENT_TYPE)], body).into_response())
}

/// What a probe answers.
#[derive(Debug, Serialize)]
pub struct ProbeStatus {
    /// `alive` or `ready`.
    pub status: &'static str,
}

/// Longest wait for the database in `/readyz`.
pub const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

async fn full_health(st: &AppState, status: &'static str, database: DatabaseHealth) -> Health {
    let mut queues = Vec::new();
    let mut reachable = true;
    for execution in st.scheduler.pool().depths() {
        let tt = execution.task_type.clone();
        // After one failed read the rest are not tried (each could wait its timeout).
        let mut depth = async |lane| {
            if !reachable {
                return None;
            }
            let d = st.hints.depth(lane, &tt).await.ok();
            reachable = d.is_some();
            d
        };
        let hint_lane = depth(ChannelLane::Hint).await;
        let manual_lane = depth(ChannelLane::Manual).await;
        queues.push(TypeQueues {
            execution,
            hint_lane,
            manual_lane,
        });
    }
    Health {
        status,
        database,
        hint_backend: st.hints.backend(),
        hint_channel_reachable: reachable,
        queues,
        last_cycle_at: st.scheduler.last_cycle().and_then(|c| c.at),
        clock: st.scheduler.pool().executor().clock_guard().health(),
        schedule_config: st.schedule_config.health(),
    }
}

/// One configured task type.
#[derive(Debug, Serialize)]
pub struct TaskTypeView {
    /// Name.
    pub name: String,
    /// Normal interval, seconds.
    pub interval_secs: u64,
}

/// `GET /api/task-types` (any account but enterprise): the configured task types.
#[utoipa::path(
    get, path = "/api/task-types", tag = "health",
    summary = "configured task types (any account but enterprise)",
    responses(
        (status = 200, description = "ok", body = crate::http::envelope::Envelope),
    ),
    security(("bearer" = []))
)]
pub async fn task_types(
    _: Allowed<rule::ReadConfig>,
    State(st): State<AppState>,
) -> Json<Envelope<Vec<TaskTypeView>>> {
    ok(st
        .task_types
        .all()
        .iter()
        .map(|t| TaskTypeView {
            name: t.name.clone(),
            interval_secs: t.interval.as_secs(),
        })
        .collect())
}
