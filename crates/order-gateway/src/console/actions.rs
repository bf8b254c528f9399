//! The console's action forms (POST). Each checks the session's CSRF token first, then requires a
//! reason, then calls the same store transition as the API, with the signed-in actor's name, and
//! redirects to the task page with a notice; the store writes the `operator_actions` row. A
//! refusal (a bad reason, a wrong status, an unknown worker) is a page with the store's words, a
//! link back to the task and the reason as typed, to copy.

// The `Err` of the form checks is the refusal page the handler returns as it is; boxing it would
// only add an allocation on the refusal path.
#![allow(clippy::result_large_err)]

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use rakuten_types::text::MAX_REASON_CHARS;
use rakuten_types::{OrderState, Outcome, TaskId, WorkerId};
use serde::Deserialize;
use web_console::ConsoleForm;
use web_console::layout::{self, enc};

use super::Signed;
use crate::state::AppState;
use crate::store::operator::{CancelRequest, ResolveRequest, RetireRequest};
use crate::store::{ReclaimRequest, StoreError};

/// The reclaim form.
#[derive(Debug, Deserialize)]
pub struct ReclaimForm {
    csrf: Option<String>,
    worker_id: String,
    reason: String,
}

/// Where a refused form sends the person back (the task's page, or the overview), with the reason
/// they typed shown again to copy ([`layout::refused_form_page`]).
struct Refusal<'a> {
    signed: &'a Signed,
    back: (String, String),
    typed: &'a str,
}

impl<'a> Refusal<'a> {
    fn for_task(signed: &'a Signed, task_id: &str, typed: &'a str) -> Self {
        Refusal {
            signed,
            back: (
                format!("/console/tasks/{}", enc(task_id)),
                format!("Back to task {task_id}"),
            ),
            typed,
        }
    }

    fn to_overview(signed: &'a Signed, typed: &'a str) -> Self {
        Refusal {
            signed,
            back: ("/console".into(), "Back to the overview".into()),
            typed,
        }
    }

    fn page(&self, status: StatusCode, message: &str) -> Response {
        layout::refused_form_page(
            &self.signed.chrome(),
            status,
            message,
            (&self.back.0, &self.back.1),
            self.typed,
        )
    }

    /// A required reason, by the API's rule ([`rakuten_types::text::reason`]): a form used to
    /// take control characters the API refuses.
    fn reason(&self) -> Result<String, Response> {
        rakuten_types::text::reason(self.typed, MAX_REASON_CHARS).map_err(|msg| {
            self.page(
                StatusCode::UNPROCESSABLE_ENTITY,
                &format!(
                    "Not taken: {msg}. A reason (1 to {MAX_REASON_CHARS} characters of readable \
                     text) is required; it is recorded with your name."
                ),
            )
        })
    }

    fn store(&self, e: StoreError) -> Response {
        let status = match e {
            StoreError::TaskNotFound(_) => StatusCode::NOT_FOUND,
            StoreError::Contradicts(msg) => {
                return self.page(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    &format!("Not taken: {msg}."),
                );
            }
            StoreError::Database(_) | StoreError::Closed | StoreError::Corrupt(_) => {
                tracing::error!(error = %e, "console action failed");
                return self.page(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "The database did not take the action; try again.",
                );
            }
            _ => StatusCode::CONFLICT,
        };
        self.page(status, &format!("Refused: {e}."))
    }
}

fn back_to(task_id: &TaskId, done: &str) -> Response {
    Redirect::to(&format!(
        "/console/tasks/{}?done={done}",
        enc(task_id.as_str())
    ))
    .into_response()
}

/// Checks the CSRF token, the task id and the reason of a task action.
fn task_form<'a>(
    signed: &'a Signed,
    csrf: Option<&str>,
    task_id: &str,
    typed: &'a str,
) -> Result<(TaskId, String, Refusal<'a>), Response> {
    if !signed.csrf_ok(csrf) {
        return Err(signed.csrf_refused());
    }
    let Ok(task_id) = TaskId::parse(task_id) else {
        return Err(
            Refusal::to_overview(signed, typed).page(StatusCode::NOT_FOUND, "No such task.")
        );
    };
    let refusal = Refusal::for_task(signed, task_id.as_str(), typed);
    let reason = refusal.reason()?;
    Ok((task_id, reason, refusal))
}

/// The resolve form.
#[derive(Debug, Deserialize)]
pub struct ResolveForm {
    csrf: Option<String>,
    outcome: String,
    site_order_id: Option<String>,
    state: Option<String>,
    reason: String,
}

