//! `GET /console/queries`: the account queries, filtered and paged by keyset.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;
use rakuten_types::query::{QueryKind, QueryStatus};
use serde::Deserialize;
use web_console::layout::{badge, enc, opt, ts, ts_opt};

use super::{PAGE, pager_of, seek_of, store_error};
use crate::console::Signed;
use crate::state::AppState;

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
