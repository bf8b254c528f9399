//! `GET /console/items/{id}`: one item, its audit trail and carrier calls, and its close and
//! retrigger forms (`POST …/close`, `…/retrigger`), each with a reason.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;
use serde::Deserialize;
use web_console::ConsoleForm;
use web_console::layout::{self, Notice, action_form, badge, opt, ts, ts_opt};

use super::super::{AccountRules, Signed};
use super::{no_such_item, store_error};
use crate::domain::Action;
use crate::priority::canonical_id;
use crate::priority::item_status::ItemStatus;
use crate::priority::manual::{self, ManualError};
use crate::state::AppState;
use crate::store::StoreError;

/// `?done=…` after an action.
#[derive(Debug, Default, Deserialize)]
pub struct Done {
    done: Option<String>,
}

/// `GET /console/items/{id}`: the item, its audit trail, its carrier calls, the actions.
pub async fn item(
    State(st): State<AppState>,
    signed: Signed,
    Path(id): Path<String>,
    Query(done): Query<Done>,
) -> Response {
    let scope = match signed.allowed(Action::ReadItems) {
        Ok(scope) => scope,
        Err(forbidden) => return *forbidden,
    };
    let Some(id) = canonical_id(&id) else {
        return no_such_item(&signed);
    };
    let d = match st.store.item_get(&scope, id).await {
        Ok(Some(d)) => d,
        Ok(None) | Err(StoreError::NotFound) => return no_such_item(&signed),
        Err(e) => return store_error(&signed, e),
    };
    let i = &d.item;
    let notice = match done.done.as_deref() {
        Some("closed") => Some(Notice::Ok(
            "Closed; the reason is in the audit trail.".into(),
        )),
        Some("retriggered") => Some(Notice::Ok(
            "Retriggered: this is the new item; the failed one stays in the history.".into(),
        )),
        _ => None,
    };
    let csrf = signed.csrf().to_owned();
    let body = html! {
        h1 { "Item " (i.id) " " (badge(i.status.as_str())) }
        div.grid {
            section.card {
                h2 { "Item" }
                dl.kv {
                    dt { "card (ICCID)" } dd.mono { (i.iccid) }
                    dt { "asset" } dd { (i.asset_type) " " span.mono { (i.asset_id) } }
                    dt { "device" } dd.mono { (opt(i.device_no.as_deref())) }
                    dt { "shop" } dd { (i.shop_id) " " span.muted { "(" (i.agent_chain.join(" → ")) ")" } }
                    dt { "task type" } dd { (i.task_type) }
                    dt { "trigger" } dd { (i.trigger_type.as_str()) ", latest " (i.last_trigger_type.as_str())
                        " (" (i.trigger_count) " trigger(s))" }
                    dt { "sources" } dd.mono { (i.trigger_sources.join(", ")) }
                }
            }
            section.card {
                h2 { "Execution" }
                dl.kv {
                    dt { "attempts" } dd { (i.attempts) " of " (i.max_attempts) }
                    dt { "next run" } dd { (ts_opt(i.next_run_at)) }
                    dt { "claim ends" } dd { (ts_opt(i.claim_expires_at)) }
                    dt { "last run" } dd { (ts_opt(i.started_at)) " → " (ts_opt(i.finished_at))
                        @if let Some(ms) = i.duration_ms { " (" (ms) " ms)" } }
                    dt { "result" } dd { (opt(i.result.as_deref())) }
                    dt { "failure" } dd { (opt(i.failure_reason.as_deref())) }
                    dt { "enqueued" } dd { (ts(i.enqueued_at)) }
                    dt { "dequeued" } dd { (ts_opt(i.dequeued_at)) }
                    dt { "valid until" } dd { (ts(i.valid_until)) }
                    @if let Some(by) = &i.closed_by {
                        dt { "closed by" } dd { (by) ": " (opt(i.close_reason.as_deref())) }
                    }
                    @if let Some(from) = i.retriggered_from {
                        dt { "retriggers" } dd { a href={ "/console/items/" (from) } { "item " (from) } }
                    }
                }
            }
        }
        section.card #audit {
            h2 { "Audit trail (" (d.events.len()) ")" }
            table {
                thead { tr { th { "at" } th { "what" } th { "trigger" } th { "source" } th { "who" } th { "claim" } th { "reason" } th { "result" } } }
                tbody {
                    @for e in &d.events {
                        tr {
                            td { (ts(e.at)) }
                            td { (e.kind) }
                            td { (opt(e.trigger_type.as_deref())) }
                            td.mono { (opt(e.source.as_deref())) }
                            // The operator of an operator action, the instance of a system one.
                            td.mono { (opt(e.operator.as_deref().or(e.actor.as_deref()))) }
                            td.mono { (opt(e.claim_fingerprint.as_deref())) }
                            td.wrap { (opt(e.reason.as_deref())) }
                            td.wrap { (opt(e.result.as_deref())) }
                        }
                    }
                }
            }
        }
        section.card #calls {
            h2 { "Carrier calls (" (d.logs.len()) ")" }
            @if d.logs.is_empty() { p.empty { "No carrier call yet." } }
            @else {
                table {
                    thead { tr { th { "at" } th { "operation" } th { "outcome" } th.num { "latency" } th { "request" } th { "response" } } }
                    tbody {
                        @for l in &d.logs {
                            tr {
                                td { (ts(l.at)) }
                                td { (l.operation) }
                                td { (badge(&l.outcome)) }
                                td.num { (l.latency_ms) " ms" }
                                td.wrap.mono { (l.request_summary) }
                                td.wrap.mono { (l.response_summary) }
                            }
                        }
                    }
                }
            }
        }
        section.card #actions {
            h2 { "Actions" }
            @let may_close = i.status.is_active() && signed.may(Action::Close);
            @let may_retrigger = matches!(i.status, ItemStatus::Failed | ItemStatus::Expired)
                && signed.may(Action::Enqueue);
            @if !may_close && !may_retrigger {
                p.muted { "No action applies to this item for your account." }
            }
            div.actions {
                @if may_close {
                    (action_form(&format!("/console/items/{}/close", i.id), &csrf, "Close",
                        "Close this item? It leaves the priority queue for good.", html! {}, true))
                }
                @if may_retrigger {
                    (action_form(&format!("/console/items/{}/retrigger", i.id), &csrf, "Retrigger",
                        "Enqueue this card and task type again?", html! {}, false))
                }
            }
        }
    };
    signed.page(
        "/console/items",
        &format!("Item {}", i.id),
        notice.as_ref(),
        body,
    )
}

