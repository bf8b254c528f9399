//! Health and configuration reads.

use axum::Json;
use axum::extract::State;
use serde::Serialize;

use rakuten_types::Envelope;

use crate::executor::pool::QueueDepth;
use crate::hints::ChannelLane;
use crate::http::{AppState, ok};

/// Health answer.
#[derive(Debug, Serialize)]
pub struct Health {
    /// `ok` when the process answers (the hint channel's state is reported separately).
    pub status: &'static str,
    /// Hint channel backend: `memory` or `redis`.
    pub hint_backend: &'static str,
    /// Per task type: execution queue depths per lane, plus the channel lanes' lengths.
    pub queues: Vec<TypeQueues>,
    /// When the last scheduling cycle ran (absent before the first).
    pub last_cycle_at: Option<rakuten_types::Timestamp>,
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

/// `GET /health` (no auth): liveness and queue depths per task type and lane.
pub async fn health(State(st): State<AppState>) -> Json<Envelope<Health>> {
    let mut queues = Vec::new();
    for execution in st.scheduler.pool().depths() {
        let tt = execution.task_type.clone();
        queues.push(TypeQueues {
            execution,
            hint_lane: st.hints.depth(ChannelLane::Hint, &tt).await.ok(),
            manual_lane: st.hints.depth(ChannelLane::Manual, &tt).await.ok(),
        });
    }
    ok(Health {
        status: "ok",
        hint_backend: st.hints.backend(),
        queues,
        last_cycle_at: st.scheduler.last_cycle().and_then(|c| c.at),
    })
}

/// One configured task type.
#[derive(Debug, Serialize)]
pub struct TaskTypeView {
    /// Name.
    pub name: String,
    /// Normal interval, seconds.
    pub interval_secs: u64,
}

/// `GET /api/task-types` (no auth): the configured task types.
pub async fn task_types(State(st): State<AppState>) -> Json<Envelope<Vec<TaskTypeView>>> {
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
