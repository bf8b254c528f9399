//! Running one of the workspace's binaries as a user would, for the tests of its start-up
//! (settings refused, `--help`), of its stop, and of its behaviour under a stepped clock
//! (libfaketime).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output};
use std::time::Duration;

use crate::wait::poll_within;

/// Waits for a service `child` started on port 0 to write the address it listens on to
/// `addr_file` (its `…_ADDR_FILE` setting, written whole by a rename) and returns it
/// (`127.0.0.1:PORT`). `name` names the process in a failure.
///
/// # Panics
/// The child exits first (its status is named), or `within` passes (the child is killed).
pub async fn wait_for_addr_file(
    child: &mut Child,
    addr_file: &Path,
    within: Duration,
    name: &str,
) -> String {
    let seen = poll_within(within, async || {
        if let Ok(addr) = std::fs::read_to_string(addr_file)
            && !addr.trim().is_empty()
        {
            return Ok(addr.trim().to_owned());
        }
        match child.try_wait().expect("try_wait") {
            Some(status) => panic!("{name} exited before listening: {status}"),
            None => Err(()),
        }
    })
    .await;
    seen.unwrap_or_else(|()| {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "{name} did not come up within {within:?} (no {})",
            addr_file.display()
        )
    })
}

/// Waits for `child` to exit and returns its status; `what` says what it was asked
/// ("card-polling after SIGTERM").
///
/// # Panics
/// `within` passes first: the child is killed, and the message names `what`.
pub async fn wait_for_exit(child: &mut Child, within: Duration, what: &str) -> ExitStatus {
    poll_within(within, async || {
        child.try_wait().expect("try_wait").ok_or(())
    })
    .await
    .unwrap_or_else(|()| {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{what}: still running after {within:?}")
    })
}

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

