//! Health and configuration reads.

use axum::Json;
use axum::extract::State;
use serde::Serialize;

use rakuten_types::Envelope;

use crate::http::{AppState, ok};

/// Health answer.
#[derive(Debug, Serialize)]
pub struct Health {
    /// Always `ok` when the process answers.
    pub status: &'static str,
}

/// `GET /health` (no auth).
pub async fn health() -> Json<Envelope<Health>> {
    ok(Health { status: "ok" })
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
