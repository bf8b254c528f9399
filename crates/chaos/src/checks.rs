//! The end-of-run checks, from evidence the system under test cannot tamper with: the shop's own
//! submission log (JSONL, fsynced before the shop answers), the gateway's task list and state
//! mirror (over its HTTP API, so any storage backend), the report acknowledgements the proxy
//! delivered, and the worker journal's acknowledged outbox rows (SQLite, opened read-only).
//!
//! | check | violation |
//! |---|---|
//! | 1 | a task submitted to the shop more than once; an order whose remark names no known task |
//! | 2 | a shop order unknown to the gateway (no report with its `site_order_id`) and its task not `needs_human` |
//! | 3 | a task not terminal and not stale (stuck); `needs_human` without a reason; an acknowledged submission the gateway lost; an upstream re-send that created a task |
//! | 4 | an acknowledged report (proxy or journal) missing from the gateway's mirror, or its order id changed |
//! | 5 | `succeeded` without a shop order; a gateway `site_order_id` the shop never created for that task |
//! | 6 | a shop order whose items are not exactly the task's intent item |

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::Context;
use rakuten_types::TaskStatus;
use rakuten_types::order::TaskDetail;
use serde::Deserialize;

use crate::proxy::ObservedAck;

/// One line of the shop's submission log.
#[derive(Debug, Clone, Deserialize)]
pub struct ShopSubmission {
    /// 1, 2, 3…
    pub seq: u64,
    /// The order created.
    pub order_number: String,
    /// Item ids ordered (one per order line).
    #[serde(default)]
    pub item_ids: Vec<i64>,
    /// The buyer's remark: the worker writes the task id there.
    pub note: Option<String>,
    /// Whether the shop broke the connection after creating it (fault).
    #[serde(default)]
    pub dropped: bool,
}

/// Reads the shop's JSONL submission log.
///
/// # Errors
/// The file cannot be read or a line is not a submission.
pub fn read_shop_log(path: &Path) -> anyhow::Result<Vec<ShopSubmission>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("read {}", path.display())),
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).with_context(|| format!("bad submission line {l:?}")))
        .collect()
}

/// `(task_id, state)` of every outbox row the worker journal marks acknowledged.
///
/// # Errors
/// The journal cannot be opened or read.
pub async fn read_journal_acks(path: &Path) -> anyhow::Result<Vec<(String, String)>> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let opts = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .read_only(true);
    let pool = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(opts)
        .await
        .with_context(|| format!("open {}", path.display()))?;
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT task_id, state FROM outbox WHERE status = 'acked' ORDER BY id")
            .fetch_all(&pool)
            .await?;
    pool.close().await;
    Ok(rows)
}

/// Which check a violation breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ViolationKind {
    /// Check 1: one task, several shop orders.
    DuplicateSubmission,
    /// Check 1: an order whose remark names no task the upstream submitted.
    UnattributedOrder,
    /// Check 2: a shop order the gateway does not know, task not `needs_human`.
    OrderUnknownToGateway,
    /// Check 3: a task left queued, leased or running.
    StuckTask,
    /// Check 3: `needs_human` with no reason in any report.
    NeedsHumanWithoutReason,
    /// Check 3: an acknowledged submission missing from the gateway.
    LostTask,
    /// Check 3: a re-send of a known task id answered `created: true`, or a submission failed.
    UpstreamSubmission,
    /// Check 4: an acknowledged report missing from the mirror (or its order id changed).
    LostReport,
    /// Check 5: `succeeded` without a shop order, or an order id the shop never created.
    PhantomOrder,
    /// Check 6: a shop order whose items are not exactly the task's intent (a leftover cart line,
    /// another task's item).
    WrongOrderContent,
}

impl ViolationKind {
    /// Short name for the summary.
    pub fn name(self) -> &'static str {
        match self {
            ViolationKind::DuplicateSubmission => "duplicate_submission",
            ViolationKind::UnattributedOrder => "unattributed_order",
            ViolationKind::OrderUnknownToGateway => "order_unknown_to_gateway",
            ViolationKind::StuckTask => "stuck_task",
            ViolationKind::NeedsHumanWithoutReason => "needs_human_without_reason",
            ViolationKind::LostTask => "lost_task",
            ViolationKind::UpstreamSubmission => "upstream_submission",
            ViolationKind::LostReport => "lost_report",
            ViolationKind::PhantomOrder => "phantom_order",
            ViolationKind::WrongOrderContent => "wrong_order_content",
        }
    }
}

/// One broken invariant.
#[derive(Debug, Clone)]
pub struct Violation {
    /// Which.
    pub kind: ViolationKind,
    /// The task concerned, if any.
    pub task_id: Option<String>,
    /// What exactly.
    pub detail: String,
}

