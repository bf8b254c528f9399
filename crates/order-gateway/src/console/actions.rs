//! The console's action forms (POST). Each checks the session's CSRF token first, then requires a
//! reason, then calls the same store transition as the API, with the signed-in actor's name, and
//! redirects to the task page with a notice. A refusal (wrong status, unknown worker) is shown on
//! an error page with the store's words.

use axum::Form;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use rakuten_types::{TaskId, WorkerId};
use serde::Deserialize;
use web_console::layout::enc;

use super::{Signed, csrf_refused};
use crate::http::AppState;
use crate::store::{ReclaimRequest, StoreError};

/// Longest reason, characters.
pub const MAX_REASON_CHARS: usize = 1000;

/// The reclaim form.
#[derive(Debug, Deserialize)]
pub struct ReclaimForm {
    csrf: Option<String>,
    worker_id: String,
    reason: String,
}

/// A required reason: trimmed, 1..=1000 characters.
fn reason(signed: &Signed, r: &str) -> Result<String, Response> {
    let r = r.trim();
    if r.is_empty() || r.chars().count() > MAX_REASON_CHARS {
        return Err(signed.error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "A reason (1 to 1000 characters) is required; it is recorded with your name.",
        ));
    }
    Ok(r.to_owned())
}

fn refused(signed: &Signed, e: StoreError) -> Response {
    let status = match e {
        StoreError::TaskNotFound(_) => StatusCode::NOT_FOUND,
        StoreError::Database(_) | StoreError::Closed | StoreError::Corrupt(_) => {
            tracing::error!(error = %e, "console action failed");
            return signed.error(
                StatusCode::SERVICE_UNAVAILABLE,
                "The database did not take the action; try again.",
            );
        }
        _ => StatusCode::CONFLICT,
    };
    signed.error(status, &format!("Refused: {e}."))
}

fn back_to(task_id: &TaskId, done: &str) -> Response {
    Redirect::to(&format!(
        "/console/tasks/{}?done={done}",
        enc(task_id.as_str())
    ))
    .into_response()
}

/// `POST /console/tasks/{id}/reclaim`: the stale task to a named worker.
pub async fn reclaim(
    State(st): State<AppState>,
    signed: Signed,
    Path(task_id): Path<String>,
    Form(form): Form<ReclaimForm>,
) -> Response {
    if !signed.0.csrf_ok(form.csrf.as_deref()) {
        return csrf_refused(&signed);
    }
    let Ok(task_id) = TaskId::parse(&task_id) else {
        return signed.error(StatusCode::NOT_FOUND, "No such task.");
    };
    let reason = match reason(&signed, &form.reason) {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    let Ok(worker_id) = WorkerId::parse(form.worker_id.trim()) else {
        return signed.error(StatusCode::UNPROCESSABLE_ENTITY, "Not a valid worker id.");
    };
    let req = ReclaimRequest {
        task_id: task_id.clone(),
        worker_id: worker_id.clone(),
        ttl: st.settings.lease_ttl(),
        scope: st.settings.lease_scope,
    };
    match st.store.task_reclaim(req, st.clock.now()).await {
        Ok(_grant) => {
            st.lease_notifier.notify_leasable();
            tracing::info!(actor = %signed.name(), task_id = %task_id.as_str(),
                worker = %worker_id.as_str(), %reason, "console reclaim");
            back_to(&task_id, "reclaimed")
        }
        Err(e) => refused(&signed, e),
    }
}
