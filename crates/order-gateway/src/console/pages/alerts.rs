//! `GET /console/alerts`: alert records, open or all, newest first.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use rakuten_types::Timestamp;
use rakuten_types::alert::AlertView;
use serde::Deserialize;
use web_console::layout::{age, badge, capped_count, enc, ts, ts_opt};

use super::{PAGE, seek_of, store_error, task_link};
use crate::console::Signed;
use crate::state::AppState;
use crate::store::{COUNT_CAP, Seek, SeekPage};

pub(super) fn alert_table(alerts: &[AlertView], now: Timestamp) -> Markup {
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
