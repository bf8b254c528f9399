//! Running one of the workspace's binaries as a user would, for the tests of its start-up
//! (settings refused, `--help`).

use std::process::{Command, Output};

/// Runs `program` (a test's `env!("CARGO_BIN_EXE_<name>")`) with `args` in an environment
/// holding only `env`, and waits for it; stdout and stderr are captured.
///
/// The environment is cleared so that only the case's variables decide what the binary
/// accepts or refuses: a `RAKUTEN_*` variable of the developer's shell cannot change the
/// outcome.
///
/// # Panics
/// The program cannot be started (not built, not executable).
pub fn run_in_clean_env(program: &str, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new(program);
    cmd.env_clear();
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"))
}