/// Runs `program` with `args` and only `var=value` in its environment (`case` is
/// `(var, value, part, message)`), and checks that the value is refused the way a secret must
/// be (D-secret-settings-never-echoed): exit code 2, a first stderr line starting with `message`, and neither `value`
/// nor `part` (a distinctive piece of it) anywhere on stdout or stderr.
///
/// # Panics
/// Any of those checks fails (the message names the variable), or the program cannot start.
pub fn assert_secret_refused(program: &str, args: &[&str], case: (&str, &str, &str, &str)) {
    let (var, value, part, message) = case;
    let out = run_in_clean_env(program, &[(var, value)], args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{var}: {stderr}");
    let first = stderr.lines().next().unwrap_or_default();
    assert!(first.starts_with(message), "{var}: {stderr}");
    for leak in [value, part] {
        assert!(!stdout.contains(leak), "{var} leaked to stdout: {stdout}");
        assert!(!stderr.contains(leak), "{var} leaked to stderr: {stderr}");
    }
}

/// Runs `program serve` with `env` (the rest of a valid start-up) and each unusable TLS file in
/// turn — a missing certificate, a certificate that is not PEM, a missing key, next to the usable
/// pair `cert`/`key` — and checks each is refused as a bad setting (D-exit-2-or-3): exit code 2
/// and stderr starting `error: invalid setting --tls-cert-path / {prefix}_TLS_CERT_PATH: ` (or
/// the key's). `dir` receives the unusable files.
///
/// # Panics
/// Any case is not refused that way, or the program cannot start.
pub fn assert_tls_files_refused(
    program: &str,
    env: &[(&str, &str)],
    prefix: &str,
    (cert, key): (&Path, &Path),
    dir: &Path,
) {
    let missing = dir.join("missing.pem");
    let garbage = dir.join("garbage.pem");
    std::fs::write(&garbage, "not a PEM file").expect("write garbage.pem");
    let cert_var = format!("{prefix}_TLS_CERT_PATH");
    let key_var = format!("{prefix}_TLS_KEY_PATH");
    let cases = [
        (missing.as_path(), key, "--tls-cert-path", &cert_var),
        (garbage.as_path(), key, "--tls-cert-path", &cert_var),
        (cert, missing.as_path(), "--tls-key-path", &key_var),
    ];
    for (c, k, flag, var) in cases {
        let (c, k) = (
            c.to_str().expect("utf-8 path"),
            k.to_str().expect("utf-8 path"),
        );
        let mut all = env.to_vec();
        all.extend([(cert_var.as_str(), c), (key_var.as_str(), k)]);
        let out = run_in_clean_env(program, &all, &["serve"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{c} {k}: {stderr}");
        assert!(
            stderr.starts_with(&format!("error: invalid setting {flag} / {var}: ")),
            "{c} {k}: {stderr}"
        );
    }
}

/// Runs `program serve` with only `env` and checks that start-up is refused the way a problem
/// of the operator's configuration or environment must be (D-exit-2-or-3, D-setting-refusal-one-line): exit code 2, and
/// stderr exactly one line, `error: …` holding each of `expected` (the variable, the address or
/// file, what to do); the error is not repeated on stdout (the logs). Returns that line.
///
/// # Panics
/// Any of those checks fails, or the program cannot start.
pub fn assert_setup_refused(program: &str, env: &[(&str, &str)], expected: &[&str]) -> String {
    assert_output_refused(&run_in_clean_env(program, env, &["serve"]), expected)
}

/// [`assert_setup_refused`] for what a restart may fix — a database or Redis that does not answer,
/// a port in use: exit code 3, which supervisors restart (D-exit-2-or-3); the same one line.
///
/// # Panics
/// As [`assert_setup_refused`].
pub fn assert_setup_unavailable(program: &str, env: &[(&str, &str)], expected: &[&str]) -> String {
    assert_exit_line(&run_in_clean_env(program, env, &["serve"]), 3, expected)
}

/// The checks of [`assert_setup_refused`] on a finished run's `out`.
///
/// # Panics
/// As [`assert_setup_refused`].
pub fn assert_output_refused(out: &Output, expected: &[&str]) -> String {
    assert_exit_line(out, 2, expected)
}

/// Exit `code` and one `error: …` line on stderr holding each of `expected`, not repeated on stdout.
fn assert_exit_line(out: &Output, code: i32, expected: &[&str]) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    let line = stderr.trim_end();
    assert!(
        line.starts_with("error: ") && !line.contains('\n'),
        "not one error line: {stderr}"
    );
    for e in expected {
        assert!(line.contains(e), "{e:?} not in: {line}");
    }
    let reason = line.trim_start_matches("error: ");
    let tail: String = reason
        .chars()
        .rev()
        .take(40)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    assert!(
        !stdout.contains(&tail),
        "the error is printed twice, on stdout too: {stdout}"
    );
    line.to_owned()
}

/// Runs `program` like [`run_in_clean_env`], as user `nobody` (65534) when this test runs as
/// root, through `setpriv` (util-linux): root writes any file whatever its mode, so a read-only
/// file is read-only only to another user. Files the program must reach need to be open to
/// others (a folder `0o777`, a file `0o444`).
///
/// # Panics
/// The program (or `setpriv`, under root) cannot be started.
pub fn run_unprivileged(program: &str, env: &[(&str, &str)], args: &[&str]) -> Output {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root {
        return run_in_clean_env(program, env, args);
    }
    let mut all = vec![
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--",
        program,
    ];
    all.extend_from_slice(args);
    let mut cmd = Command::new("setpriv");
    cmd.env_clear();
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.args(&all).output().unwrap_or_else(|e| {
        panic!("run setpriv {program} (util-linux's setpriv is needed under root): {e}")
    })
}

/// libfaketime's multi-threaded preload library (Debian package `faketime` / `libfaketime`,
/// which `.ci/run` installs), or a loud failure: the clock-step tests never skip. Preloaded
/// directly rather than through the `faketime` wrapper, which forks (the child would outlive a
/// kill of the wrapper).
///
/// # Panics
/// `/usr/bin/faketime` or the library is missing.
pub fn libfaketime() -> String {
    let found = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|d| d.path().join("faketime/libfaketimeMT.so.1"))
        .chain([PathBuf::from("/usr/lib/faketime/libfaketimeMT.so.1")])
        .find(|p| p.exists());
    match found {
        Some(p) if Path::new("/usr/bin/faketime").exists() => p.display().to_string(),
        _ => panic!(
            "libfaketime is missing (no /usr/bin/faketime or /usr/lib/*/faketime/\
             libfaketimeMT.so.1): the libfaketime tests need it; install the \
             Debian package `faketime` (apt-get install faketime; .ci/run does)"
        ),
    }
}

/// Makes `db` a migrated SQLite database that only its owner can read: a start of `program serve`
/// with `env` and `db_var` set to `db` that stops at a port this function holds (`port_var`), its
/// WAL folded in and removed, the file then made 0444 (its folder 0777, so `nobody` reaches it).
/// Then starts `program serve` as `nobody` on port 0 and checks the refusal names the file as
/// read-only, never "busy" (D-exit-2-or-3). Returns the error line.
///
/// # Panics
/// Any step fails, or the refusal is not one exit-2 line naming the file read-only.
pub async fn assert_read_only_database_refused(
    program: &str,
    env: &[(&str, &str)],
    (port_var, db_var): (&str, &str),
    dir: &std::path::Path,
    file: &str,
) -> String {
    use sqlx::{ConnectOptions, Connection};
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let db = dir.join(file);
    let db_str = db.to_str().unwrap();
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    let mut started = env.to_vec();
    started.extend([(port_var, port.as_str()), (db_var, db_str)]);
    let _ = run_in_clean_env(program, &started, &["serve"]);
    let mut c = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&db)
        .connect()
        .await
        .unwrap();
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&mut c)
        .await
        .unwrap();
    c.close().await.unwrap();
    for side in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(dir.join(format!("{file}{side}")));
    }
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    let mut unprivileged = env.to_vec();
    unprivileged.extend([(port_var, "0"), (db_var, db_str)]);
    let out = run_unprivileged(program, &unprivileged, &["serve"]);
    let line = assert_output_refused(
        &out,
        &[&format!(
            "the SQLite database {} ({db_var}) is read-only",
            db.display()
        )],
    );
    assert!(!line.contains("busy"), "{line}");
    line
}

