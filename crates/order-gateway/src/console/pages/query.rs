//! `GET /console/queries/{id}`: one account query and its result.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use rakuten_types::QueryId;
use rakuten_types::query::{OrderListResult, QueryKind, QueryView};
use web_console::layout::{badge, opt, raw_json, ts, ts_opt};

use super::store_error;
use crate::console::Signed;
use crate::state::AppState;

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
