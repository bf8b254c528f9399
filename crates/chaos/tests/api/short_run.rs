//! Short chaos runs against the real binaries: 40 orders with every fault kind at least once
//! (about a minute on a 2-core machine), and the reproduction of a bug the harness found.

use std::sync::Once;

use chaos::{FaultKind, Settings};

static BUILD: Once = Once::new();

/// The service binaries next to this test binary's `target/debug`, built once if needed.
fn ensure_services_built() {
    BUILD.call_once(|| {
        chaos::run::build_services().expect("cargo build of the services");
    });
}

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

/// Regression run for a worker bug the harness found (docs/RELIABILITY.md, finding 1; fixed by
/// D-worker-9): a task whose
/// lease lapsed while it was in the cart is recovered, the order list shows exactly one order of
/// the same item in the window — another task's — and the worker reports it as this task's order:
/// `succeeded` with an order the shop created for someone else, and this task's order never
/// placed. Seed 1 puts a tea order (task 00001) right before the tea task (00002) whose lease
/// expires.
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
