//! `GET /console/items` and `GET /console/exceptions`: the item list in the account's scope, its
//! filters and keyset pages.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use serde::Deserialize;
use web_console::layout::{Notice, badge, capped_count, enc, opt, ts, ts_opt};

use super::super::{AccountRules, Signed};
use super::{PAGE, store_error};
use crate::domain::Action;
use crate::priority::item_status::ItemStatus;
use crate::state::AppState;
use crate::store::{COUNT_CAP, ExceptionCondition, ItemFilter, ItemView};

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
