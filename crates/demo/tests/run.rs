//! The demo run as the README gives it (`cargo run -p demo`), in an empty directory.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Every run left `data/demo-…/trading.db.lock` behind, the trading
/// worker's instance lock, which the demo's own run directory does not need once the worker has
/// stopped (D-demo-removes-lock-files).
#[test]
fn a_demo_run_succeeds_and_leaves_no_lock_file_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_demo"))
        .current_dir(dir.path())
        .env("RUST_LOG", "warn")
        .output()
        .expect("run demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left = files(&dir.path().join("data"));
    assert!(
        left.iter().any(|p| p.ends_with("trading.db")),
        "no journal: {left:?}"
    );
    let locks: Vec<_> = left
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "lock"))
        .collect();
    assert!(locks.is_empty(), "left behind: {locks:?}");
}
