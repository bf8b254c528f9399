//! The README's runbook ("An alert fired: what to do"), walked through: its drill block is taken
//! from the README verbatim and run twice by bash against the real binary, started with the
//! drill's settings (2 s lease TTL, 0.2 s ticks) and a webhook receiver on 127.0.0.1:0. Each paste
//! must exit 0, and the receiver must get one `raised` and one `cleared` per pasted task.

use std::process::Command;

use crate::binary::Binary;
use crate::receiver::Receiver;

const README: &str = include_str!("../../README.md");

/// The shell block between `<!-- runbook:start -->` and `<!-- runbook:end -->`.
fn drill_block() -> String {
    let start = README
        .find("<!-- runbook:start -->")
        .expect("runbook start marker");
    let end = README
        .find("<!-- runbook:end -->")
        .expect("runbook end marker");
    let block = &README[start..end];
    let body = block
        .split_once("```sh\n")
        .expect("a ```sh block")
        .1
        .rsplit_once("```")
        .expect("the block's end")
        .0;
    body.to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_runbook_walks_a_stale_task_from_alert_to_resolution_twice() {
    let rx = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gw.db");
    let server = Binary::start(
        dir.path(),
        &[
            ("RAKUTEN_API_TOKEN", "drill-token-0123456789"),
            ("RAKUTEN_GATEWAY_DB_PATH", db.to_str().unwrap()),
            ("RAKUTEN_LEASE_TTL_SECONDS", "2"),
            ("RAKUTEN_ALERT_WEBHOOK_URLS", &rx.url),
        ],
    )
    .await;
    let gw = server.base.clone();
    let bin = std::path::PathBuf::from(env!("CARGO_BIN_EXE_order-gateway"));

    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let script = format!("set -euo pipefail\n{}", drill_block());
    for paste in 1..=2 {
        let out = tokio::task::spawn_blocking({
            let (script, path, gw, cwd) = (
                script.clone(),
                path.clone(),
                gw.clone(),
                dir.path().to_owned(),
            );
            move || {
                Command::new("bash")
                    .arg("-c")
                    .arg(&script)
                    .current_dir(cwd)
                    .env("PATH", path)
                    .env("RAKUTEN_API_TOKEN", "drill-token-0123456789")
                    .env("GW", &gw)
                    .env("RAKUTEN_GATEWAY_URL", &gw)
                    .env_remove("RAKUTEN_OPS_TOKEN")
                    .output()
                    .expect("bash")
            }
        })
        .await
        .unwrap();
        assert!(
            out.status.success(),
            "paste {paste} failed: {}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // Deliveries run on the gateway's own tick: wait for both clears.
    test_util::wait_for(
        "one raised and one cleared task_stale event per pasted task",
        std::time::Duration::from_secs(20),
        async || {
            let events = rx.delivered();
            let stale: Vec<_> = events
                .iter()
                .filter(|e| e["kind"] == "task_stale")
                .collect();
            let mut tasks: Vec<&str> = stale
                .iter()
                .map(|e| e["subject"].as_str().unwrap())
                .collect();
            tasks.sort();
            tasks.dedup();
            let raised = stale.iter().filter(|e| e["state"] == "raised").count();
            let cleared = stale.iter().filter(|e| e["state"] == "cleared").count();
            if tasks.len() == 2 && raised == 2 && cleared == 2 {
                Ok(())
            } else {
                Err(format!("{events:?}"))
            }
        },
    )
    .await;
    drop(server);
}
