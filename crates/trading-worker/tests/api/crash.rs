//! Crash tests: the real `trading-worker` binary is killed (abort) at each step boundary, then
//! restarted without the failpoint; the shop must have logged at most one submission for the
//! task, and the task must end in a correct state.

use std::process::{Child, Stdio};
use std::time::Duration;

use crate::helpers::Harness;

fn spawn_worker(h: &Harness, failpoint: Option<&str>) -> Child {
    spawn_worker_on(h, failpoint, &[])
}

/// The worker binary against the harness's gateway; the `site` variables override the sim.
pub(crate) fn spawn_worker_on(
    h: &Harness,
    failpoint: Option<&str>,
    site: &[(&str, &str)],
) -> Child {
    let mut c = h.worker_command("crash-worker");
    c.envs(site.iter().copied());
    c.stdout(Stdio::null()).stderr(Stdio::null());
    if let Some(f) = failpoint {
        c.env("RAKUTEN_WORKER_FAILPOINT", f);
    }
    c.spawn().expect("spawn trading-worker")
}

pub(crate) async fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    test_util::wait_for_exit(
        child,
        Duration::from_secs(30),
        "the worker, to hit its failpoint",
    )
    .await
}

pub(crate) async fn wait_terminal(h: &Harness, task_id: &str) -> serde_json::Value {
    test_util::wait_for("the task to end", Duration::from_secs(30), async || {
        let t = h.task(task_id).await;
        if matches!(
            t["status"].as_str(),
            Some("succeeded" | "failed" | "needs_human")
        ) {
            Ok(t)
        } else {
            Err(t)
        }
    })
    .await
}

async fn crash_then_restart(failpoint: &str, regrant: bool) {
    let h = Harness::new().await;
    let task_id = format!("t-crash-{}", failpoint.replace(':', "-"));
    h.submit_tea(&task_id).await;
    let mut first = spawn_worker(&h, Some(failpoint));
    let status = wait_exit(&mut first).await;
    assert!(
        !status.success(),
        "{failpoint}: the worker must have aborted"
    );
    assert!(h.logged_submissions().len() <= 1);
    let mut second = spawn_worker(&h, None);
    let t = wait_terminal(&h, &task_id).await;
    let _ = second.kill();
    let _ = second.wait();
    let subs = h.logged_submissions();
    assert_eq!(
        subs.len(),
        1,
        "{failpoint}: exactly one submission: {subs:?}"
    );
    assert_eq!(subs[0]["note"], task_id.as_str());
    assert_eq!(t["status"], "succeeded", "{failpoint}: {t}");
    assert_eq!(t["latest_state"], "paid", "{failpoint}: {t}");
    if regrant {
        assert!(
            t["lease_count"].as_i64().unwrap() >= 2,
            "the restart went through a new grant"
        );
    }
}

#[tokio::test]
async fn crash_before_submit_then_restart_orders_exactly_once() {
    crash_then_restart("before_submit", true).await;
}

#[tokio::test]
async fn crash_after_submit_then_restart_finds_the_order_and_orders_exactly_once() {
    crash_then_restart("after_submit", true).await;
}

#[tokio::test]
async fn crash_before_report_then_restart_orders_exactly_once() {
    crash_then_restart("before_report", true).await;
}

#[tokio::test]
async fn crash_after_report_then_restart_orders_exactly_once() {
    crash_then_restart("after_report", true).await;
}

/// The journal finished the task but the terminal report never left: the restarted worker
/// delivers it from the outbox at start-up (the lease is still its own), without a new grant.
#[tokio::test]
async fn crash_before_the_terminal_report_then_restart_delivers_it_from_the_outbox() {
    crash_then_restart("before_report:paid", false).await;
}
