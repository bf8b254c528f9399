//! Start-up refusals (D-exit-2-or-3, D-setting-refusal-one-line), checked on the gateway too: what the
//! operator fixes in the configuration or the environment — a PostgreSQL that does not answer,
//! the listening port in use, a read-only database file, a number that is no number — stops
//! start-up with one line on stderr that names the variable, printed once: exit code 3 for what a
//! restart may fix (a server that does not answer, a port in use; D-exit-2-or-3), 2 otherwise.

use test_util::{assert_setup_refused, assert_setup_unavailable};

const BIN: &str = env!("CARGO_BIN_EXE_order-gateway");
const TOKEN: (&str, &str) = ("RAKUTEN_API_TOKEN", "startup-api-token-0123456");

#[test]
fn a_database_that_does_not_answer_or_a_busy_port_exits_3_naming_the_variable_so_a_supervisor_retries()
 {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gw.db");
    let db = db.to_str().unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let pg = format!("postgres://u:GwPa55@127.0.0.1:{closed}/gw");
    let line = assert_setup_unavailable(
        BIN,
        &[
            TOKEN,
            ("RAKUTEN_GATEWAY_PORT", "0"),
            ("RAKUTEN_GATEWAY_DB_URL", &pg),
        ],
        &[&format!(
            "opening the PostgreSQL database postgres://u:***@127.0.0.1:{closed}/gw \
             (RAKUTEN_GATEWAY_DB_URL)"
        )],
    );
    assert!(!line.contains("GwPa55"), "{line}");
    // The port is held by this test: whatever binds it first, it is in use.
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    assert_setup_unavailable(
        BIN,
        &[
            TOKEN,
            ("RAKUTEN_GATEWAY_PORT", &port),
            ("RAKUTEN_GATEWAY_DB_PATH", db),
        ],
        &[
            &format!("cannot listen on 127.0.0.1:{port} (RAKUTEN_GATEWAY_PORT)"),
            "already in use",
        ],
    );
}

#[test]
fn a_number_that_is_no_number_names_the_variable_the_value_and_what_it_takes() {
    let line = assert_setup_refused(BIN, &[TOKEN, ("RAKUTEN_LEASE_TTL_SECONDS", "abc")], &[]);
    assert_eq!(
        line,
        "error: invalid setting --lease-ttl-seconds / RAKUTEN_LEASE_TTL_SECONDS: \"abc\" is not a \
         number; it takes a number of seconds (decimals allowed: 2.5)"
    );
    let line = assert_setup_refused(BIN, &[TOKEN, ("RAKUTEN_QUERY_MAX_ATTEMPTS", "lots")], &[]);
    assert_eq!(
        line,
        "error: invalid setting --query-max-attempts / RAKUTEN_QUERY_MAX_ATTEMPTS: \"lots\" is not \
         a whole number; it takes a whole number from 1 to 100"
    );
    // The address file's folder is checked at start, not after the socket is bound.
    let line = assert_setup_refused(
        BIN,
        &[
            TOKEN,
            ("RAKUTEN_GATEWAY_ADDR_FILE", "/nonexistent-dir/addr"),
        ],
        &[],
    );
    assert_eq!(
        line,
        "error: invalid setting --addr-file / RAKUTEN_GATEWAY_ADDR_FILE: the folder \
         /nonexistent-dir does not exist (it is not created)"
    );
    let line = assert_setup_refused(BIN, &[TOKEN, ("RAKUTEN_GATEWAY_PORT", "http")], &[]);
    assert!(
        line.contains(
            "--port / RAKUTEN_GATEWAY_PORT: \"http\" is not a whole number; it takes a \
                       whole number from 0 to 65535"
        ),
        "{line}"
    );
}

/// Before, the gateway started on a database file it could not write and logged a failed sweep
/// every second; now the first start-up write finds it and names the file.
#[tokio::test]
async fn a_read_only_database_file_is_refused_at_start_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    test_util::assert_read_only_database_refused(
        BIN,
        &[TOKEN],
        ("RAKUTEN_GATEWAY_PORT", "RAKUTEN_GATEWAY_DB_PATH"),
        dir.path(),
        "gw.db",
    )
    .await;
}

