//! `order-gateway ops`: the built binary against a spawned gateway; tables,
//! `--json`, the token from `.env`, and the documented exit codes.

use std::path::Path;

use serde_json::{Value, json};

use crate::helpers::{TOKEN, TestApp, spawn_app, spawn_app_with};

pub(crate) struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.stdout))
    }
}

/// Runs the binary in `dir` with only the given `RAKUTEN_*` variables.
async fn ops_in(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Run {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_order-gateway"));
    cmd.arg("ops").args(args).current_dir(dir);
    for (k, _) in std::env::vars() {
        if k.starts_with("RAKUTEN_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("RUST_LOG", "warn");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().await.expect("run order-gateway ops");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub(crate) async fn ops(app: &TestApp, args: &[&str]) -> Run {
    ops_in(
        app._tempdir.path(),
        &[
            ("RAKUTEN_GATEWAY_URL", &app.address),
            ("RAKUTEN_OPS_TOKEN", TOKEN),
        ],
        args,
    )
    .await
}

#[tokio::test]
async fn ops_tasks_lists_tasks_as_a_table_and_as_json_filtered_by_status() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    app.submit("po-2").await.assert_ok();

    let r = ops(&app, &["tasks"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("po-1") && r.stdout.contains("po-2"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("leased") && r.stdout.contains("w1"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("1–2 of 2 task(s)"), "{}", r.stdout);
    // Nothing to show says so, instead of an empty table and "0–0 of 0".
    let r = ops(&app, &["tasks", "--status", "stale"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "no task matches\n");

    let r = ops(&app, &["tasks", "--status", "queued", "--json"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let page = r.json();
    assert_eq!(page["total"], 1);
    assert_eq!(page["items"][0]["task_id"], "po-2");
}

#[tokio::test]
async fn ops_show_prints_the_history_with_evidence_and_the_known_state() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    app.report(
        "po-1",
        json!({"worker_id": "w1", "state": "ordered", "evidence_ref": "po-1/03-submit", "site_order_id": "ORD-77"}),
    )
    .await
    .assert_ok();

    let r = ops(&app, &["show", "po-1"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    for want in [
        "po-1/03-submit",
        "ORD-77",
        "ordered",
        "known state",
        "history (1 report(s)",
    ] {
        assert!(r.stdout.contains(want), "missing {want:?} in\n{}", r.stdout);
    }
    let d = ops(&app, &["show", "po-1", "--json"]).await.json();
    assert_eq!(d["latest_state"], "ordered");
    assert_eq!(d["history"][0]["evidence_ref"], "po-1/03-submit");
}

/// The table view escaped a stored U+009B (a terminal's one-byte CSI) and U+202E, but
/// `--json` printed them raw, because JSON escapes only U+0000–U+001F.
#[tokio::test]
async fn ops_show_json_escapes_stored_text_a_terminal_would_obey() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    app.report(
        "po-1",
        json!({"worker_id": "w1", "state": "in_cart", "detail": "site said"}),
    )
    .await
    .assert_ok();
    // The API refuses such text now; a row written before the checks, or by hand, still has it.
    let detail = "site said \u{9b}2J \u{202e}gnp.exe\u{85}end";
    app.raw_sql(
        "UPDATE task_reports SET detail = 'site said ' || char(155) || '2J ' || char(8238) \
         || 'gnp.exe' || char(133) || 'end'",
    )
    .await;

    let r = ops(&app, &["show", "po-1", "--json"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        !r.stdout
            .chars()
            .any(|c| (c.is_control() && c != '\n') || c == '\u{202e}'),
        "{:?}",
        r.stdout
    );
    assert!(r.stdout.contains(r"\u009b2J \u202egnp"), "{}", r.stdout);
    // The same value still reaches a script.
    assert_eq!(r.json()["history"][0]["detail"], detail);
}

#[tokio::test]
async fn ops_reclaim_hands_a_stale_task_to_the_named_worker_and_refuses_a_second_time() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    app.expire_leases();
    app.sweep().await;
    assert_eq!(app.status_of("po-1").await, "stale");

    let args = [
        "reclaim",
        "po-1",
        "--worker",
        "w2",
        "--reason",
        "checked the site: no order",
    ];
    let r = ops(&app, &args).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("task po-1 reclaimed for worker w2: its next lease poll receives this grant"),
        "{}",
        r.stdout
    );
    // Worker w2 never polled this gateway (a typo would look the same), so it says so.
    assert!(
        r.stdout
            .contains("note: worker w2 has never polled this gateway"),
        "{}",
        r.stdout
    );
    let t = app.task("po-1").await;
    assert_eq!(t.data()["status"], "leased");
    assert_eq!(t.data()["lease_owner"], "w2");

    // Not stale any more: refused (6003), exit 1, the reason on standard error.
    let r = ops(&app, &args).await;
    assert_eq!(r.code, 1, "{} {}", r.stdout, r.stderr);
    assert!(r.stderr.contains("6003"), "{}", r.stderr);
    assert!(r.stdout.is_empty());

    // w2 never came; stale again, to w1, which has polled: no note.
    app.expire_leases();
    app.sweep().await;
    let r = ops(
        &app,
        &[
            "reclaim",
            "po-1",
            "--worker",
            "w1",
            "--reason",
            "w2 is away",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stdout.contains("note:"), "{}", r.stdout);
}

#[tokio::test]
async fn ops_exit_codes_say_what_went_wrong() {
    let app = spawn_app_with(|s| {
        s.worker_tokens = Some("pc-1:worker-token-0123456789".parse().unwrap());
    })
    .await;
    let dir = app._tempdir.path();
    let url = app.address.as_str();
    // 3: no such task.
    assert_eq!(ops(&app, &["show", "nope"]).await.code, 3);
    // 4: unknown token, and a token whose role may not list tasks.
    for token in ["wrong-token", "worker-token-0123456789"] {
        let r = ops_in(
            dir,
            &[("RAKUTEN_GATEWAY_URL", url), ("RAKUTEN_OPS_TOKEN", token)],
            &["tasks"],
        )
        .await;
        assert_eq!(r.code, 4, "{token}: {}", r.stderr);
    }
    // 2: no token at all; a bad --status; a missing --reason (clap).
    assert_eq!(
        ops_in(dir, &[("RAKUTEN_GATEWAY_URL", url)], &["tasks"])
            .await
            .code,
        2
    );
    assert_eq!(ops(&app, &["tasks", "--status", "lost"]).await.code, 2);
    assert_eq!(
        ops(&app, &["reclaim", "po-1", "--worker", "w"]).await.code,
        2
    );
    // 2, not 5: a gateway URL that is no URL is a usage error naming
    // its setting (D-exit-2-or-3).
    for bad in ["notaurl", "ftp://127.0.0.1/"] {
        let r = ops_in(
            dir,
            &[("RAKUTEN_GATEWAY_URL", bad), ("RAKUTEN_OPS_TOKEN", TOKEN)],
            &["tasks"],
        )
        .await;
        assert_eq!(r.code, 2, "{bad}: {}", r.stderr);
        assert!(
            r.stderr
                .contains("invalid setting --url / RAKUTEN_GATEWAY_URL: "),
            "{bad}: {}",
            r.stderr
        );
    }
    // 5: nothing listens there.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let r = ops_in(
        dir,
        &[
            ("RAKUTEN_GATEWAY_URL", &closed),
            ("RAKUTEN_OPS_TOKEN", TOKEN),
        ],
        &["tasks"],
    )
    .await;
    assert_eq!(r.code, 5, "{}", r.stderr);
    assert!(r.stderr.contains("unavailable"), "{}", r.stderr);
}

#[tokio::test]
async fn ops_reads_the_gateway_and_token_from_a_dot_env_file() {
    let app = spawn_app().await;
    app.submit("po-1").await.assert_ok();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(".env"),
        format!(
            "RAKUTEN_GATEWAY_URL={}\nRAKUTEN_API_TOKEN={TOKEN}\n",
            app.address
        ),
    )
    .unwrap();
    let r = ops_in(dir.path(), &[], &["tasks", "--json"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["items"][0]["task_id"], "po-1");
}
