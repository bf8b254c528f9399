//! The card-polling console's pages and forms. Each asks the API's rule for its action
//! ([`AccountRules::allowed`](super::AccountRules::allowed): reading items needs what `GET /api/priority-items` needs) and reads in the
//! scope it answers; a missing item and an out-of-scope item get the same page.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;
use web_console::ConsoleForm;
use web_console::layout::{self, Notice, action_form, badge, capped_count, enc, opt, ts, ts_opt};

use super::{AccountRules, Signed};
use crate::domain::Action;
use crate::http::extract::canonical_id;
use crate::priority::item_status::ItemStatus;
use crate::priority::manual::{self, ManualError};
use crate::state::AppState;
use crate::store::{COUNT_CAP, ExceptionCondition, ItemFilter, ItemView, StoreError};

/// Items per page.
pub const PAGE: i64 = 50;

/// `GET /console`: queue depths per task type and lane, and the last cycle's decisions.
pub async fn overview(State(st): State<AppState>, signed: Signed) -> Response {
    // The queues of every shop are for the accounts `/health` and `/metrics` show them to.
    if !signed.may(Action::ReadQueues) {
        let reads = signed.may(Action::ReadItems);
        let body = html! {
            h1 { "Overview" }
            section.card {
                p { "Queue depths and scheduling decisions are shown to platform operators." }
                @if reads {
                    p { "Your items: " a href="/console/items" { "all items" } " · " a href="/console/exceptions" { "exceptions" } }
                } @else {
                    p { "Your account may not read priority items (it lacks the manual trigger permission)." }
                }
            }
        };
        return signed.page("/console", "Overview", None, body);
    }
    let mut depths = Vec::new();
    for d in st.scheduler.pool().depths() {
        let hint = st
            .hints
            .depth(crate::hints::ChannelLane::Hint, &d.task_type)
            .await
            .ok();
        let manual = st
            .hints
            .depth(crate::hints::ChannelLane::Manual, &d.task_type)
            .await
            .ok();
        depths.push((d, hint, manual));
    }
    let cycle = st.scheduler.last_cycle();
    let body = html! {
        h1 { "Overview" }
        section.card #depths {
            h2 { "Queue depths (" (st.hints.backend()) " hint channel)" }
            table {
                thead { tr {
                    th { "task type" } th.num { "hint lane" } th.num { "manual lane" }
                    th.num { "priority queued" } th.num { "manual queued" } th.num { "ordinary queued" }
                    th.num { "running" } th.num { "executed (priority / manual / ordinary)" }
                } }
                tbody {
                    @for (d, hint, manual) in &depths {
                        tr {
                            td { (d.task_type) }
                            td.num { (opt(*hint)) }
                            td.num { (opt(*manual)) }
                            td.num { (d.priority) }
                            td.num { (d.manual) }
                            td.num { (d.ordinary) }
                            td.num { (d.in_flight) }
                            td.num { (d.executed_priority) " / " (d.executed_manual) " / " (d.executed_ordinary) }
                        }
                    }
                }
            }
        }
        section.card #cycle {
            h2 { "Last scheduling cycle" }
            @match &cycle {
                None => p.empty { "No cycle has run yet." },
                Some(c) => {
                    p.muted { "At " (ts_opt(c.at)) ", " (c.duration_us / 1000) " ms." }
                    table {
                        thead { tr {
                            th { "task type" } th.num { "hints taken" } th.num { "hints queued" }
                            th.num { "manual taken" } th.num { "due items recovered" }
                            th.num { "ordinary taken" } th.num { "ordinary skipped (back-pressure)" }
                        } }
                        tbody {
                            @for d in &depths {
                                @let t = &d.0.task_type;
                                tr {
                                    td { (t) }
                                    td.num { (c.hints_taken.get(t).copied().unwrap_or(0)) }
                                    td.num { (c.hints_queued.get(t).copied().unwrap_or(0)) }
                                    td.num { (c.manual_taken.get(t).copied().unwrap_or(0)) }
                                    td.num { (c.due_items_recovered.get(t).copied().unwrap_or(0)) }
                                    td.num { (c.ordinary_taken.get(t).copied().unwrap_or(0)) }
                                    td.num { (c.ordinary_skipped_for_backpressure.get(t).copied().unwrap_or(0)) }
                                }
                            }
                        }
                    }
                    @if !c.skipped_shards.is_empty() {
                        p { "Shards skipped: " span.mono { (c.skipped_shards.join(", ")) } }
                    }
                    @for e in &c.errors { div.notice.err { (e) } }
                }
            }
        }
    };
    signed.page("/console", "Overview", None, body)
}

/// Filters of the item list.
#[derive(Debug, Default, Deserialize)]
pub struct ItemQuery {
    status: Option<String>,
    task_type: Option<String>,
    iccid: Option<String>,
    shop: Option<String>,
    /// Keyset cursor: items older than this id (the next page down).
    before: Option<String>,
    /// Keyset cursor: items newer than this id (`0`: the oldest page).
    after: Option<String>,
    done: Option<String>,
}