/// Everything the checks read.
#[derive(Debug, Default)]
pub struct Evidence {
    /// Task ids the upstream got an acknowledgement for.
    pub submitted: Vec<String>,
    /// Re-sends answered `created: true`.
    pub resend_created: Vec<String>,
    /// Submissions that failed for good.
    pub submit_failed: Vec<(String, String)>,
    /// The shop's submission log.
    pub shop: Vec<ShopSubmission>,
    /// The gateway's view of every task it lists, with history.
    pub gateway: BTreeMap<String, TaskDetail>,
    /// The shop item id each task's intent names (tasks missing here are not content-checked).
    pub items: BTreeMap<String, i64>,
    /// Report acknowledgements the proxy delivered.
    pub proxy_acks: Vec<ObservedAck>,
    /// Acknowledged outbox rows of the worker journal.
    pub journal_acks: Vec<(String, String)>,
}

/// What the checks found.
#[derive(Debug, Default)]
pub struct Findings {
    /// Every violation.
    pub violations: Vec<Violation>,
    /// Tasks by final status.
    pub statuses: BTreeMap<String, u32>,
    /// `needs_human` tasks by the gist of their reason (digits masked, cut short).
    pub needs_human_reasons: BTreeMap<String, u32>,
    /// Tasks left stale (allowed: a human decides), with their latest state.
    pub left_stale: Vec<String>,
    /// Tasks submitted to the shop more than once.
    pub duplicates: u32,
    /// Acknowledged reports missing from the mirror.
    pub lost_reports: u32,
    /// Distinct acknowledged reports checked (proxy ∪ journal).
    pub acks_checked: u32,
}

impl Findings {
    fn add(&mut self, kind: ViolationKind, task_id: Option<&str>, detail: String) {
        self.violations.push(Violation {
            kind,
            task_id: task_id.map(str::to_owned),
            detail,
        });
    }
}

/// A short, countable form of a reason: digits masked, cut before the first list or parenthesis,
/// at most 60 characters.
fn reason_gist(detail: &str) -> String {
    let cut = detail.find(['[', '(']).unwrap_or(detail.len());
    let masked: String = detail[..cut]
        .chars()
        .map(|c| if c.is_ascii_digit() { '#' } else { c })
        .take(60)
        .collect();
    masked.trim().to_owned()
}

/// Runs every check.
pub fn check(ev: &Evidence) -> Findings {
    let mut f = Findings::default();
    let by_task = one_order_per_task(ev, &mut f);
    orders_known_to_gateway(ev, &by_task, &mut f);
    tasks_settled(ev, &mut f);
    no_acknowledged_report_lost(ev, &mut f);
    no_phantom_orders(ev, &by_task, &mut f);
    orders_hold_the_intent_item(ev, &by_task, &mut f);
    f
}

/// The shop's orders by the task their remark names.
type ByTask<'e> = BTreeMap<&'e str, Vec<&'e ShopSubmission>>;

/// Check 1: at most one shop order per task; every order attributable. Returns the orders by task.
fn one_order_per_task<'e>(ev: &'e Evidence, f: &mut Findings) -> ByTask<'e> {
    let known: BTreeSet<&str> = ev.submitted.iter().map(String::as_str).collect();
    let mut by_task: ByTask<'e> = BTreeMap::new();
    for s in &ev.shop {
        match s.note.as_deref() {
            Some(t) if known.contains(t) || ev.gateway.contains_key(t) => {
                by_task.entry(t).or_default().push(s);
            }
            other => f.add(
                ViolationKind::UnattributedOrder,
                other,
                format!(
                    "shop order {} (seq {}) has remark {other:?}",
                    s.order_number, s.seq
                ),
            ),
        }
    }
    for (t, subs) in &by_task {
        if subs.len() > 1 {
            f.duplicates += 1;
            let orders: Vec<String> = subs
                .iter()
                .map(|s| {
                    format!(
                        "{} (seq {}{})",
                        s.order_number,
                        s.seq,
                        if s.dropped { ", dropped" } else { "" }
                    )
                })
                .collect();
            f.add(
                ViolationKind::DuplicateSubmission,
                Some(t),
                format!("submitted {} times: {}", subs.len(), orders.join(", ")),
            );
        }
    }
    by_task
}

/// Check 2: every shop order known to the gateway, or its task flagged for a human.
fn orders_known_to_gateway(ev: &Evidence, by_task: &ByTask<'_>, f: &mut Findings) {
    for (t, subs) in by_task {
        let d = ev.gateway.get(*t);
        let needs_human = d.is_some_and(|d| d.status == TaskStatus::NeedsHuman);
        for s in subs {
            let reported = d.is_some_and(|d| {
                d.history
                    .iter()
                    .any(|r| r.site_order_id.as_deref() == Some(s.order_number.as_str()))
            });
            if !reported && !needs_human {
                f.add(
                    ViolationKind::OrderUnknownToGateway,
                    Some(t),
                    format!(
                        "shop order {} is in no report and the task is {}",
                        s.order_number,
                        d.map_or("unknown".into(), |d| d.status.as_str().to_owned())
                    ),
                );
            }
        }
    }
}

