//! `GET /console`: what the person on call sees first — counts by status, the open alerts,
//! the workers (with retire) and the leases held now.

use axum::extract::{Query, State};
use axum::response::Response;
use maud::html;
use rakuten_types::TaskStatus;
use web_console::layout::{age, badge, capped_count, csrf_input, enc, opt, ts_opt};

use super::alerts::alert_table;
use super::{Done, PAGE, store_error, task_link};
use crate::console::Signed;
use crate::state::AppState;
use crate::store::{COUNT_CAP, Seek};

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
    // The first page of the API's order (D-worker-list-pages): lease holders, then serving
    // workers, most recently seen first; the card says how many more there are.
    let workers = match st.ops.worker_list(PAGE, 0).await {
        Ok(w) => w,
        Err(e) => return store_error(&signed, e),
    };
    let mut alerts = match st.ops.alert_seek(true, None, Seek::Newest, PAGE).await {
        Ok(a) => a,
        Err(e) => return store_error(&signed, e),
    };
    // Newest first on the page.
    alerts.items.reverse();
    let csrf = signed.csrf().to_owned();
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
                h2 { "Workers (" (workers.total) ")" }
                @if workers.items.is_empty() { p.empty { "No worker has polled yet." } }
                @else {
                    table {
                        thead { tr { th { "worker" } th { "last seen" } th { "state" } th { "holds" } th { "retire (hidden until it polls again)" } } }
                        tbody {
                            @for w in &workers.items {
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
                    @if workers.total > workers.items.len() as i64 {
                        p.muted {
                            "Showing " (workers.items.len()) " of " (workers.total)
                            " workers (lease holders, then serving ones, most recently seen first). The rest: "
                            code { "order-gateway ops workers --offset " (workers.items.len()) }
                            " or " code { "GET /api/workers?offset=" (workers.items.len()) }
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
