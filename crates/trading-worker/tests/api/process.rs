//! The `trading-worker` process at its edges: a bad setting stops it at start with one line that
//! names the flag and the variable (exit 2, no backtrace); a clean stop (SIGTERM) leaves the whole
//! journal in the database file, and `VACUUM INTO` copies a live journal completely.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use rakuten_types::TaskId;
use trading_worker::journal::Journal;

use crate::helpers::Harness;

fn bad_start(h: &Harness, env: &[(&str, &str)]) -> Output {
    let mut c = h.worker_command("process-worker");
    c.env("RUST_BACKTRACE", "1");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run trading-worker")
}

#[tokio::test]
async fn a_bad_setting_prints_the_flag_and_the_variable_and_exits_2_without_a_backtrace() {
    let h = Harness::new().await;
    let out = bad_start(&h, &[("RAKUTEN_LEASE_RENEW_INTERVAL_SECONDS", "0")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--renew-interval-seconds / RAKUTEN_LEASE_RENEW_INTERVAL_SECONDS"),
        "{err}"
    );
    assert!(!err.to_lowercase().contains("backtrace"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    // The rakuten site without a scraper (D-scraper-url-required).
    let out = bad_start(&h, &[("RAKUTEN_SITE", "rakuten")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--scraper-base-url / RAKUTEN_SCRAPER_BASE_URL"),
        "{err}"
    );

    // A value clap itself cannot parse: exit 2, and the variable is named too.
    let out = bad_start(&h, &[("RAKUTEN_VERIFY_MAX_PAGES", "many")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("RAKUTEN_VERIFY_MAX_PAGES"), "{err}");
}

#[tokio::test]
async fn a_clean_stop_leaves_the_whole_journal_in_the_database_file() {
    let h = Harness::new().await;
    h.submit_tea("t-backup").await;
    // Its logs go into pipes nobody reads any more (`trading-worker 2>&1 | head -1` after `head`
    // has exited). A failed log write must not panic the signal task (the worker would then
    // ignore SIGTERM); it must work on and stop cleanly all the same.
    let mut child = h
        .worker_command("process-worker")
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn trading-worker");
    drop(child.stdout.take());
    drop(child.stderr.take());
    test_util::wait_until("the task to finish", Duration::from_secs(30), async || {
        h.task("t-backup").await["status"] == "succeeded"
    })
    .await;

    // While it runs: VACUUM INTO (the documented online backup) copies the whole journal.
    let live = h.dir.path().join("live-copy.db");
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", h.db_path.display()))
        .await
        .expect("open the live journal");
    sqlx::query("VACUUM INTO ?")
        .bind(live.display().to_string())
        .execute(&pool)
        .await
        .expect("VACUUM INTO");
    pool.close().await;
    let copy = Journal::open(&live).await.expect("open the copy");
    assert!(
        copy.order_get(&TaskId::parse("t-backup").unwrap())
            .await
            .unwrap()
            .is_some()
    );

    let stopped = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(stopped.success());
    let status = test_util::wait_for_exit(
        &mut child,
        Duration::from_secs(15),
        "trading-worker after SIGTERM",
    )
    .await;
    assert!(status.success(), "{status}");
    let wal = h.db_path.with_file_name(format!(
        "{}-wal",
        h.db_path.file_name().unwrap().to_string_lossy()
    ));
    let wal_len = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    assert_eq!(
        wal_len, 0,
        "the WAL still holds journal pages after a clean stop"
    );

    // A plain file copy of the database file alone is now complete.
    let copied = h.dir.path().join("file-copy.db");
    std::fs::copy(&h.db_path, &copied).expect("copy");
    let copy = Journal::open(&copied).await.expect("open the file copy");
    let row = copy
        .order_get(&TaskId::parse("t-backup").unwrap())
        .await
        .unwrap()
        .expect("the task is in the copied file");
    assert_eq!(row.state.as_str(), "paid");
}
