//! `GET /console/attention`: every task that waits for a person, with why and what to check
//! first.

use std::time::Duration;

use axum::extract::State;
use axum::response::Response;
use maud::html;
use rakuten_types::TaskStatus;
use web_console::layout::{age, badge};

use super::{intent_line, store_error, task_link};
use crate::console::Signed;
use crate::state::AppState;
use crate::store::AttentionTask;
use crate::store::operator::stale_advice;

/// Most rows of "needs attention".
pub const ATTENTION_LIMIT: i64 = 200;
/// How far back failed tasks count as needing attention.
pub const FAILED_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// Why a task needs a person, and what to check first. The words start from the worker's latest
/// report (D-stale-words-follow-the-latest-report): a reported site order number means the order
/// exists, nothing past the cart means checking whether a submit happened.
pub fn reason(t: &AttentionTask) -> String {
    let s = &t.task;
    let said = match (&t.last_detail, t.last_error_code) {
        (Some(d), Some(c)) => format!("{d} (code {c})"),
        (Some(d), None) => d.clone(),
        (None, Some(c)) => format!("code {c}"),
        (None, None) => "no detail reported".to_owned(),
    };
    let order = t.last_site_order_id.as_deref();
    match s.status {
        TaskStatus::Stale => format!(
            "The lease of {} lapsed{} without a final report after {} grant(s). {}",
            s.lease_owner.as_deref().unwrap_or("a worker"),
            s.lease_expires_at
                .map(|t| format!(" at {}", t.to_rfc3339()))
                .unwrap_or_default(),
            s.lease_count,
            stale_advice(s.latest_state, order)
        ),
        TaskStatus::NeedsHuman => match s.latest_state.filter(|l| l.is_submitted()) {
            Some(l) => format!(
                "The worker stopped for a person: {said}. Its latest report says the order \
                 exists ({l}{}).",
                order
                    .map(|n| format!(", site order {n}"))
                    .unwrap_or_default()
            ),
            None => format!("The worker stopped for a person: {said}."),
        },
        // A late report after the verdict says the order went through
        // (D-late-report-contradiction-alert).
        TaskStatus::Failed
            if s.latest_state.is_some_and(|l| {
                rakuten_types::Outcome::Failed
                    .check_fits_state(Some(l))
                    .is_err()
            }) =>
        {
            format!(
                "Failed, but its latest report says {}{}: the order went through after the \
                 verdict. Check the site and tell the upstream before it orders again.",
                s.latest_state.map_or("", |l| l.as_str()),
                order
                    .map(|n| format!(", site order {n}"))
                    .unwrap_or_default()
            )
        }
        TaskStatus::Succeeded => format!(
            "Succeeded, but its latest report says {}{}: the order may not exist after all. \
             Check the site and tell the upstream.",
            s.latest_state.map_or("", |l| l.as_str()),
            order
                .map(|n| format!(", site order {n}"))
                .unwrap_or_default()
        ),
        _ => match &t.ended_by {
            Some(by) => format!("Failed: {by}."),
            None => format!("Failed: {said}."),
        },
    }
}

/// `GET /console/attention`.
pub async fn attention(State(st): State<AppState>, signed: Signed) -> Response {
    let now = st.clock.now();
    let rows = match st
        .store
        .task_attention(now.minus(FAILED_WINDOW), ATTENTION_LIMIT)
        .await
    {
        Ok(r) => r,
        Err(e) => return store_error(&signed, e),
    };
    let body = html! {
        h1 { "Needs attention" }
        p.muted { "Every stale and needs_human task, the failed ones of the last 24 h, and every ended task \
            whose latest report contradicts its outcome, oldest first." }
        section.card {
            @if rows.is_empty() { p.empty { "Nothing waits for a person." } }
            @else {
                table #attention {
                    thead { tr { th { "task" } th { "status" } th { "waiting" } th { "item" } th { "why" } } }
                    tbody {
                        @for r in &rows {
                            tr {
                                td { (task_link(&r.task.task_id)) }
                                td { (badge(r.task.status.as_str())) }
                                td { (age(now, r.task.updated_at)) }
                                td.wrap { (intent_line(&r.task.intent)) }
                                td.wrap { (reason(r)) }
                            }
                        }
                    }
                }
                @if rows.len() as i64 == ATTENTION_LIMIT {
                    p.muted { "The oldest " (ATTENTION_LIMIT) " are shown." }
                }
            }
        }
    };
    signed.page("/console/attention", "Needs attention", None, body)
}
