//! Short chaos runs against the real binaries: 40 orders with every fault kind at least once
//! (about a minute on a 2-core machine), a recovered task that must not claim another task's
//! order, and the same checks through the HTTP and the browser site adapters.

use std::sync::Once;

use chaos::{FaultKind, Settings, SiteChoice};

static BUILD: Once = Once::new();

/// The service binaries next to this test binary's `target/debug`, built once if needed.
fn ensure_services_built() {
    BUILD.call_once(|| {
        chaos::run::build_services().expect("cargo build of the services");
    });
}

#[test_util::lane(chaos)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_run_with_every_fault_kind_finds_no_duplicate_and_no_lost_report() {
    ensure_services_built();
    let mut s = Settings::for_tests(40, 20261129);
    s.submit_rate = 1.5;
    s.fault_interval_seconds = 1.5;
    // Typically settles in about 50 s; the margin covers a slow machine (faults stop at 60 %).
    s.deadline_seconds = 150;
    let report = chaos::run(&s).await.expect("harness runs");
    println!("{}", report.table());
    for k in FaultKind::ALL {
        assert!(
            report.faults_of(k) >= 1,
            "fault {} never injected",
            k.name()
        );
    }
    assert_eq!(report.submitted, 40);
    assert!(
        !report.deadline_hit,
        "the run did not settle before its deadline"
    );
    assert!(
        report.findings.violations.is_empty(),
        "violations: {:#?}",
        report.findings.violations
    );
    assert_eq!(report.findings.duplicates, 0);
    assert_eq!(report.findings.lost_reports, 0);
    assert!(
        report.findings.acks_checked > 0,
        "no acknowledged report was checked"
    );
    assert!(report.shop_orders > 0, "the shop took no order at all");
}

/// A task whose lease lapsed while it was in the cart is recovered, and the order list shows
/// exactly one order of the same item in the window — another task's. Matching by item and window
/// alone reports it as this task's order: `succeeded` with an order the shop created for someone
/// else, and this task's order never placed (docs/RELIABILITY.md, "A recovered task claimed
/// another task's order"). Recovery attributes an order only on positive evidence
/// (D-recovery-verdicts), so the run has no violation. Seed 1 puts a tea order (task 00001) right
/// before the tea task (00002) whose lease expires.
#[test_util::lane(chaos)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recovered_task_never_claims_another_tasks_order() {
    ensure_services_built();
    let mut s = Settings::for_tests(6, 1);
    s.faults = vec![FaultKind::LeaseExpiry];
    s.submit_rate = 1.0;
    s.fault_interval_seconds = 1.0;
    s.deadline_seconds = 60;
    let report = chaos::run(&s).await.expect("harness runs");
    println!("{}", report.table());
    assert!(report.faults_of(FaultKind::LeaseExpiry) >= 1);
    assert!(
        report.findings.violations.is_empty(),
        "violations: {:#?}",
        report.findings.violations
    );
}

/// The same at-most-once checks with a `site-adapter` process between the worker and the shop
/// (the site adapter protocol over plain HTTP, D-chaos-site-seam), every fault kind at least once.
#[test_util::lane(chaos)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_run_through_the_http_adapter_finds_no_duplicate_and_no_lost_report() {
    ensure_services_built();
    let mut s = Settings::for_tests(24, 20261201);
    s.site = SiteChoice::HttpAdapter;
    s.submit_rate = 1.5;
    s.fault_interval_seconds = 1.2;
    s.deadline_seconds = 150;
    let report = chaos::run(&s).await.expect("harness runs");
    println!("{}", report.table());
    for k in FaultKind::ALL {
        assert!(
            report.faults_of(k) >= 1,
            "fault {} never injected",
            k.name()
        );
    }
    assert!(
        !report.deadline_hit,
        "the run did not settle before its deadline"
    );
    assert!(
        report.findings.violations.is_empty(),
        "violations: {:#?}",
        report.findings.violations
    );
    assert_eq!(report.findings.duplicates, 0);
    assert_eq!(report.findings.lost_reports, 0);
    assert!(report.shop_orders > 0, "the shop took no order at all");
}

/// The browser adapter (headless Chromium from Debian's packages) under worker kills
/// and lost shop answers: no duplicate, nothing lost, and the evidence directory holds the PNG of
/// every step next to the HTML.
#[test_util::lane(chaos, browser)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_run_through_the_browser_adapter_keeps_at_most_once_and_writes_screenshots() {
    ensure_services_built();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = Settings::for_tests(6, 20261202);
    s.site = SiteChoice::BrowserAdapter;
    s.faults = vec![
        FaultKind::WorkerKill,
        FaultKind::ShopAnswerDrop,
        FaultKind::ShopDropAfterOrder,
    ];
    s.submit_rate = 0.5;
    s.fault_interval_seconds = 3.0;
    // A browser step takes about a second on a loaded 2-core machine: a longer lease.
    s.lease_ttl_seconds = 20.0;
    s.deadline_seconds = 240;
    s.data_dir = Some(dir.path().to_path_buf());
    let report = chaos::run(&s).await.expect("harness runs");
    println!("{}", report.table());
    assert!(
        !report.deadline_hit,
        "the run did not settle before its deadline"
    );
    assert!(
        report.findings.violations.is_empty(),
        "violations: {:#?}",
        report.findings.violations
    );
    assert_eq!(report.findings.duplicates, 0);
    assert_eq!(report.findings.lost_reports, 0);
    assert!(report.shop_orders > 0, "the shop took no order at all");
    let pngs = walk(&dir.path().join("worker").join("evidence"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .count();
    assert!(
        pngs >= 6,
        "only {pngs} screenshots in the evidence directory"
    );
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