/// A page position: `?before=<id>` (older than), `?after=<id>` (newer than; `0` is the oldest
/// page), or neither (the newest page). `Err` when a cursor is not a non-negative integer.
fn cursor_of(q: &ItemQuery) -> Result<(Option<i64>, Option<i64>), ()> {
    let parse = |s: &Option<String>| -> Result<Option<i64>, ()> {
        match s.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
            None => Ok(None),
            Some(s) => s
                .parse::<i64>()
                .ok()
                .filter(|n| *n >= 0)
                .map(Some)
                .ok_or(()),
        }
    };
    let before = parse(&q.before)?;
    let after = parse(&q.after)?;
    Ok(if before.is_some() {
        (before, None)
    } else {
        (None, after)
    })
}

fn nonempty(s: &Option<String>) -> Option<String> {
    s.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.chars().take(64).collect())
}

/// `GET /console/items`.
pub async fn items(
    State(st): State<AppState>,
    signed: Signed,
    Query(q): Query<ItemQuery>,
) -> Response {
    list(st, signed, q, false).await
}

/// `GET /console/exceptions`: failed, expired, at the attempt limit, or with a failure reason.
pub async fn exceptions(
    State(st): State<AppState>,
    signed: Signed,
    Query(q): Query<ItemQuery>,
) -> Response {
    list(st, signed, q, true).await
}

async fn list(st: AppState, signed: Signed, q: ItemQuery, exceptions: bool) -> Response {
    let scope = match signed.allowed(Action::ReadItems) {
        Ok(scope) => scope,
        Err(forbidden) => return *forbidden,
    };
    let status = match nonempty(&q.status).map(|s| ItemStatus::parse(&s)) {
        Some(None) => return signed.error(StatusCode::BAD_REQUEST, "Unknown status."),
        Some(s) => s,
        None => None,
    };
    let task_type = nonempty(&q.task_type);
    if task_type
        .as_deref()
        .is_some_and(|t| st.task_types.get(t).is_none())
    {
        // As the API's list (D-item-ids-and-list-filters): never an empty page for a typo.
        return signed.error(StatusCode::BAD_REQUEST, "Unknown task type.");
    }
    let iccid = nonempty(&q.iccid);
    let shop = nonempty(&q.shop);
    let Ok((before, after)) = cursor_of(&q) else {
        return signed.error(StatusCode::BAD_REQUEST, "Malformed page position.");
    };
    // A shop filter narrows the account's scope to that shop's tree, in SQL, for every role: an
    // agent filtering to one of its descendant shops sees exactly that shop's items, and a shop
    // outside its tree leaves nothing, the same as a shop that does not exist.
    let filter = ItemFilter {
        status,
        task_type: task_type.clone(),
        iccid: iccid.clone(),
        shop: shop.clone(),
        exceptions: if exceptions {
            vec![
                ExceptionCondition::Failed,
                ExceptionCondition::Expired,
                ExceptionCondition::AttemptsAtMax,
                ExceptionCondition::HasFailureReason,
            ]
        } else {
            vec![]
        },
        before_id: before,
        after_id: after,
        // One more than shown: whether a page lies beyond, in the walk's direction.
        limit: PAGE + 1,
        ..ItemFilter::default()
    };
    let scope = &scope;
    let (rows, total) = match tokio::try_join!(
        st.store.item_list(scope, &filter),
        st.store.item_count(scope, &filter)
    ) {
        Ok(r) => r,
        Err(e) => return store_error(&signed, e),
    };
    let mut rows = rows;
    let more = rows.len() as i64 > PAGE;
    if more {
        if after.is_some() {
            // Walked upwards from the cursor: the extra row is the newest one.
            rows.remove(0);
        } else {
            rows.pop();
        }
    }
    // The side the read did not walk: one probe of at most one row from the page's edge.
    let probe = |before_id: Option<i64>, after_id: Option<i64>| {
        let f = ItemFilter {
            before_id,
            after_id,
            limit: 1,
            ..filter.clone()
        };
        let st = st.clone();
        async move { st.store.item_list(scope, &f).await.map(|r| !r.is_empty()) }
    };
    let first = rows.first().map(|i| i.id);
    let last = rows.last().map(|i| i.id);
    let (newer, older) = match (before, after) {
        (None, None) => (false, more),
        (Some(b), _) => match probe(None, Some(first.unwrap_or(b.saturating_sub(1)))).await {
            Ok(n) => (n, more),
            Err(e) => return store_error(&signed, e),
        },
        (None, Some(a)) => match probe(Some(last.unwrap_or(a.saturating_add(1))), None).await {
            Ok(o) => (more, o),
            Err(e) => return store_error(&signed, e),
        },
    };
    let path = if exceptions {
        "/console/exceptions"
    } else {
        "/console/items"
    };
    let base = format!(
        "{path}?status={}&task_type={}&iccid={}&shop={}",
        status.map(|s| s.as_str()).unwrap_or(""),
        enc(task_type.as_deref().unwrap_or("")),
        enc(iccid.as_deref().unwrap_or("")),
        enc(shop.as_deref().unwrap_or("")),
    );
    let title = if exceptions {
        "Exceptions and retries"
    } else {
        "Items"
    };
    let notice = (q.done.as_deref() == Some("closed"))
        .then(|| Notice::Ok("Closed: the reason is in the item's audit trail.".into()));
    let body = html! {
        h1 { (title) }
        @if exceptions {
            p.muted { "Failed or expired items, items at the attempt limit, and items with a failure reason; newest first." }
        }
        form.filters method="get" action=(path) {
            label { "status"
                select name="status" {
                    option value="" { "any" }
                    @for s in ItemStatus::ALL {
                        option value=(s.as_str()) selected[status == Some(s)] { (s.as_str()) }
                    }
                }
            }
            label { "task type"
                select name="task_type" {
                    option value="" { "any" }
                    @for t in st.task_types.names() {
                        option value=(t) selected[task_type.as_deref() == Some(t.as_str())] { (t) }
                    }
                }
            }
            label { "ICCID" input name="iccid" value=(iccid.as_deref().unwrap_or("")) size="22"; }
            label { "shop (and sub-shops)" input name="shop" value=(shop.as_deref().unwrap_or("")) size="12"; }
            button.secondary type="submit" { "Filter" }
        }
        section.card {
            (item_table(&rows))
            (item_pager(&base, rows.len(), total, first.filter(|_| newer), last.filter(|_| older)))
        }
    };
    signed.page(path, title, notice.as_ref(), body)
}

