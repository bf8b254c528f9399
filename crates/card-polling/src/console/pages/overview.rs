//! `GET /console`: queue depths per task type and lane, and the last cycle's decisions.

use axum::extract::State;
use axum::response::Response;
use maud::html;
use web_console::layout::{opt, ts_opt};

use super::super::{AccountRules, Signed};
use crate::domain::Action;
use crate::state::AppState;

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
