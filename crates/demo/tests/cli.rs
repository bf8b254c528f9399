//! `demo --help` and `demo --version` answer and exit without running the demo (they used to run
//! it whole and leave another `data/demo-…` behind).

use std::process::Command;

fn run_in_empty_dir(arg: &str) -> (std::process::Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_demo"))
        .arg(arg)
        .current_dir(dir.path())
        .output()
        .expect("run demo");
    (out, dir)
}

#[test]
fn help_and_version_answer_without_running_the_demo() {
    for (arg, want) in [("--help", "Usage: demo"), ("--version", "demo ")] {
        let (out, dir) = run_in_empty_dir(arg);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{arg}: {stdout}");
        assert!(stdout.contains(want), "{arg}: {stdout}");
        assert!(!stdout.contains("=="), "{arg} ran the demo: {stdout}");
        assert!(!dir.path().join("data").exists(), "{arg} created data/");
    }
}

#[test]
fn an_unknown_argument_is_refused_with_exit_2() {
    let (out, dir) = run_in_empty_dir("--orders=3");
    assert_eq!(out.status.code(), Some(2));
    assert!(!dir.path().join("data").exists());
}

#[test]
fn the_env_example_lists_every_setting_of_help_and_nothing_else() {
    rakuten_cli::assert_env_example_matches_help(
        env!("CARGO_BIN_EXE_demo"),
        &[],
        concat!(env!("CARGO_MANIFEST_DIR"), "/.env.example"),
        &[],
    );
}
