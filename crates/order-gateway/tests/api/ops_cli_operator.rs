//! The operator commands of `order-gateway ops` for the operator actions:
//! `alerts`, `resolve`, `cancel`, `workers`, `retire`, against a spawned gateway (exit codes as
//! documented: 0 done, 1 refused, 2 usage, 3 not found).

use std::time::Duration;

use crate::helpers::spawn_app;
use crate::ops_cli::ops;

#[tokio::test]
async fn ops_alerts_resolve_cancel_workers_and_retire_work_against_a_gateway() {
    let app = spawn_app().await;
    app.stale("po-cli", "w1").await;
    app.run_alerts().await;

    let r = ops(&app, &["alerts"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("task_stale") && r.stdout.contains("po-cli"),
        "{}",
        r.stdout
    );
    let r = ops(&app, &["alerts", "--kind", "task_stale", "--json"]).await;
    assert_eq!(r.json()["items"][0]["task_id"], "po-cli");
    assert_eq!(ops(&app, &["alerts", "--kind", "nope"]).await.code, 2);

    // Resolve: a usage error, then done, then refused (6003) the second time.
    let r = ops(
        &app,
        &[
            "resolve",
            "po-cli",
            "--outcome",
            "needs_human",
            "--reason",
            "x",
        ],
    )
    .await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    // `--outcome bogus` answered "unknown status".
    let r = ops(
        &app,
        &["resolve", "po-cli", "--outcome", "bogus", "--reason", "x"],
    )
    .await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("--outcome must be succeeded or failed"),
        "{}",
        r.stderr
    );
    let args = [
        "resolve",
        "po-cli",
        "--outcome",
        "succeeded",
        "--state",
        "paid",
        "--site-order-id",
        "306-1",
        "--reason",
        "seen paid",
    ];
    let r = ops(&app, &args).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("task po-cli is now succeeded"),
        "{}",
        r.stdout
    );
    let r = ops(&app, &args).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("succeeded"), "{}", r.stderr);
    let r = ops(&app, &["show", "po-cli"]).await;
    assert!(
        r.stdout.contains("resolve") && r.stdout.contains("seen paid"),
        "{}",
        r.stdout
    );

    // Cancel a queued task; an unknown one is "not found".
    app.submit("po-q").await.assert_ok();
    let r = ops(&app, &["cancel", "po-q", "--reason", "duplicate", "--json"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["status"], "failed");
    assert_eq!(
        ops(&app, &["cancel", "nope", "--reason", "x"]).await.code,
        3
    );

    // Workers and retire.
    app.clock.advance(Duration::from_secs(400));
    let r = ops(&app, &["workers"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("w1")
            && r.stdout.contains("true")
            && r.stdout.contains("workers 1-1 of 1"),
        "{}",
        r.stdout
    );
    let r = ops(&app, &["retire", "w1", "--reason", "decommissioned"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("retire_worker"), "{}", r.stdout);
    let r = ops(&app, &["workers", "--json"]).await;
    assert_eq!(r.json()["items"][0]["retired"], true);
    assert_eq!(r.json()["total"], 1);
    assert_eq!(ops(&app, &["retire", "w1", "--reason", " "]).await.code, 2);
}