/// D-exit-2-or-3: a PostgreSQL URL that does not parse or a role the
/// server refuses exited 3, so a supervisor would restart a typo for ever; they exit 2.
#[test_util::lane(postgres)]
#[test]
fn a_database_url_that_does_not_parse_or_a_refused_role_exits_2() {
    for url in [
        "postgres://u:pw@127.0.0.1:abc/gw".to_owned(),
        std::env::var("DATABASE_URL_TEST")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
            .replacen("postgres://postgres@", "postgres://nosuchrole_gw@", 1),
    ] {
        assert_setup_refused(
            BIN,
            &[
                TOKEN,
                ("RAKUTEN_GATEWAY_PORT", "0"),
                ("RAKUTEN_GATEWAY_DB_URL", &url),
            ],
            &["(RAKUTEN_GATEWAY_DB_URL)"],
        );
    }
}

/// D-one-process-per-sqlite-file: a second gateway on the same SQLite file started and
/// both wrote it. Now the second one stops before touching it, exits 3 (a rolling restart's new
/// process retries until the old one has exited) and names the file and its lock.
#[test]
fn a_second_gateway_on_the_same_sqlite_file_exits_3_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gw.db");
    // What a running gateway holds: an exclusive `flock` on `<db>.lock`.
    let held = std::fs::File::create(dir.path().join("gw.db.lock")).unwrap();
    held.try_lock().unwrap();
    let line = assert_setup_unavailable(
        BIN,
        &[
            TOKEN,
            ("RAKUTEN_GATEWAY_PORT", "0"),
            ("RAKUTEN_GATEWAY_DB_PATH", db.to_str().unwrap()),
        ],
        &["another process already writes", "gw.db.lock"],
    );
    // Said once (not repeated as the error's cause).
    assert_eq!(
        line.matches("another process already writes").count(),
        1,
        "{line}"
    );
    assert!(!db.exists(), "the second gateway created the database");
}

/// D-exit-2-or-3: a database already migrated by another application
/// stopped the gateway with exit 1 and sqlx's "previously applied but is missing". It is the
/// operator's to fix: exit 2, naming the variable and the way out.
#[tokio::test]
async fn a_database_holding_another_applications_migration_exits_2_with_the_way_out() {
    let dir = tempfile::tempdir().unwrap();
    test_util::assert_foreign_migration_refused(
        BIN,
        &[TOKEN],
        ("RAKUTEN_GATEWAY_PORT", "RAKUTEN_GATEWAY_DB_PATH"),
        dir.path(),
        "gw.db",
    )
    .await;
}

/// D-one-process-per-sqlite-file: a second gateway started on a hard link of the first
/// one's database file; both answered `created` to the same task id and both leased it. A file
/// with two names is refused at start (exit 2: only the operator can remove the extra name).
#[test]
fn a_database_file_with_a_second_hard_link_exits_2_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gw.db");
    std::fs::write(&db, b"").unwrap();
    std::fs::hard_link(&db, dir.path().join("gw-too.db")).unwrap();
    assert_setup_refused(
        BIN,
        &[
            TOKEN,
            ("RAKUTEN_GATEWAY_PORT", "0"),
            ("RAKUTEN_GATEWAY_DB_PATH", db.to_str().unwrap()),
        ],
        &["(RAKUTEN_GATEWAY_DB_PATH)", "has 2 names (hard links)"],
    );
}

/// D-exit-2-or-3: a URL whose `search_path` names a schema that does not
/// exist stopped the gateway with exit 1 and "no schema has been selected to create in", after a
/// hint to check that the server runs. It is the operator's to fix: exit 2, saying so.
#[test_util::lane(postgres)]
#[test]
fn a_search_path_naming_no_schema_exits_2_saying_so() {
    let url = test_util::pg::url_with_search_path("nosuch_schema_d14");
    assert_setup_refused(
        BIN,
        &[
            TOKEN,
            ("RAKUTEN_GATEWAY_PORT", "0"),
            ("RAKUTEN_GATEWAY_DB_URL", &url),
        ],
        &[
            "(RAKUTEN_GATEWAY_DB_URL) has no schema to create tables in",
            "CREATE SCHEMA",
        ],
    );
}
