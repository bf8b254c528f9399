//! `GET /console/tasks/{id}`: one task — intent, lease and its history, reports with evidence,
//! the known order state, the gathered order list, the operator-action audit, and the actions
//! its status allows.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use rakuten_types::alert::{OperatorActionKind, OperatorActionView};
use rakuten_types::order::{ReportView, TaskSummary};
use rakuten_types::{Outcome, TaskId, TaskStatus};
use web_console::layout::{action_form, age, badge, enc, opt, shown, ts, ts_opt};

use super::attention::reason;
use super::query::query_result;
use super::{Done, store_error};
use crate::console::Signed;
use crate::state::AppState;
use crate::store::AttentionTask;
use crate::store::operator::LeaseGrantRecord;

/// `GET /console/tasks/{id}`: everything about one task, and what can be done.
pub async fn task(
    State(st): State<AppState>,
    signed: Signed,
    Path(task_id): Path<String>,
    q: Query<Done>,
) -> Response {
    let Ok(task_id) = TaskId::parse(&task_id) else {
        return signed.error(StatusCode::NOT_FOUND, "No such task.");
    };
    let detail = match st.store.task_get(&task_id).await {
        Ok(Some(d)) => d,
        Ok(None) => return signed.error(StatusCode::NOT_FOUND, "No such task."),
        Err(e) => return store_error(&signed, e),
    };
    let audit = match st.ops.task_operator_actions(&task_id).await {
        Ok(a) => a,
        Err(e) => return store_error(&signed, e),
    };
    let grants = match st.ops.task_lease_grants(&task_id, LEASE_GRANTS_SHOWN).await {
        Ok(g) => g,
        Err(e) => return store_error(&signed, e),
    };
    let mut evidence = Vec::new();
    match st.ops.task_evidence_queries(&task_id).await {
        Ok(ids) => {
            // The latest gathered order list is the one to read; older ones stay linked.
            for id in ids.iter().rev().take(1) {
                match st.queries.query_get(id).await {
                    Ok(Some(q)) => evidence.push(q),
                    Ok(None) => {}
                    Err(e) => return store_error(&signed, e),
                }
            }
        }
        Err(e) => return store_error(&signed, e),
    }
    let now = st.clock.now();
    let summary = detail.summary();
    let t = &summary;
    // Shown field by field from a parsed copy (also for a stored intent the checks would refuse);
    // the text itself is shown as submitted (D-intent-verbatim-text).
    let intent = detail.intent.value().unwrap_or_default();
    let known_order = detail
        .history
        .iter()
        .rev()
        .find_map(|r| r.site_order_id.as_deref());
    // Every worker the grants, the reports and the current lease name, each once, oldest first.
    let mut owners: Vec<&str> = Vec::new();
    for w in grants
        .iter()
        .rev()
        .map(|g| g.worker_id.as_str())
        .chain(detail.history.iter().filter_map(|r| r.worker_id.as_deref()))
        .chain(t.lease_owner.as_deref())
    {
        if !owners.contains(&w) {
            owners.push(w);
        }
    }
    let id_enc = enc(task_id.as_str());
    let csrf = signed.csrf().to_owned();
    let body = html! {
        h1 { "Task " span.mono { (task_id.as_str()) } " " (badge(t.status.as_str())) }
        @if let Some(r) = attention_reason(t, &detail.history, &audit) {
            div.notice.err #why { (r) }
        }
        div.grid {
            section.card #intent {
                h2 { "What it wanted" }
                dl.kv {
                    dt { "item" } dd.mono { (shown(intent["item_url"].as_str().unwrap_or("?"))) }
                    dt { "quantity" } dd { (intent["quantity"].as_i64().unwrap_or(1)) }
                    dt { "variant" } dd { (opt(intent["variant_id"].as_str())) }
                    dt { "amount limit" } dd { @match intent["max_total_yen"].as_i64() {
                        Some(y) => { "¥" (y) }, None => span.muted { "worker default" } } }
                    dt { "site" } dd { (t.site) }
                    dt { "created" } dd { (ts(t.created_at)) " (" (age(now, t.created_at)) " ago)" }
                    dt { "last change" } dd { (ts(t.updated_at)) }
                }
                details { summary { "Intent as submitted (JSON)" }
                    pre { (rakuten_types::text::json_printable(detail.intent.as_str())) } }
            }
            section.card #lease {
                h2 { "Lease" }
                dl.kv {
                    dt { "grants" } dd { (t.lease_count) }
                    dt { "holder" } dd.mono { (opt(t.lease_owner.as_deref())) }
                    dt { "lease ends" } dd { (ts_opt(t.lease_expires_at))
                        @if let Some(e) = t.lease_expires_at {
                            @if e.seconds_since(now) < 0.0 { " (" (age(now, e)) " ago)" }
                        } }
                    dt { "workers seen" } dd.mono { @if owners.is_empty() { "—" } @else { (owners.join(", ")) } }
                }
            }
            section.card #known {
                h2 { "Known state" }
                dl.kv {
                    dt { "status" } dd { (badge(t.status.as_str())) }
                    dt { "outcome" } dd { (opt(t.outcome.map(|o| o.as_str()))) }
                    dt { "latest order state" } dd { (opt(t.latest_state.map(|s| s.as_str()))) }
                    dt { "site order number" } dd.mono { (opt(known_order)) }
                }
            }
        }
        section.card #reports {
            h2 { "Reports (" (detail.history.len()) ")" }
            (reports_table(&detail.history))
        }
        section.card #lease-history {
            h2 { "Lease history (" (grants.len()) " of " (t.lease_count) " grants)" }
            (grants_table(&grants, t.lease_count))
        }
        section.card #gathered {
            h2 { "The site's order list for this task's window" }
            @if evidence.is_empty() {
                p.empty { "None gathered: the gateway submits an order_list query when the task goes stale." }
            }
            @for q in &evidence {
                p { "Query " a.mono href={ "/console/queries/" (enc(q.query_id.as_str())) } { (q.query_id.as_str()) }
                    " " (badge(q.status.as_str())) }
                (query_result(q))
            }
        }
        section.card #audit {
            h2 { "Operator actions (" (audit.len()) ")" }
            (audit_table(&audit))
        }
        section.card #actions {
            h2 { "Actions" }
            (actions(t, known_order, &id_enc, &csrf))
        }
    };
    signed.page(
        "/console/tasks",
        &format!("Task {}", task_id.as_str()),
        q.notice().as_ref(),
        body,
    )
}