/// `POST /console/tasks/{id}/resolve`: a stale or needs_human task to succeeded or failed.
pub async fn resolve(
    State(st): State<AppState>,
    signed: Signed,
    Path(task_id): Path<String>,
    ConsoleForm(form): ConsoleForm<ResolveForm>,
) -> Response {
    let (task_id, reason, refusal) =
        match task_form(&signed, form.csrf.as_deref(), &task_id, &form.reason) {
            Ok(v) => v,
            Err(resp) => return resp,
        };
    let outcome = match form.outcome.as_str() {
        "succeeded" => Outcome::Succeeded,
        "failed" => Outcome::Failed,
        _ => {
            return refusal.page(
                StatusCode::UNPROCESSABLE_ENTITY,
                "The outcome must be succeeded or failed.",
            );
        }
    };
    let site_order_id = form
        .site_order_id
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty());
    if site_order_id.is_some_and(|s| s.chars().count() > 128 || s.chars().any(char::is_control)) {
        return refusal.page(
            StatusCode::UNPROCESSABLE_ENTITY,
            "The site order number must be 1 to 128 characters.",
        );
    }
    let state = match form.state.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(s) => match s.parse::<OrderState>() {
            Ok(s) => Some(s),
            Err(_) => {
                return refusal.page(StatusCode::UNPROCESSABLE_ENTITY, "Unknown order state.");
            }
        },
    };
    if let Err(msg) = outcome.check_fits_state(state) {
        return refusal.page(
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!("Not taken: {msg}."),
        );
    }
    let req = ResolveRequest {
        task_id: task_id.clone(),
        outcome,
        reason,
        actor: signed.name().to_owned(),
        site_order_id: site_order_id.map(str::to_owned),
        state,
    };
    match st.ops.task_resolve(req, st.clock.now()).await {
        Ok(_) => back_to(&task_id, "resolved"),
        Err(e) => refusal.store(e),
    }
}

/// A form with only a reason.
#[derive(Debug, Deserialize)]
pub struct ReasonForm {
    csrf: Option<String>,
    reason: String,
}

/// `POST /console/tasks/{id}/cancel`: a queued task to failed.
pub async fn cancel(
    State(st): State<AppState>,
    signed: Signed,
    Path(task_id): Path<String>,
    ConsoleForm(form): ConsoleForm<ReasonForm>,
) -> Response {
    let (task_id, reason, refusal) =
        match task_form(&signed, form.csrf.as_deref(), &task_id, &form.reason) {
            Ok(v) => v,
            Err(resp) => return resp,
        };
    let req = CancelRequest {
        task_id: task_id.clone(),
        reason,
        actor: signed.name().to_owned(),
    };
    match st.ops.task_cancel(req, st.clock.now()).await {
        Ok(_) => back_to(&task_id, "cancelled"),
        Err(e) => refusal.store(e),
    }
}

/// `POST /console/workers/{id}/retire`: hide a worker until it polls again.
pub async fn retire(
    State(st): State<AppState>,
    signed: Signed,
    Path(worker_id): Path<String>,
    ConsoleForm(form): ConsoleForm<ReasonForm>,
) -> Response {
    if !signed.csrf_ok(form.csrf.as_deref()) {
        return signed.csrf_refused();
    }
    let refusal = Refusal::to_overview(&signed, &form.reason);
    let reason = match refusal.reason() {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    let Ok(worker_id) = WorkerId::parse(&worker_id) else {
        return refusal.page(StatusCode::NOT_FOUND, "No such worker.");
    };
    let req = RetireRequest {
        worker_id,
        reason,
        actor: signed.name().to_owned(),
    };
    match st.ops.worker_retire(req, st.clock.now()).await {
        Ok(_) => Redirect::to("/console?done=retired").into_response(),
        Err(e) => refusal.store(e),
    }
}

/// `POST /console/tasks/{id}/reclaim`: the stale task to a named worker.
pub async fn reclaim(
    State(st): State<AppState>,
    signed: Signed,
    Path(task_id): Path<String>,
    ConsoleForm(form): ConsoleForm<ReclaimForm>,
) -> Response {
    let (task_id, reason, refusal) =
        match task_form(&signed, form.csrf.as_deref(), &task_id, &form.reason) {
            Ok(v) => v,
            Err(resp) => return resp,
        };
    let Ok(worker_id) = WorkerId::parse(form.worker_id.trim()) else {
        return refusal.page(StatusCode::UNPROCESSABLE_ENTITY, "Not a valid worker id.");
    };
    let req = ReclaimRequest {
        task_id: task_id.clone(),
        worker_id: worker_id.clone(),
        ttl: st.settings.lease_ttl(),
        scope: st.settings.lease_scope,
        reason: reason.clone(),
        actor: signed.name().to_owned(),
    };
    match st.store.task_reclaim(req, st.clock.now()).await {
        Ok(_grant) => {
            // The grant names one worker, which may be any of the waiters.
            st.lease_notifier.notify_everyone();
            back_to(&task_id, "reclaimed")
        }
        Err(e) => refusal.store(e),
    }
}
