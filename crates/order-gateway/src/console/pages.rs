//! The console's read pages. Each reads a bounded amount through the store (indexed counts,
//! one page of rows) so it stays fast with a large table (docs/BENCHMARKS.md).

use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use rakuten_types::alert::{AlertView, OperatorActionKind, OperatorActionView};
use rakuten_types::intent::IntentSummary;
use rakuten_types::order::{ReportView, TaskSummary};
use rakuten_types::query::{OrderListResult, QueryKind, QueryStatus, QueryView};
use rakuten_types::{QueryId, TaskId, TaskStatus, Timestamp};
use serde::Deserialize;
use web_console::layout::{
    Notice, action_form, age, badge, capped_count, csrf_input, enc, opt, raw_json, seek_pager,
    shown, ts, ts_opt,
};

use super::Signed;
use crate::http::AppState;
use crate::store::operator::{LeaseGrantRecord, stale_advice};
use crate::store::{AttentionTask, COUNT_CAP, Seek, SeekCursor, SeekPage};

/// Rows per list page.
pub const PAGE: i64 = 50;
/// Most rows of "needs attention".
pub const ATTENTION_LIMIT: i64 = 200;
/// How far back failed tasks count as needing attention.
pub const FAILED_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// `?done=…` after an action: which notice to show.
#[derive(Debug, Default, Deserialize)]
pub struct Done {
    done: Option<String>,
}

impl Done {
    fn notice(&self) -> Option<Notice> {
        let text = match self.done.as_deref()? {
            "reclaimed" => "Reclaimed: the worker's next poll receives the lease.",
            "resolved" => "Resolved: the task is terminal and the action is in its audit.",
            "cancelled" => "Cancelled: the task is failed and the action is in its audit.",
            "retired" => "Retired: the worker is hidden until it polls again.",
            _ => return None,
        };
        Some(Notice::Ok(text.to_owned()))
    }
}

fn store_error(signed: &Signed, e: crate::store::StoreError) -> Response {
    tracing::error!(error = %e, "console read failed");
    signed.error(
        StatusCode::SERVICE_UNAVAILABLE,
        "The database could not be read; try again.",
    )
}

