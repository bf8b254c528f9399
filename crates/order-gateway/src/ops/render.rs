//! Tables of the `ops` commands (comfy-table, plain UTF-8 borders, no colours): one function per
//! answer shape. Each returns the whole text, ending in a newline.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ContentArrangement, Table};
use rakuten_types::WorkerId;
use rakuten_types::alert::{AlertView, OperatorActionAck, OperatorActionView, WorkerView};
use rakuten_types::order::{LeaseGrant, Page, TaskDetail, TaskSummary};

/// Longest cell shown before it is cut with `…` (intents, details).
const MAX_CELL_CHARS: usize = 80;

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.iter().copied());
    t
}

/// A free-text cell: control characters written out ([`rakuten_types::text::printable`]: text
/// stored before the reason check refused them must not act on the operator's terminal), then cut
/// to [`MAX_CELL_CHARS`].
fn cut(s: &str) -> String {
    let s = rakuten_types::text::printable(s);
    if s.chars().count() <= MAX_CELL_CHARS {
        s
    } else {
        let mut c: String = s.chars().take(MAX_CELL_CHARS - 1).collect();
        c.push('…');
        c
    }
}

/// `-` for nothing.
fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// A page of tasks, with a line saying which part of the whole it is.
pub fn tasks(page: &Page<TaskSummary>) -> String {
    let mut t = table(&[
        "task", "status", "state", "owner", "leases", "outcome", "created", "updated",
    ]);
    for s in &page.items {
        t.add_row(vec![
            s.task_id.to_string(),
            s.status.to_string(),
            opt(s.latest_state),
            opt(s.lease_owner.as_deref()),
            s.lease_count.to_string(),
            opt(s.outcome.map(|o| o.as_str())),
            s.created_at.to_string(),
            s.updated_at.to_string(),
        ]);
    }
    let shown = page.items.len() as i64;
    if shown == 0 {
        // An empty table and "0–0 of 0" read like a failure.
        return if page.total == 0 {
            "no task matches\n".to_owned()
        } else {
            format!(
                "no task at offset {} ({} task(s) in all)\n",
                page.offset, page.total
            )
        };
    }
    format!(
        "{t}\n{}–{} of {} task(s)\n",
        page.offset + 1,
        page.offset + shown,
        page.total
    )
}

/// One task: its fields, then its history (every reported state, with evidence).
pub fn task_detail(d: &TaskDetail) -> String {
    let s = d;
    let mut fields = table(&["field", "value"]);
    // The text as submitted (D-intent-verbatim-text), cut for the table; `--json` has it whole.
    let intent = s.intent.as_str();
    for (k, v) in [
        ("task", s.task_id.to_string()),
        ("site", s.site.clone()),
        ("status", s.status.to_string()),
        ("known state", opt(s.latest_state)),
        ("outcome", opt(s.outcome.map(|o| o.as_str()))),
        ("lease owner", opt(s.lease_owner.as_deref())),
        ("lease expires", opt(s.lease_expires_at)),
        ("leases", s.lease_count.to_string()),
        ("created", s.created_at.to_string()),
        ("updated", s.updated_at.to_string()),
        ("intent", cut(intent)),
    ] {
        fields.add_row(vec![k.to_owned(), v]);
    }
    let mut history = table(&[
        "reported",
        "state",
        "worker",
        "evidence",
        "site order",
        "payable ¥",
        "code",
        "detail",
    ]);
    for r in &d.history {
        history.add_row(vec![
            r.reported_at.to_string(),
            r.state.to_string(),
            opt(r.worker_id.as_deref()),
            opt(r.evidence_ref.as_deref()),
            opt(r.site_order_id.as_deref()),
            opt(r.payable_yen),
            opt(r.error_code),
            cut(r.detail.as_deref().unwrap_or("-")),
        ]);
    }
    let mut actions = table(&["at", "action", "by", "status", "reason"]);
    for a in &d.operator_actions {
        actions.add_row(vec![
            a.at.to_string(),
            a.action.as_str().to_owned(),
            a.actor.clone(),
            format!("{} → {}", opt(a.from_status), opt(a.to_status)),
            cut(&a.reason),
        ]);
    }
    let evidence: Vec<String> = d.evidence_queries.iter().map(ToString::to_string).collect();
    format!(
        "{fields}\nhistory ({} report(s), oldest first)\n{history}\noperator actions ({})\n{actions}\n\
         order lists gathered when it went stale: {}\n",
        d.history.len(),
        d.operator_actions.len(),
        if evidence.is_empty() {
            "-".to_owned()
        } else {
            evidence.join(", ")
        }
    )
}