fn attention_reason(
    t: &TaskSummary,
    history: &[ReportView],
    audit: &[OperatorActionView],
) -> Option<String> {
    matches!(
        t.status,
        TaskStatus::Stale | TaskStatus::NeedsHuman | TaskStatus::Failed
    )
    .then(|| {
        let last = history.last();
        let ended_by = audit
            .iter()
            .rev()
            .find(|a| {
                matches!(
                    a.action,
                    OperatorActionKind::Resolve | OperatorActionKind::Cancel
                )
            })
            .map(|a| crate::store::ended_by(a.action, &a.actor, &a.reason));
        reason(&AttentionTask {
            task: t.clone(),
            last_detail: last.and_then(|r| r.detail.clone()),
            ended_by,
            last_error_code: last.and_then(|r| r.error_code),
            last_site_order_id: history.iter().rev().find_map(|r| r.site_order_id.clone()),
        })
    })
}

/// Most grants the task page lists, newest first.
const LEASE_GRANTS_SHOWN: i64 = 200;

/// The lease history: one row per grant, newest first (D-lease-grant-history).
fn grants_table(grants: &[LeaseGrantRecord], lease_count: i64) -> Markup {
    let oldest_shown = grants.last().map_or(lease_count + 1, |g| g.grant_no);
    let unrecorded = oldest_shown > 1 && grants.len() < LEASE_GRANTS_SHOWN as usize;
    html! {
        @if lease_count == 0 { p.empty { "Never leased." } }
        @else if grants.is_empty() {
            p.empty #no-grants { "No recorded grants: this task was leased before the gateway kept a \
                lease history; the counts above are all there is." }
        } @else {
            table {
                thead { tr {
                    th.num { "grant" } th { "worker" } th { "via" } th { "granted" }
                    th { "expires / ended" } th.num { "renewals" } th { "how it ended" }
                    th { "token" }
                } }
                tbody #grant-rows {
                    @for g in grants {
                        tr {
                            td.num { (g.grant_no) }
                            td.mono { (g.worker_id) }
                            td { (g.via.as_str()) }
                            td { (ts(g.granted_at)) }
                            td {
                                @match g.ended_at {
                                    Some(e) => { "ended " (ts(e)) br; span.muted { "lease to " (ts(g.expires_at)) } },
                                    None => { "expires " (ts(g.expires_at)) },
                                }
                            }
                            td.num { (g.renewals)
                                @if let Some(r) = g.last_renewed_at { br; span.muted { "last " (ts(r)) } } }
                            td { @match g.ended_how {
                                Some(h) => { (h.as_str()) },
                                None => { span.badge.info { "open" } },
                            } }
                            td.mono title="first 8 hex digits of the token's SHA-256" { (g.token_fp) }
                        }
                    }
                }
            }
            @if unrecorded {
                p.muted { "Grants before no. " (oldest_shown) " were made before the gateway kept a \
                    lease history." }
            }
        }
    }
}