/// A close or retrigger form.
#[derive(Debug, Deserialize)]
pub struct ReasonForm {
    csrf: Option<String>,
    reason: Option<String>,
}

/// A refused close or retrigger of item `id`: a bad reason or a status that does not allow it is
/// shown with a link back to the item and the reason as typed, to copy.
fn manual_refused(signed: &Signed, id: i64, typed: Option<&str>, e: ManualError) -> Response {
    let refused = |status: StatusCode, message: &str| {
        layout::refused_form_page(
            &signed.chrome(),
            status,
            message,
            (
                &format!("/console/items/{id}"),
                &format!("Back to item {id}"),
            ),
            typed.unwrap_or(""),
        )
    };
    match e {
        ManualError::Store(StoreError::NotFound) => no_such_item(signed),
        ManualError::Forbidden => signed.forbidden(),
        ManualError::Invalid(m) => refused(StatusCode::UNPROCESSABLE_ENTITY, &m),
        ManualError::Store(StoreError::Conflict(m)) => {
            refused(StatusCode::CONFLICT, &format!("Refused: {m}."))
        }
        ManualError::Store(e) => store_error(signed, e),
    }
}

/// What a form on an item passes before it acts: its CSRF token, the account's permission for
/// `action`, and an item id written canonically (else the page it gets instead).
fn form_item_id(
    signed: &Signed,
    csrf: Option<&str>,
    action: Action,
    id: &str,
) -> Result<i64, Box<Response>> {
    if !signed.csrf_ok(csrf) {
        return Err(Box::new(signed.csrf_refused()));
    }
    signed.allowed(action)?;
    canonical_id(id).ok_or_else(|| Box::new(no_such_item(signed)))
}

/// `POST /console/items/{id}/close`.
pub async fn close(
    State(st): State<AppState>,
    signed: Signed,
    Path(id): Path<String>,
    ConsoleForm(f): ConsoleForm<ReasonForm>,
) -> Response {
    let id = match form_item_id(&signed, f.csrf.as_deref(), Action::Close, &id) {
        Ok(id) => id,
        Err(refused) => return *refused,
    };
    match manual::close(
        st.store.as_ref(),
        &signed.person,
        id,
        f.reason.as_deref(),
        st.clock.now(),
    )
    .await
    {
        Ok(()) => Redirect::to(&format!("/console/items/{id}?done=closed")).into_response(),
        Err(e) => manual_refused(&signed, id, f.reason.as_deref(), e),
    }
}

/// `POST /console/items/{id}/retrigger`.
pub async fn retrigger(
    State(st): State<AppState>,
    signed: Signed,
    Path(id): Path<String>,
    ConsoleForm(f): ConsoleForm<ReasonForm>,
) -> Response {
    let id = match form_item_id(&signed, f.csrf.as_deref(), Action::Enqueue, &id) {
        Ok(id) => id,
        Err(refused) => return *refused,
    };
    match manual::retrigger(
        st.store.as_ref(),
        &st.task_types,
        &signed.person,
        id,
        f.reason.as_deref(),
        st.clock.now(),
    )
    .await
    {
        Ok(item) => {
            st.hints.push_items(std::slice::from_ref(&item)).await;
            Redirect::to(&format!("/console/items/{}?done=retriggered", item.item_id))
                .into_response()
        }
        Err(e) => manual_refused(&signed, id, f.reason.as_deref(), e),
    }
}
