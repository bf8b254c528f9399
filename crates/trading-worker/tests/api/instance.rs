//! One worker per journal (D-worker-journal-lock): a second worker on the same journal — in-process or a
//! second `trading-worker` process — refuses to start, naming the lock file and the worker id,
//! and starts once the first is gone.

use std::process::{Child, Stdio};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use trading_worker::Worker;
use trading_worker::instance_lock::lock_path;

use crate::helpers::Harness;

fn worker_process(h: &Harness, stderr: Stdio) -> Child {
    h.worker_command("twin-worker")
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("spawn trading-worker")
}

async fn until(what: &str, mut ok: impl FnMut() -> bool) {
    test_util::wait_until(what, Duration::from_secs(30), async || ok()).await;
}

#[tokio::test]
async fn a_second_worker_on_the_same_journal_is_refused_until_the_first_stops() {
    let h = Harness::new().await;
    let first = h.worker().await;
    let second = Worker::build(
        h.settings().validate().unwrap(),
        std::sync::Arc::new(rakuten_types::SystemClock),
        CancellationToken::new(),
    )
    .await
    .expect_err("two workers on one journal");
    let msg = format!("{second:#}");
    assert!(
        msg.contains(&lock_path(&h.db_path).display().to_string()),
        "{msg}"
    );
    assert!(msg.contains("test-worker"), "{msg}");
    drop(first);
    // The first worker is gone: the lock is free and the next one works.
    let w = h.worker().await;
    h.submit_tea("t-after-lock").await;
    crate::helpers::run_until_handled(&w).await;
}

#[tokio::test]
async fn a_second_worker_process_on_the_same_journal_exits_with_a_clear_error() {
    let h = Harness::new().await;
    let lock = lock_path(&h.db_path);
    let mut first = worker_process(&h, Stdio::null());
    let pid = first.id();
    until("the first worker's lock note", || {
        std::fs::read_to_string(&lock).is_ok_and(|s| s.contains(&format!("pid {pid}")))
    })
    .await;

    let twin = worker_process(&h, Stdio::piped());
    let out = tokio::task::spawn_blocking(move || twin.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the twin must refuse to start: {err}"
    );
    assert!(err.contains(&lock.display().to_string()), "{err}");
    assert!(err.contains("twin-worker"), "{err}");
    assert!(err.contains(&format!("pid {pid}")), "{err}");
    assert!(
        first.try_wait().unwrap().is_none(),
        "the first keeps running"
    );

    // Killed (no clean shutdown): the OS releases the lock; a new process takes the task.
    first.kill().unwrap();
    first.wait().unwrap();
    let mut next = worker_process(&h, Stdio::null());
    h.submit_tea("t-after-kill").await;
    test_util::wait_for("the task to finish", Duration::from_secs(30), async || {
        let t = h.task("t-after-kill").await;
        if t["status"] == "succeeded" {
            return Ok(());
        }
        assert!(
            next.try_wait().unwrap().is_none(),
            "the next worker must run"
        );
        Err(t)
    })
    .await;
    let _ = next.kill();
    let _ = next.wait();
}