/// Check 3: every task accounted for and settled.
fn tasks_settled(ev: &Evidence, f: &mut Findings) {
    for t in &ev.submitted {
        if !ev.gateway.contains_key(t) {
            f.add(
                ViolationKind::LostTask,
                Some(t),
                "acknowledged submission unknown to the gateway".into(),
            );
        }
    }
    for t in &ev.resend_created {
        f.add(
            ViolationKind::UpstreamSubmission,
            Some(t),
            "a re-send of a known task id answered created: true".into(),
        );
    }
    for (t, why) in &ev.submit_failed {
        f.add(
            ViolationKind::UpstreamSubmission,
            Some(t),
            format!("submission failed: {why}"),
        );
    }
    for (t, d) in &ev.gateway {
        let st = d.status;
        *f.statuses.entry(st.as_str().to_owned()).or_default() += 1;
        match st {
            // Chaos submits without a `not_after`, so an expired task never arises; it would be
            // terminal and never leased (nothing ordered), not a stuck one.
            TaskStatus::Succeeded | TaskStatus::Failed | TaskStatus::Expired => {}
            TaskStatus::NeedsHuman => {
                let reason = d.history.iter().any(|r| {
                    r.error_code.is_some() || r.detail.as_deref().is_some_and(|s| !s.is_empty())
                });
                let gist = d
                    .history
                    .iter()
                    .rev()
                    .find_map(|r| r.detail.as_deref().filter(|s| !s.is_empty()))
                    .map_or_else(|| "(no detail)".to_owned(), reason_gist);
                *f.needs_human_reasons.entry(gist).or_default() += 1;
                if !reason {
                    f.add(
                        ViolationKind::NeedsHumanWithoutReason,
                        Some(t),
                        format!(
                            "needs_human with {} report(s), none with a reason",
                            d.history.len()
                        ),
                    );
                }
            }
            TaskStatus::Stale => f.left_stale.push(format!(
                "{t} (lease_count {}, latest state {})",
                d.lease_count,
                d.latest_state.map_or("none", |s| s.as_str())
            )),
            TaskStatus::Queued | TaskStatus::Leased | TaskStatus::Running => f.add(
                ViolationKind::StuckTask,
                Some(t),
                format!(
                    "still {} at the end (lease_count {}, latest state {:?})",
                    st.as_str(),
                    d.lease_count,
                    d.latest_state.map(|s| s.as_str())
                ),
            ),
        }
    }
}

/// Check 4: no acknowledged report lost.
fn no_acknowledged_report_lost(ev: &Evidence, f: &mut Findings) {
    let mut acked: BTreeMap<(String, String), Option<String>> = BTreeMap::new();
    for a in &ev.proxy_acks {
        let e = acked
            .entry((a.task_id.clone(), a.state.clone()))
            .or_default();
        if a.site_order_id.is_some() {
            e.clone_from(&a.site_order_id);
        }
    }
    for (t, s) in &ev.journal_acks {
        acked.entry((t.clone(), s.clone())).or_default();
    }
    f.acks_checked = acked.len() as u32;
    for ((t, s), order) in &acked {
        let row = ev
            .gateway
            .get(t)
            .and_then(|d| d.history.iter().find(|r| r.state.as_str() == s));
        match row {
            None => {
                f.lost_reports += 1;
                f.add(
                    ViolationKind::LostReport,
                    Some(t),
                    format!("acknowledged report {s} is not in the gateway's mirror"),
                );
            }
            Some(r) => {
                if let Some(o) = order
                    && r.site_order_id.as_deref() != Some(o.as_str())
                {
                    f.lost_reports += 1;
                    f.add(
                        ViolationKind::LostReport,
                        Some(t),
                        format!(
                            "acknowledged report {s} carried order {o}, the mirror now says {:?}",
                            r.site_order_id
                        ),
                    );
                }
            }
        }
    }
}

/// Check 5: no phantom orders.
fn no_phantom_orders(ev: &Evidence, by_task: &ByTask<'_>, f: &mut Findings) {
    for (t, d) in &ev.gateway {
        let shop_orders: BTreeSet<&str> = by_task
            .get(t.as_str())
            .map(|v| v.iter().map(|s| s.order_number.as_str()).collect())
            .unwrap_or_default();
        if d.status == TaskStatus::Succeeded && shop_orders.is_empty() {
            f.add(
                ViolationKind::PhantomOrder,
                Some(t),
                "succeeded but the shop has no order for it".into(),
            );
        }
        for r in &d.history {
            if let Some(o) = &r.site_order_id
                && !shop_orders.contains(o.as_str())
            {
                f.add(
                    ViolationKind::PhantomOrder,
                    Some(t),
                    format!(
                        "report {} names order {o}, which the shop never created for this task",
                        r.state.as_str()
                    ),
                );
            }
        }
    }
}

/// Check 6: every order holds exactly the task's item.
fn orders_hold_the_intent_item(ev: &Evidence, by_task: &ByTask<'_>, f: &mut Findings) {
    for (t, subs) in by_task {
        let Some(want) = ev.items.get(*t) else {
            continue;
        };
        for s in subs {
            if s.item_ids != [*want] {
                f.add(
                    ViolationKind::WrongOrderContent,
                    Some(t),
                    format!(
                        "shop order {} holds items {:?}, the intent names item {want}",
                        s.order_number, s.item_ids
                    ),
                );
            }
        }
    }
}
