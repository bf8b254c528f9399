//! `GET /console/tasks`: the task list, filtered by status and site, paged by keyset.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use rakuten_types::order::TaskSummary;
use rakuten_types::{TaskStatus, Timestamp};
use serde::Deserialize;
use web_console::layout::{age, badge, enc, opt, ts};

use super::{PAGE, intent_line, pager_of, seek_of, store_error, task_link};
use crate::console::Signed;
use crate::state::AppState;

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
