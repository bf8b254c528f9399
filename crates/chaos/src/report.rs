//! The summary of a run: one plain-text table (tasks, outcomes, faults by kind, proxy counters,
//! duplicates, lost reports, duration) followed by every violation and the fault timeline.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use crate::checks::Findings;
use crate::faults::{FaultKind, FaultLog};
use crate::proxy::ProxyCounts;

/// Everything a run produced.
#[derive(Debug)]
pub struct RunReport {
    /// The seed.
    pub seed: u64,
    /// Orders asked for.
    pub orders: u32,
    /// Orders acknowledged by the gateway.
    pub submitted: usize,
    /// Deliberate upstream re-sends.
    pub resends: u32,
    /// Wall time.
    pub duration: Duration,
    /// Whether the global deadline cut the run short.
    pub deadline_hit: bool,
    /// Orders the shop created (its submission log).
    pub shop_orders: usize,
    /// Of which the shop broke the connection after creating them.
    pub shop_dropped: usize,
    /// What the injector did.
    pub faults: FaultLog,
    /// What the proxy did.
    pub proxy: ProxyCounts,
    /// What the worker↔shop proxy did.
    pub shop_proxy: ProxyCounts,
    /// Operator reclaims.
    pub reclaims: u32,
    /// Reclaims refused (retried later).
    pub reclaim_refused: u32,
    /// Worker process starts.
    pub worker_starts: u32,
    /// Worker processes killed by the harness.
    pub worker_kills: u32,
    /// Gateway process starts.
    pub gateway_starts: u32,
    /// Gateway processes killed by the harness.
    pub gateway_kills: u32,
    /// What the checks found.
    pub findings: Findings,
    /// The run directory (kept when the run failed or `--data-dir` was given).
    pub dir: PathBuf,
    /// The command that repeats this run.
    pub command: String,
}

impl RunReport {
    /// No violation and the deadline was not hit.
    pub fn ok(&self) -> bool {
        self.findings.violations.is_empty() && !self.deadline_hit
    }

    /// How many faults of `kind` were injected.
    pub fn faults_of(&self, kind: FaultKind) -> u32 {
        self.faults.by_kind.get(&kind).copied().unwrap_or(0)
    }

    /// The summary table and the violations.
    pub fn table(&self) -> String {
        let mut s = self.counts_table();
        self.write_details(&mut s);
        s
    }

    /// The table of counts: the run, the tasks by status, the faults, the processes, the proxies,
    /// the checks.
    fn counts_table(&self) -> String {
        let mut s = String::new();
        let f = &self.findings;
        let row = |s: &mut String, k: &str, v: String| {
            let _ = writeln!(s, "| {k:<34} | {v:>12} |");
        };
        let _ = writeln!(s, "| {:<34} | {:>12} |", "chaos run", "value");
        let _ = writeln!(s, "|{}|{}|", "-".repeat(36), "-".repeat(14));
        row(&mut s, "seed", self.seed.to_string());
        row(
            &mut s,
            "duration",
            format!("{:.1} s", self.duration.as_secs_f64()),
        );
        row(
            &mut s,
            "orders asked / acknowledged",
            format!("{} / {}", self.orders, self.submitted),
        );
        row(
            &mut s,
            "upstream re-sends (same task_id)",
            self.resends.to_string(),
        );
        row(
            &mut s,
            "tasks on the gateway",
            f.statuses.values().sum::<u32>().to_string(),
        );
        for (st, n) in &f.statuses {
            row(&mut s, &format!("  {st}"), n.to_string());
        }
        row(
            &mut s,
            "shop orders (dropped answers)",
            format!("{} ({})", self.shop_orders, self.shop_dropped),
        );
        for k in FaultKind::ALL {
            row(
                &mut s,
                &format!("fault {}", k.name()),
                self.faults_of(k).to_string(),
            );
        }
        row(
            &mut s,
            "  failpoints that fired",
            self.faults.failpoints_hit.to_string(),
        );
        row(
            &mut s,
            "  shop drops that hit an order",
            self.faults.shop_drops_hit.to_string(),
        );
        row(
            &mut s,
            "worker kills / starts",
            format!("{} / {}", self.worker_kills, self.worker_starts),
        );
        row(
            &mut s,
            "gateway kills / starts",
            format!("{} / {}", self.gateway_kills, self.gateway_starts),
        );
        row(&mut s, "proxy exchanges", self.proxy.requests.to_string());
        row(
            &mut s,
            "  dropped before gateway",
            self.proxy.dropped_before.to_string(),
        );
        row(
            &mut s,
            "  answer dropped after gateway",
            self.proxy.dropped_after.to_string(),
        );
        row(&mut s, "  delayed", self.proxy.delayed.to_string());
        row(&mut s, "  black-holed", self.proxy.blackholed.to_string());
        row(
            &mut s,
            "shop proxy exchanges",
            self.shop_proxy.requests.to_string(),
        );
        row(
            &mut s,
            "  dropped before / after the shop",
            format!(
                "{} / {}",
                self.shop_proxy.dropped_before, self.shop_proxy.dropped_after
            ),
        );
        row(
            &mut s,
            "report acks seen by the proxy",
            self.proxy.acks.to_string(),
        );
        row(
            &mut s,
            "distinct acked reports checked",
            f.acks_checked.to_string(),
        );
        row(
            &mut s,
            "operator reclaims (refused)",
            format!("{} ({})", self.reclaims, self.reclaim_refused),
        );
        row(
            &mut s,
            "left stale for a human",
            f.left_stale.len().to_string(),
        );
        row(&mut s, "DUPLICATE SUBMISSIONS", f.duplicates.to_string());
        row(&mut s, "LOST REPORTS", f.lost_reports.to_string());
        row(&mut s, "VIOLATIONS", f.violations.len().to_string());
        row(&mut s, "deadline hit", self.deadline_hit.to_string());
        s
    }

    /// Below the table: the reasons of `needs_human`, the tasks left stale, the violations, the
    /// fault timeline, and how to repeat the run.
    fn write_details(&self, s: &mut String) {
        let f = &self.findings;
        if !f.needs_human_reasons.is_empty() {
            let _ = writeln!(s, "\nneeds_human, by reason:");
            let mut v: Vec<_> = f.needs_human_reasons.iter().collect();
            v.sort_by(|a, b| b.1.cmp(a.1));
            for (why, n) in v {
                let _ = writeln!(s, "  {n:>5}  {why}");
            }
        }
        if !f.left_stale.is_empty() {
            let _ = writeln!(s, "\nleft stale:");
            for t in &f.left_stale {
                let _ = writeln!(s, "  {t}");
            }
        }
        if !f.violations.is_empty() {
            let _ = writeln!(s, "\nviolations:");
            for v in &f.violations {
                let _ = writeln!(
                    s,
                    "  [{}] {}: {}",
                    v.kind.name(),
                    v.task_id.as_deref().unwrap_or("-"),
                    v.detail
                );
            }
        }
        let _ = writeln!(s, "\nfault timeline:");
        for l in &self.faults.lines {
            let _ = writeln!(s, "  {l}");
        }
        let _ = writeln!(s, "\nrepeat: {}", self.command);
        let _ = writeln!(
            s,
            "result: {} (run dir {})",
            if self.ok() { "OK" } else { "FAILED" },
            self.dir.display()
        );
    }
}