fn reports_table(history: &[ReportView]) -> Markup {
    html! {
        @if history.is_empty() { p.empty { "No report yet." } }
        @else {
            table {
                thead { tr {
                    th { "reported" } th { "state" } th { "worker" } th { "site order" }
                    th.num { "payable" } th { "code" } th { "detail" } th { "evidence (on the worker machine)" }
                } }
                tbody {
                    @for r in history {
                        tr {
                            td { (ts(r.reported_at)) }
                            td { (badge(r.state.as_str())) }
                            td.mono { (opt(r.worker_id.as_deref())) }
                            td.mono { (opt(r.site_order_id.as_deref())) }
                            td.num { @match r.payable_yen { Some(y) => { "¥" (y) }, None => span.muted { "—" } } }
                            td { (opt(r.error_code)) }
                            td.wrap { (opt(r.detail.as_deref())) }
                            td.wrap {
                                @match &r.evidence_ref {
                                    Some(e) => {
                                        code { (e) }
                                        br;
                                        span.muted { "under RAKUTEN_EVIDENCE_DIR of worker "
                                            (r.worker_id.as_deref().unwrap_or("?")) }
                                    },
                                    None => span.muted { "—" },
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The task page's forms. The resolve form starts from the worker's latest report: its site
/// order number, and its order state when the order was submitted (a state of the cart is not
/// what the person will see on the site, so that one starts blank); the outcome stays the
/// person's choice (D-stale-words-follow-the-latest-report).
///
/// An ended task whose latest report contradicts its verdict (a report that came after the end,
/// D-late-report-contradiction-alert) gets the same form as a correction: the store takes a new
/// verdict that fits the state, and the `task_state_contradicts_outcome` alert clears.
fn actions(t: &TaskSummary, known_order: Option<&str>, id_enc: &str, csrf: &str) -> Markup {
    let verdict = match t.status {
        TaskStatus::Succeeded => Some(Outcome::Succeeded),
        TaskStatus::Failed => Some(Outcome::Failed),
        _ => None,
    };
    let contradicted = verdict.is_some_and(|v| v.check_fits_state(t.latest_state).is_err());
    let resolvable = contradicted || matches!(t.status, TaskStatus::Stale | TaskStatus::NeedsHuman);
    if !resolvable && t.status != TaskStatus::Queued {
        return html! { p.muted { "No action applies to a " (t.status.as_str()) " task." } };
    }
    let preset_state = t.latest_state.filter(|s| s.is_submitted());
    let (title, confirm) = if contradicted {
        (
            "Correct the verdict",
            "Replace this task's outcome with the one you chose? Only do this when the site shows \
             it.",
        )
    } else {
        (
            "Resolve",
            "Resolve this task with the outcome you chose? This ends it for good.",
        )
    };
    html! {
        div.actions {
            @if resolvable {
                (action_form(
                    &format!("/console/tasks/{id_enc}/resolve"),
                    csrf,
                    title,
                    confirm,
                    html! {
                        @if contradicted {
                            p #contradiction { "The worker's latest report ("
                                (opt(t.latest_state.map(|s| s.as_str())))
                                ") contradicts this task's outcome ("
                                (t.status.as_str())
                                "): set the outcome and state you see on the site." }
                        }
                        div.row {
                            label { "outcome"
                                select name="outcome" required {
                                    option value="" { "choose…" }
                                    option value="succeeded" { "succeeded (the order exists)" }
                                    option value="failed" { "failed (no order)" }
                                }
                            }
                            label { "site order number" input name="site_order_id" maxlength="128" size="28"
                                value=[known_order]; }
                            label { "order state seen"
                                select name="state" {
                                    option value="" selected[preset_state.is_none()] { "—" }
                                    @for s in rakuten_types::OrderState::ALL {
                                        option value=(s.as_str()) selected[preset_state == Some(s)] { (s.as_str()) }
                                    }
                                }
                            }
                        }
                        @if known_order.is_some() || preset_state.is_some() {
                            p.muted #resolve-preset { "Filled in from the worker's latest report"
                                @if let Some(s) = t.latest_state { " (" (s.as_str())
                                    @if let Some(n) = known_order { ", site order " (n) } ")" }
                                ": change them to what you see on the site." }
                        }
                    },
                    false,
                ))
            }
            @if t.status == TaskStatus::Stale {
                (action_form(
                    &format!("/console/tasks/{id_enc}/reclaim"),
                    csrf,
                    "Reclaim to a worker",
                    "Hand this task to the named worker again? Only do this when the site's order list shows no order for it.",
                    html! { label { "worker id" input name="worker_id" required maxlength="128"
                        value=(t.lease_owner.as_deref().unwrap_or("")); } },
                    false,
                ))
            }
            @if t.status == TaskStatus::Queued {
                (action_form(
                    &format!("/console/tasks/{id_enc}/cancel"),
                    csrf,
                    "Cancel",
                    "Cancel this queued task? It ends as failed and is never handed out.",
                    html! {},
                    true,
                ))
            }
        }
    }
}

fn audit_table(actions: &[OperatorActionView]) -> Markup {
    html! {
        @if actions.is_empty() { p.empty { "No operator action yet." } }
        @else {
            table #audit-rows {
                thead { tr { th { "when" } th { "who" } th { "action" } th { "status" } th { "why" } th { "details" } } }
                tbody {
                    @for a in actions {
                        tr {
                            td { (ts(a.at)) }
                            td { strong { (a.actor) } }
                            td { (a.action.as_str()) @if let Some(w) = &a.worker_id { " → " span.mono { (w) } } }
                            td { (opt(a.from_status.map(|s| s.as_str()))) " → " (opt(a.to_status.map(|s| s.as_str()))) }
                            td.wrap { (a.reason) }
                            td.wrap.mono { @if !a.detail.is_null() { (a.detail.to_string()) } }
                        }
                    }
                }
            }
        }
    }
}