/// Starts `program` on an SQLite file `file` in `dir` whose `_sqlx_migrations` holds a version no
/// release of ours has (another application's migration) and asserts exit 2 with one line naming
/// `db_var`, the version and the way out (D-exit-2-or-3). Returns the line.
///
/// # Panics
/// When the file cannot be prepared or the start-up is not refused so.
pub async fn assert_foreign_migration_refused(
    program: &str,
    env: &[(&str, &str)],
    (port_var, db_var): (&str, &str),
    dir: &std::path::Path,
    file: &str,
) -> String {
    use sqlx::{ConnectOptions, Connection};
    let db = dir.join(file);
    let mut c = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&db)
        .create_if_missing(true)
        .connect()
        .await
        .unwrap();
    // sqlx's own bookkeeping table, as another application's migrator leaves it.
    for sql in [
        "CREATE TABLE _sqlx_migrations (version BIGINT PRIMARY KEY, description TEXT NOT NULL, \
         installed_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, success BOOLEAN NOT NULL, \
         checksum BLOB NOT NULL, execution_time BIGINT NOT NULL)",
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (20991231000000, 'another application', TRUE, X'00', 1)",
    ] {
        sqlx::query(sql).execute(&mut c).await.unwrap();
    }
    c.close().await.unwrap();
    let mut started = env.to_vec();
    let db_str = db.to_str().unwrap();
    started.extend([(port_var, "0"), (db_var, db_str)]);
    let line = assert_setup_refused(
        program,
        &started,
        &[
            &format!("the database ({db_var}) holds migration 20991231000000"),
            "its own database file",
        ],
    );
    // PostgreSQL's way out (a schema of its own) is no way out for an SQLite file.
    assert!(!line.contains("search_path"), "{line}");
    line
}