/// Newest/newer/older/oldest links of an item list (newest first, keyset on the id) and its
/// count, capped at [`COUNT_CAP`] ("10,000+"). `newer`/`older`: the ids of the page's first and
/// last rows when items lie beyond them.
fn item_pager(
    base: &str,
    shown: usize,
    total: i64,
    newer: Option<i64>,
    older: Option<i64>,
) -> Markup {
    html! {
        // An empty list says so in its table; its pager has nothing to add.
        @if total > 0 || newer.is_some() || older.is_some() { div.pager {
            span #count { (shown) " shown of " (capped_count(total, COUNT_CAP)) }
            @if let Some(id) = newer {
                a href=(base) #newest { "« newest" }
                a href={ (base) "&after=" (id) } #newer { "← newer" }
            }
            @if let Some(id) = older {
                a href={ (base) "&before=" (id) } #older { "older →" }
                a href={ (base) "&after=0" } #oldest { "oldest »" }
            }
        } }
    }
}

fn item_table(rows: &[ItemView]) -> Markup {
    html! {
        @if rows.is_empty() { p.empty { "No item matches." } }
        @else {
            table #items {
                thead { tr {
                    th.num { "id" } th { "status" } th { "task type" } th { "ICCID" } th { "shop" }
                    th { "trigger" } th.num { "attempts" } th { "next run" } th { "enqueued" } th { "failure" }
                } }
                tbody {
                    @for i in rows {
                        tr {
                            td.num { a href={ "/console/items/" (i.id) } { (i.id) } }
                            td { (badge(i.status.as_str())) }
                            td { (i.task_type) }
                            td.mono { (i.iccid) }
                            td { (i.shop_id) }
                            td { (i.last_trigger_type.as_str()) }
                            td.num { (i.attempts) "/" (i.max_attempts) }
                            td { (ts_opt(i.next_run_at)) }
                            td { (ts(i.enqueued_at)) }
                            td.wrap { (opt(i.failure_reason.as_deref())) }
                        }
                    }
                }
            }
        }
    }
}

fn store_error(signed: &Signed, e: StoreError) -> Response {
    tracing::error!(error = %e, "console read failed");
    signed.error(
        StatusCode::SERVICE_UNAVAILABLE,
        "The database could not be read; try again.",
    )
}

/// The one answer for a missing item and an item outside the account's scope.
fn no_such_item(signed: &Signed) -> Response {
    signed.error(StatusCode::NOT_FOUND, "No such item.")
}

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

/// `POST /console/items/{id}/close`.
pub async fn close(
    State(st): State<AppState>,
    signed: Signed,
    Path(id): Path<String>,
    ConsoleForm(f): ConsoleForm<ReasonForm>,
) -> Response {
    if !signed.csrf_ok(f.csrf.as_deref()) {
        return signed.csrf_refused();
    }
    if let Err(forbidden) = signed.allowed(Action::Close) {
        return *forbidden;
    }
    let Some(id) = canonical_id(&id) else {
        return no_such_item(&signed);
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
    if !signed.csrf_ok(f.csrf.as_deref()) {
        return signed.csrf_refused();
    }
    if let Err(forbidden) = signed.allowed(Action::Enqueue) {
        return *forbidden;
    }
    let Some(id) = canonical_id(&id) else {
        return no_such_item(&signed);
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
