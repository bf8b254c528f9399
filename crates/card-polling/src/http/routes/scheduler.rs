//! `GET /api/scheduler/last-cycle` (super_admin, platform): the last scheduling cycle's
//! decisions — hints, manual triggers, recovered items and ordinary cards taken per task type,
//! shards skipped for back-pressure — and the queue depths after it. `null` before the first.

use axum::Json;
use axum::extract::State;

use rakuten_types::Envelope;

use crate::http::auth::{Allowed, rule};
use crate::http::error::ApiError;
use crate::http::ok;
use crate::scheduler::CycleReport;
use crate::state::AppState;

/// The last cycle's report.
#[utoipa::path(
    get, path = "/api/scheduler/last-cycle", tag = "scheduler",
    summary = "the last scheduling cycle",
    responses(
        (status = 200, description = "ok", body = crate::http::envelope::Envelope),
    ),
    security(("bearer" = []))
)]
pub async fn last_cycle(
    State(st): State<AppState>,
    _: Allowed<rule::ReadQueues>,
) -> Result<Json<Envelope<Option<CycleReport>>>, ApiError> {
    Ok(ok(st.scheduler.last_cycle()))
}
