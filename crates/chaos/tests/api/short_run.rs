//! A short chaos run: 40 orders, every fault kind at least once, bounded to about a minute and a
//! half on a 2-core machine.

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
