//! Start-up refusals (D-exit-2-or-3, D-setting-refusal-one-line): what the operator fixes in the
//! configuration or the environment — a database or Redis that does not answer, a Redis CA file
//! that is missing, the listening port in use, a read-only database file, a number that is no
//! number, a required setting left out — stops start-up with one line on stderr that names the
//! variable, printed once: exit code 3 for what a restart may fix (a server that does not answer,
//! a port in use; D-exit-2-or-3), 2 otherwise.

use test_util::{
    assert_output_refused, assert_setup_refused, assert_setup_unavailable, run_in_clean_env,
};

const BIN: &str = env!("CARGO_BIN_EXE_card-polling");
const TOKEN: (&str, &str) = ("RAKUTEN_POLL_ADMIN_TOKEN", "startup-admin-token-0123");

/// A port on loopback that nobody listens on (bound, then released).
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn a_database_or_redis_that_does_not_answer_or_a_busy_port_exits_3_naming_the_variable_so_a_supervisor_retries()
 {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("polls.db");
    let db = db.to_str().unwrap();
    let pg = format!("postgres://u:Pa55@127.0.0.1:{}/polls", closed_port());
    assert_setup_unavailable(
        BIN,
        &[
            TOKEN,
            ("RAKUTEN_POLL_PORT", "0"),
            ("RAKUTEN_POLL_DB_URL", &pg),
        ],
        &["(RAKUTEN_POLL_DB_URL)", "opening the PostgreSQL database"],
    );
    let redis = format!("redis://127.0.0.1:{}/", closed_port());
    assert_setup_unavailable(
        BIN,
        &[
            TOKEN,
            ("RAKUTEN_POLL_PORT", "0"),
            ("RAKUTEN_POLL_DB_PATH", db),
            ("RAKUTEN_POLL_HINT_CHANNEL", &redis),
        ],
        &[
            "connecting the Redis hint channel",
            "(RAKUTEN_POLL_HINT_CHANNEL)",
        ],
    );
    let missing = dir.path().join("no-ca.pem");
    assert_setup_refused(
        BIN,
        &[
            TOKEN,
            ("RAKUTEN_POLL_PORT", "0"),
            ("RAKUTEN_POLL_DB_PATH", db),
            ("RAKUTEN_POLL_HINT_CHANNEL", "rediss://127.0.0.1:6379/"),
            ("RAKUTEN_POLL_REDIS_CA_PATH", missing.to_str().unwrap()),
        ],
        &[
            "error: invalid setting --redis-ca-path / RAKUTEN_POLL_REDIS_CA_PATH: cannot read",
            "no-ca.pem",
        ],
    );
    // The port is held by this test: whatever binds it first, it is in use.
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    assert_setup_unavailable(
        BIN,
        &[
            TOKEN,
            ("RAKUTEN_POLL_PORT", &port),
            ("RAKUTEN_POLL_DB_PATH", db),
        ],
        &[
            &format!("cannot listen on 127.0.0.1:{port} (RAKUTEN_POLL_PORT)"),
            "already in use",
        ],
    );
}

#[test]
fn a_number_that_is_no_number_or_a_missing_setting_is_one_line_naming_the_variable() {
    let line = assert_setup_refused(BIN, &[TOKEN, ("RAKUTEN_POLL_SHARDS", "lots")], &[]);
    assert_eq!(
        line,
        "error: invalid setting --shards / RAKUTEN_POLL_SHARDS: \"lots\" is not a whole number; \
         it takes a whole number from 1 to 1024"
    );
    let line = assert_setup_refused(BIN, &[TOKEN, ("RAKUTEN_POLL_PORT", "70000")], &[]);
    assert_eq!(
        line,
        "error: invalid setting --port / RAKUTEN_POLL_PORT: \"70000\" is out of range; it takes a \
         whole number from 0 to 65535"
    );
    // An address file in a folder that does not exist left the service listening
    // without ever writing it; a script waiting for the file waited forever.
    let line = assert_setup_refused(
        BIN,
        &[TOKEN, ("RAKUTEN_POLL_ADDR_FILE", "/nonexistent-dir/addr")],
        &[],
    );
    assert_eq!(
        line,
        "error: invalid setting --addr-file / RAKUTEN_POLL_ADDR_FILE: the folder /nonexistent-dir \
         does not exist (it is not created)"
    );
    let out = run_in_clean_env(BIN, &[("RAKUTEN_POLL_PORT", "0")], &["serve"]);
    let line = assert_output_refused(&out, &[]);
    assert_eq!(
        line,
        "error: missing setting --admin-token / RAKUTEN_POLL_ADMIN_TOKEN: it is required; set the \
         variable (environment or .env) or pass the flag"
    );
}

#[tokio::test]
async fn a_read_only_database_file_is_reported_read_only_not_busy() {
    let dir = tempfile::tempdir().unwrap();
    test_util::assert_read_only_database_refused(
        BIN,
        &[TOKEN],
        ("RAKUTEN_POLL_PORT", "RAKUTEN_POLL_DB_PATH"),
        dir.path(),
        "polls.db",
    )
    .await;
}