/// `GET /console`: counts by status, oldest queued age, workers.
pub async fn overview(State(st): State<AppState>, signed: Signed, q: Query<Done>) -> Response {
    let now = st.clock.now();
    let counts = match st.store.task_status_counts().await {
        Ok(c) => c,
        Err(e) => return store_error(&signed, e),
    };
    let active = match st.store.task_active_leases().await {
        Ok(a) => a,
        Err(e) => return store_error(&signed, e),
    };
    let workers = match st.ops.worker_list().await {
        Ok(w) => w,
        Err(e) => return store_error(&signed, e),
    };
    let mut alerts = match st.ops.alert_seek(true, None, Seek::Newest, PAGE).await {
        Ok(a) => a,
        Err(e) => return store_error(&signed, e),
    };
    // Newest first on the page.
    alerts.items.reverse();
    let csrf = signed.0.csrf.clone();
    let offline_after = st.settings.worker_offline_alert();
    let body = html! {
        h1 { "Overview" }
        div.counts {
            @for (status, n) in &counts.by_status {
                @let alarm = *n > 0 && matches!(status, TaskStatus::Stale | TaskStatus::NeedsHuman);
                a.count.alarm[alarm] href={ "/console/tasks?status=" (status.as_str()) } {
                    div.n { (capped_count(*n, COUNT_CAP)) }
                    div.l { (status.as_str()) }
                }
            }
            div.count {
                div.n { @match counts.oldest_queued { Some(t) => (age(now, t)), None => "—" } }
                div.l { "oldest queued" }
            }
        }
        @let stuck = counts.by_status.iter()
            .filter(|(s, _)| matches!(s, TaskStatus::Stale | TaskStatus::NeedsHuman))
            .map(|(_, n)| n).sum::<i64>();
        @if stuck > 0 {
            div.notice.err {
                (capped_count(stuck, COUNT_CAP)) " task(s) wait for a person. "
                a href="/console/attention" { "Open “Needs attention” →" }
            }
        }
        section.card #open-alerts {
            h2 { "Open alerts (" (capped_count(alerts.total, COUNT_CAP)) ")" }
            (alert_table(&alerts.items, now))
            @if alerts.total > alerts.items.len() as i64 { p { a href="/console/alerts" { "All open alerts →" } } }
        }
        div.stack {
            section.card #workers {
                h2 { "Workers" }
                @if workers.is_empty() { p.empty { "No worker has polled yet." } }
                @else {
                    table {
                        thead { tr { th { "worker" } th { "last seen" } th { "state" } th { "holds" } th { "retire (hidden until it polls again)" } } }
                        tbody {
                            @for w in &workers {
                                @let silent = now.seconds_since(w.last_seen_at) > offline_after.as_secs_f64();
                                tr {
                                    td.mono { (w.worker_id) }
                                    td { (age(now, w.last_seen_at)) " ago" }
                                    td { @if w.retired_at.is_some() { (badge("retired")) }
                                         @else if silent { (badge("offline")) } @else { (badge("ok")) } }
                                    td { @match &w.active_task { Some(t) => (task_link(t)), None => span.muted { "—" } } }
                                    td {
                                        @if w.retired_at.is_none() {
                                            form.inline method="post" action={ "/console/workers/" (enc(&w.worker_id)) "/retire" }
                                                data-confirm={ "Retire worker " (w.worker_id) "?" } {
                                                (csrf_input(&csrf))
                                                input name="reason" required maxlength="1000" placeholder="reason";
                                                button.secondary type="submit" { "Retire" }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            section.card {
                h2 { "Active leases" }
                @if active.is_empty() { p.empty { "No task is leased." } }
                @else {
                    table {
                        thead { tr { th { "task" } th { "holder" } th { "lease ends" } } }
                        tbody {
                            @for t in &active {
                                tr {
                                    td { (task_link(&t.task_id)) }
                                    td.mono { (opt(t.lease_owner.as_deref())) }
                                    td { (ts_opt(t.lease_expires_at)) }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    signed.page("/console", "Overview", q.notice().as_ref(), body)
}

fn task_link(id: &TaskId) -> Markup {
    html! { a.mono href={ "/console/tasks/" (enc(id.as_str())) } { (id.as_str()) } }
}

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
        p.muted { "Every stale and needs_human task, and the failed ones of the last 24 h, oldest first." }
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

/// `item × quantity (≤ limit)` from an intent.
/// A list line's intent: its summary (D-list-pages-bounded), `?` when the stored intent cannot be
/// read.
fn intent_line(intent: &Option<IntentSummary>) -> Markup {
    let Some(intent) = intent else {
        return html! { span.muted { "?" } };
    };
    let url = shown(&intent.item_url);
    html! {
        span.mono { (short_url(&url)) } " × " (intent.quantity)
        @if let Some(max) = intent.max_total_yen { " (≤ ¥" (max) ")" }
    }
}

fn short_url(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    if rest.len() > 60 {
        rest.get(..60).unwrap_or(rest)
    } else {
        rest
    }
}

/// The page position of a list's `?after=` / `?before=` (`before=newest`: the last page); `None`
/// when a cursor is malformed.
fn seek_of(after: Option<&str>, before: Option<&str>) -> Option<Seek> {
    let after = after.filter(|s| !s.is_empty());
    let before = before.filter(|s| !s.is_empty());
    Some(match (after, before) {
        (_, Some("newest")) => Seek::Newest,
        (_, Some(c)) => Seek::Before(SeekCursor::parse(c)?),
        (Some(c), None) => Seek::After(SeekCursor::parse(c)?),
        (None, None) => Seek::Oldest,
    })
}

/// The Older/Newer links of a keyset page.
fn pager_of<T>(base: &str, page: &SeekPage<T>) -> Markup {
    let (first, last) = page
        .edges
        .as_ref()
        .map(|(f, l)| (f.encode(), l.encode()))
        .unzip();
    seek_pager(
        base,
        page.items.len(),
        page.total,
        COUNT_CAP,
        first.as_deref().filter(|_| page.older),
        last.as_deref().filter(|_| page.newer),
    )
}

/// Filters of the task list.
#[derive(Debug, Default, Deserialize)]
pub struct TaskListQuery {
    status: Option<String>,
    site: Option<String>,
    after: Option<String>,
    before: Option<String>,
}

/// `GET /console/tasks`.
pub async fn tasks(
    State(st): State<AppState>,
    signed: Signed,
    Query(q): Query<TaskListQuery>,
) -> Response {
    let status = q.status.as_deref().filter(|s| !s.is_empty());
    let status: Option<TaskStatus> = match status.map(str::parse).transpose() {
        Ok(s) => s,
        Err(_) => return signed.error(StatusCode::BAD_REQUEST, "Unknown status."),
    };
    let site = q
        .site
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.chars().take(64).collect::<String>());
    let Some(seek) = seek_of(q.after.as_deref(), q.before.as_deref()) else {
        return signed.error(StatusCode::BAD_REQUEST, "Malformed page position.");
    };
    let page = match st.store.task_seek(status, site.clone(), seek, PAGE).await {
        Ok(p) => p,
        Err(e) => return store_error(&signed, e),
    };
    let now = st.clock.now();
    let base = format!(
        "/console/tasks?status={}&site={}&",
        status.map(|s| s.as_str()).unwrap_or(""),
        enc(site.as_deref().unwrap_or(""))
    );
    let body = html! {
        h1 { "Tasks" }
        form.filters method="get" action="/console/tasks" {
            label { "status"
                select name="status" {
                    option value="" { "any" }
                    @for s in TaskStatus::ALL {
                        option value=(s.as_str()) selected[status == Some(s)] { (s.as_str()) }
                    }
                }
            }
            label { "site" input name="site" value=(site.as_deref().unwrap_or("")) size="12"; }
            button.secondary type="submit" { "Filter" }
        }
        section.card {
            (task_table(&page.items, now))
            (pager_of(&base, &page))
        }
    };
    signed.page("/console/tasks", "Tasks", None, body)
}

fn task_table(items: &[TaskSummary], now: Timestamp) -> Markup {
    html! {
        @if items.is_empty() { p.empty { "No task matches." } }
        @else {
            table #tasks {
                thead { tr {
                    th { "task" } th { "status" } th { "site" } th { "item" }
                    th { "latest state" } th.num { "leases" } th { "holder" } th { "created" } th { "age" }
                } }
                tbody {
                    @for t in items {
                        tr {
                            td { (task_link(&t.task_id)) }
                            td { (badge(t.status.as_str())) }
                            td { (t.site) }
                            td.wrap { (intent_line(&t.intent)) }
                            td { (opt(t.latest_state.map(|s| s.as_str()))) }
                            td.num { (t.lease_count) }
                            td.mono { (opt(t.lease_owner.as_deref())) }
                            td { (ts(t.created_at)) }
                            td { (age(now, t.created_at)) }
                        }
                    }
                }
            }
        }
    }
}

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
    let csrf = signed.0.csrf.clone();
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
fn actions(t: &TaskSummary, known_order: Option<&str>, id_enc: &str, csrf: &str) -> Markup {
    let resolvable = matches!(t.status, TaskStatus::Stale | TaskStatus::NeedsHuman);
    if !resolvable && t.status != TaskStatus::Queued {
        return html! { p.muted { "No action applies to a " (t.status.as_str()) " task." } };
    }
    let preset_state = t.latest_state.filter(|s| s.is_submitted());
    html! {
        div.actions {
            @if resolvable {
                (action_form(
                    &format!("/console/tasks/{id_enc}/resolve"),
                    csrf,
                    "Resolve",
                    "Resolve this task with the outcome you chose? This ends it for good.",
                    html! {
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

fn alert_table(alerts: &[AlertView], now: Timestamp) -> Markup {
    html! {
        @if alerts.is_empty() { p.empty { "No alert." } }
        @else {
            table.alerts {
                thead { tr { th { "raised" } th { "kind" } th { "state" } th { "about" } th { "summary" } th { "cleared" } } }
                tbody {
                    @for a in alerts {
                        tr {
                            td { (ts(a.raised_at)) br; span.muted { (age(now, a.raised_at)) " ago" } }
                            td { (a.kind.as_str()) }
                            td { (badge(a.state.as_str())) }
                            td { @match &a.task_id {
                                Some(t) => (task_link(t)),
                                None => span.mono { (a.subject) },
                            } }
                            td.wrap { (a.summary) }
                            td { (ts_opt(a.cleared_at)) }
                        }
                    }
                }
            }
        }
    }
}

/// The alerts page's links: its default is the newest page, so "oldest" is `after=oldest` and
/// "newest" the bare path (the other lists default to their oldest page, see [`pager_of`]).
fn alert_pager<T>(base: &str, page: &SeekPage<T>) -> Markup {
    let (first, last) = page
        .edges
        .as_ref()
        .map(|(f, l)| (f.encode(), l.encode()))
        .unzip();
    let older = first.filter(|_| page.older);
    let newer = last.filter(|_| page.newer);
    html! {
        div.pager {
            span { @if page.total == 0 { "nothing" } @else { (page.items.len()) " shown of " (capped_count(page.total, COUNT_CAP)) } }
            @if let Some(c) = &newer {
                a href=(base.trim_end_matches(['&', '?'])) #newest { "« newest" }
                a href={ (base) "after=" (enc(c)) } #newer { "← newer" }
            }
            @if let Some(c) = &older {
                a href={ (base) "before=" (enc(c)) } #older { "older →" }
                a href={ (base) "after=oldest" } #oldest { "oldest »" }
            }
        }
    }
}

/// Filters of the alerts page.
#[derive(Debug, Default, Deserialize)]
pub struct AlertListQuery {
    state: Option<String>,
    after: Option<String>,
    before: Option<String>,
}

/// `GET /console/alerts`: open alerts, or every alert with `state=all`, newest first, paged by
/// keyset on `(raised_at, insertion order)`: the newest page unless `?after=`/`?before=` says
/// otherwise (no OFFSET: a deep page costs what the first does).
pub async fn alerts(
    State(st): State<AppState>,
    signed: Signed,
    Query(q): Query<AlertListQuery>,
) -> Response {
    // An unknown state was read as `open`: the page then looked filtered by it.
    let all = match q.state.as_deref().filter(|s| !s.is_empty()) {
        None | Some("open") => false,
        Some("all") => true,
        Some(_) => {
            return signed.error(StatusCode::BAD_REQUEST, "Unknown state: open or all.");
        }
    };
    let after = q.after.as_deref().filter(|s| !s.is_empty());
    let before = q.before.as_deref().filter(|s| !s.is_empty());
    let seek = match (after, before) {
        (None, None) => Some(Seek::Newest),
        (Some("oldest"), None) => Some(Seek::Oldest),
        _ => seek_of(after, before),
    };
    let Some(seek) = seek else {
        return signed.error(StatusCode::BAD_REQUEST, "Malformed page position.");
    };
    let mut page = match st.ops.alert_seek(!all, None, seek, PAGE).await {
        Ok(p) => p,
        Err(e) => return store_error(&signed, e),
    };
    let base = format!(
        "/console/alerts?state={}&",
        if all { "all" } else { "open" }
    );
    let pager = alert_pager(&base, &page);
    // Newest first on the page; the links keep their meaning (older / newer).
    page.items.reverse();
    let body = html! {
        h1 { "Alerts" }
        p {
            @if all { a href="/console/alerts" { "Only open alerts" } }
            @else { a href="/console/alerts?state=all" { "Cleared alerts too" } }
        }
        section.card {
            (alert_table(&page.items, st.clock.now()))
            (pager)
        }
    };
    signed.page("/console/alerts", "Alerts", None, body)
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

/// Filters of the account-query list.
#[derive(Debug, Default, Deserialize)]
pub struct QueryListQuery {
    status: Option<String>,
    kind: Option<String>,
    after: Option<String>,
    before: Option<String>,
}

/// `GET /console/queries`.
pub async fn queries(
    State(st): State<AppState>,
    signed: Signed,
    Query(q): Query<QueryListQuery>,
) -> Response {
    let status = q.status.as_deref().filter(|s| !s.is_empty());
    let kind = q.kind.as_deref().filter(|s| !s.is_empty());
    let (Ok(status), Ok(kind)) = (
        status.map(str::parse::<QueryStatus>).transpose(),
        kind.map(str::parse::<QueryKind>).transpose(),
    ) else {
        return signed.error(StatusCode::BAD_REQUEST, "Unknown status or kind.");
    };
    let Some(seek) = seek_of(q.after.as_deref(), q.before.as_deref()) else {
        return signed.error(StatusCode::BAD_REQUEST, "Malformed page position.");
    };
    let page = match st.queries.query_seek(status, kind, seek, PAGE).await {
        Ok(p) => p,
        Err(e) => return store_error(&signed, e),
    };
    let base = format!(
        "/console/queries?status={}&kind={}&",
        status.map(|s| s.as_str()).unwrap_or(""),
        kind.map(|k| k.as_str()).unwrap_or("")
    );
    let body = html! {
        h1 { "Account queries" }
        form.filters method="get" action="/console/queries" {
            label { "status"
                select name="status" {
                    option value="" { "any" }
                    @for s in QueryStatus::ALL {
                        option value=(s.as_str()) selected[status == Some(s)] { (s.as_str()) }
                    }
                }
            }
            label { "kind"
                select name="kind" {
                    option value="" { "any" }
                    @for k in [QueryKind::OrderList, QueryKind::OrderDetail] {
                        option value=(k.as_str()) selected[kind == Some(k)] { (k.as_str()) }
                    }
                }
            }
            button.secondary type="submit" { "Filter" }
        }
        section.card {
            @if page.items.is_empty() { p.empty { "No query matches." } }
            @else {
                table {
                    thead { tr { th { "query" } th { "kind" } th { "status" } th.num { "attempt" }
                        th { "holder" } th { "error" } th { "created" } th { "finished" } } }
                    tbody {
                        @for q in &page.items {
                            tr {
                                td { a.mono href={ "/console/queries/" (enc(q.query_id.as_str())) } { (q.query_id.as_str()) } }
                                td { (q.kind.as_str()) }
                                td { (badge(q.status.as_str())) }
                                td.num { (q.attempt) "/" (q.max_attempts) }
                                td.mono { (opt(q.lease_owner.as_deref())) }
                                td.wrap { (opt(q.error_message.as_deref())) }
                                td { (ts(q.created_at)) }
                                td { (ts_opt(q.finished_at)) }
                            }
                        }
                    }
                }
            }
            (pager_of(&base, &page))
        }
    };
    signed.page("/console/queries", "Account queries", None, body)
}

/// `GET /console/queries/{id}`.
pub async fn query(
    State(st): State<AppState>,
    signed: Signed,
    Path(query_id): Path<String>,
) -> Response {
    let Ok(query_id) = QueryId::parse(&query_id) else {
        return signed.error(StatusCode::NOT_FOUND, "No such query.");
    };
    let q = match st.queries.query_get(&query_id).await {
        Ok(Some(q)) => q,
        Ok(None) => return signed.error(StatusCode::NOT_FOUND, "No such query."),
        Err(e) => return store_error(&signed, e),
    };
    let body = html! {
        h1 { "Query " span.mono { (q.query_id.as_str()) } " " (badge(q.status.as_str())) }
        section.card {
            dl.kv {
                dt { "kind" } dd { (q.kind.as_str()) }
                dt { "site" } dd { (q.site) }
                dt { "attempt" } dd { (q.attempt) " of " (q.max_attempts) }
                dt { "holder" } dd.mono { (opt(q.lease_owner.as_deref())) }
                dt { "error" } dd { (opt(q.error_code)) " " (opt(q.error_message.as_deref())) }
                dt { "created" } dd { (ts(q.created_at)) }
                dt { "finished" } dd { (ts_opt(q.finished_at)) }
            }
            (raw_json("Parameters (JSON)", &q.params))
        }
        (query_result(&q))
    };
    signed.page(
        "/console/queries",
        &format!("Query {}", q.query_id.as_str()),
        None,
        body,
    )
}

/// A query's result: an `order_list` as a table of orders, with the raw JSON collapsed.
pub fn query_result(q: &QueryView) -> Markup {
    let Some(result) = &q.result else {
        return html! { section.card { h2 { "Result" } p.empty { "No result yet." } } };
    };
    let list: Option<OrderListResult> = (q.kind == QueryKind::OrderList)
        .then(|| serde_json::from_value(result.clone()).ok())
        .flatten();
    html! {
        section.card.order-list {
            h2 { "Result" }
            @if let Some(list) = &list {
                p.muted {
                    "Window since " (ts_opt(list.since)) ", up to " (list.max_pages) " page(s): "
                    @if list.window_fully_covered { "the whole window was read." }
                    @else { strong { "the window was NOT fully read" } " — an order may be missing from this list." }
                }
                @if list.orders.is_empty() { p.empty { "The site lists no order in this window." } }
                @else {
                    table {
                        thead { tr { th { "order number" } th { "date" } th { "shop" } th { "items" } } }
                        tbody {
                            @for o in &list.orders {
                                tr {
                                    td.mono { (o.order_number) }
                                    td { (o.order_date) }
                                    td { (o.shop_name) }
                                    td.wrap {
                                        @for (i, item) in o.items.iter().enumerate() {
                                            @if i > 0 { br; }
                                            (item.item_name)
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            (raw_json("Raw result (JSON)", result))
        }
    }
}