/// The grant a reclaim made for `worker`.
pub fn grant(g: &LeaseGrant, worker: &WorkerId) -> String {
    let mut t = table(&["field", "value"]);
    for (k, v) in [
        ("task", g.task_id.to_string()),
        ("leases", g.lease_count.to_string()),
        ("lease expires", g.lease_expires_at.to_string()),
        ("known state", opt(g.known_state)),
    ] {
        t.add_row(vec![k.to_owned(), v]);
    }
    format!(
        "task {} reclaimed for worker {worker}: its next lease poll receives this grant, and it \
         verifies on the site before acting\n{t}\n",
        g.task_id
    )
}

/// A page of alerts, newest first.
pub fn alerts(page: &Page<AlertView>) -> String {
    let mut t = table(&[
        "alert", "kind", "subject", "state", "raised", "cleared", "summary",
    ]);
    for a in &page.items {
        t.add_row(vec![
            a.alert_id.clone(),
            a.kind.to_string(),
            a.subject.clone(),
            a.state.as_str().to_owned(),
            a.raised_at.to_string(),
            opt(a.cleared_at),
            cut(&a.summary),
        ]);
    }
    if page.items.is_empty() {
        return if page.total == 0 {
            "no alert matches\n".to_owned()
        } else {
            format!(
                "no alert at offset {} ({} alert(s) in all)\n",
                page.offset, page.total
            )
        };
    }
    format!("{t}\n{} of {} alert(s)\n", page.items.len(), page.total)
}

/// A page of workers, with how many there are in all and the command that shows the next page.
pub fn workers(page: &Page<WorkerView>) -> String {
    if page.items.is_empty() {
        return if page.total == 0 {
            "no worker has polled yet\n".to_owned()
        } else {
            format!(
                "no worker at offset {} ({} worker(s) in all)\n",
                page.offset, page.total
            )
        };
    }
    let mut t = table(&[
        "worker",
        "last seen",
        "seconds ago",
        "offline",
        "retired",
        "task",
    ]);
    for w in &page.items {
        t.add_row(vec![
            w.worker_id.clone(),
            w.last_seen_at.to_string(),
            format!("{:.0}", w.last_seen_seconds),
            w.offline.to_string(),
            w.retired.to_string(),
            opt(w.active_task.as_ref()),
        ]);
    }
    let shown = page.items.len() as i64;
    let first = page.offset + 1;
    let last = page.offset + shown;
    let mut out = format!("{t}\nworkers {first}-{last} of {}\n", page.total);
    if last < page.total {
        out.push_str(&format!(
            "more: order-gateway ops workers --offset {last} --limit {}\n",
            page.limit
        ));
    }
    out
}

/// One audited operator action.
pub fn action(a: &OperatorActionView) -> String {
    let mut t = table(&["field", "value"]);
    for (k, v) in [
        ("action", a.action.as_str().to_owned()),
        ("by", a.actor.clone()),
        ("at", a.at.to_string()),
        ("reason", cut(&a.reason)),
        ("task", opt(a.task_id.as_ref())),
        ("worker", opt(a.worker_id.as_deref())),
    ] {
        t.add_row(vec![k.to_owned(), v]);
    }
    // A worker's retirement moves no task: "- → -" meant nothing.
    if a.from_status.is_some() || a.to_status.is_some() {
        t.add_row(vec![
            "status".to_owned(),
            format!("{} → {}", opt(a.from_status), opt(a.to_status)),
        ]);
    }
    format!("{t}\n")
}

/// The answer of resolve and cancel.
pub fn action_ack(ack: &OperatorActionAck) -> String {
    format!(
        "task {} is now {}\n{}",
        ack.task_id,
        ack.status,
        action(&ack.action)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reason stored with an escape sequence (the console took it before the reason
    /// check was shared) cleared the terminal of the operator who ran `ops show`.
    #[test]
    fn a_stored_escape_sequence_is_shown_not_run() {
        let cell = cut("x\u{7}\u{1b}[2J ok \u{202e}y");
        assert_eq!(cell, "x\\u{7}\\u{1b}[2J ok \\u{202e}y");
        assert!(!cell.chars().any(char::is_control));
    }
}