/// D-env-file-all-or-nothing: a `.env` with a bad line was half applied — the lines
/// above it set, the ones below (here the database path) silently dropped — and the service
/// started on its default database. Now nothing from the file applies and start-up stops with
/// one line giving the line's number and name, never its value.
#[test]
fn a_malformed_env_file_stops_start_up_naming_the_line_and_applies_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // `serve` in `dir` with only `env_file` as its `.env`.
    let serve_with = |env_file: &str| {
        std::fs::write(dir.path().join(".env"), env_file).unwrap();
        std::process::Command::new(BIN)
            .current_dir(dir.path())
            .env_clear()
            .args(["serve", "--port", "0"])
            .output()
            .unwrap()
    };
    let out = serve_with(
        "RAKUTEN_POLL_ADMIN_TOKEN=dotenv-admin-token-0123456789\n\
         RAKUTEN_POLL_CARRIER_TOKEN = secret value with spaces-9876\n\
         RAKUTEN_POLL_DB_PATH=intended.db\n",
    );
    let line = assert_output_refused(
        &out,
        &[
            "invalid settings file .env: line 2 does not parse (RAKUTEN_POLL_CARRIER_TOKEN)",
            "nothing from the file was applied",
        ],
    );
    assert!(!line.contains("9876"), "the value is never printed: {line}");
    assert!(!dir.path().join("data").exists() && !dir.path().join("intended.db").exists());

    // A file saved with a byte order mark; the mark is named, not shown invisibly.
    let out = serve_with("\u{feff}RAKUTEN_POLL_ADMIN_TOKEN=dotenv-admin-token-0123456789\n");
    assert_output_refused(
        &out,
        &[
            "invalid settings file .env: line 1 starts with a byte order mark (U+FEFF): save the \
           file as UTF-8 without one",
        ],
    );
}

/// D-exit-2-or-3: a URL that does not parse, a role PostgreSQL does not
/// know and a Redis that answers with an error exited 3 — a supervisor would restart a typo for
/// ever — and Redis's own refusal read "no answer to PING". They are the operator's to fix:
/// exit 2, Redis's answer quoted.
#[test_util::lane(postgres, redis)]
#[test]
fn a_database_or_redis_that_answers_with_a_refusal_exits_2_with_its_answer() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("polls.db");
    let db = db.to_str().unwrap();
    assert_setup_refused(
        BIN,
        &[
            TOKEN,
            ("RAKUTEN_POLL_PORT", "0"),
            ("RAKUTEN_POLL_DB_URL", "postgres://u:pw@127.0.0.1:abc/polls"),
        ],
        &["(RAKUTEN_POLL_DB_URL)"],
    );
    let pg = std::env::var("DATABASE_URL_TEST")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let stranger = pg.replacen("postgres://postgres@", "postgres://nosuchrole_startup@", 1);
    assert_ne!(
        stranger, pg,
        "DATABASE_URL_TEST names the postgres role: {pg}"
    );
    assert_setup_refused(
        BIN,
        &[
            TOKEN,
            ("RAKUTEN_POLL_PORT", "0"),
            ("RAKUTEN_POLL_DB_URL", &stranger),
        ],
        &["(RAKUTEN_POLL_DB_URL)", "nosuchrole_startup"],
    );
    let redis = std::env::var("REDIS_URL_TEST").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let redis = format!("{}/999", redis.trim_end_matches('/'));
    assert_setup_refused(
        BIN,
        &[
            TOKEN,
            ("RAKUTEN_POLL_PORT", "0"),
            ("RAKUTEN_POLL_DB_PATH", db),
            ("RAKUTEN_POLL_HINT_CHANNEL", &redis),
        ],
        &["(RAKUTEN_POLL_HINT_CHANNEL)", "DB index is out of range"],
    );
}

/// D-one-process-per-sqlite-file: a second card-polling process on the same SQLite file stops before touching it,
/// exits 3 (a rolling restart's new process retries until the old one has exited) and names the
/// file and its lock.
#[test]
fn a_second_process_on_the_same_sqlite_file_exits_3_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("polls.db");
    // What a running card-polling holds: an exclusive `flock` on `<db>.lock`.
    let held = std::fs::File::create(dir.path().join("polls.db.lock")).unwrap();
    held.try_lock().unwrap();
    let line = assert_setup_unavailable(
        BIN,
        &[
            TOKEN,
            ("RAKUTEN_POLL_PORT", "0"),
            ("RAKUTEN_POLL_DB_PATH", db.to_str().unwrap()),
        ],
        &["another process already writes", "polls.db.lock"],
    );
    // Said once (not repeated as the error's cause).
    assert_eq!(
        line.matches("another process already writes").count(),
        1,
        "{line}"
    );
    assert!(!db.exists(), "the second process created the database");
}

/// D-exit-2-or-3: a database already migrated by another application
/// stopped the service with exit 1 and sqlx's "previously applied but is missing". It is the
/// operator's to fix: exit 2, naming the variable and the way out.
#[tokio::test]
async fn a_database_holding_another_applications_migration_exits_2_with_the_way_out() {
    let dir = tempfile::tempdir().unwrap();
    test_util::assert_foreign_migration_refused(
        BIN,
        &[TOKEN],
        ("RAKUTEN_POLL_PORT", "RAKUTEN_POLL_DB_PATH"),
        dir.path(),
        "polls.db",
    )
    .await;
}

/// D-exit-2-or-3: a URL whose `search_path` names a schema that does not
/// exist stopped the service with exit 1 and "no schema has been selected to create in", after a
/// hint to check that the server runs. It is the operator's to fix: exit 2, saying so.
#[test_util::lane(postgres)]
#[test]
fn a_search_path_naming_no_schema_exits_2_saying_so() {
    let url = test_util::pg::url_with_search_path("nosuch_schema_d14");
    assert_setup_refused(
        BIN,
        &[
            TOKEN,
            ("RAKUTEN_POLL_PORT", "0"),
            ("RAKUTEN_POLL_DB_URL", &url),
        ],
        &[
            "(RAKUTEN_POLL_DB_URL) has no schema to create tables in",
            "CREATE SCHEMA",
        ],
    );
}
