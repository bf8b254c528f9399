//! Regression (security): a refused secret setting named the value in clap's
//! `invalid value '<value>' for '--admin-token'` line, which systemd writes to the journal. Each
//! case runs the binary with one bad secret in the environment and checks exit code 2, the one
//! error line naming the flag and its variable, and that neither the value nor a distinctive
//! part of it reaches stdout or stderr; `--help` never shows a secret's environment value.

use card_polling::store::ImportStore;
use std::process::Output;

use test_util::{assert_secret_refused, run_in_clean_env};

fn run(env: &[(&str, &str)], args: &[&str]) -> Output {
    run_in_clean_env(env!("CARGO_BIN_EXE_card-polling"), env, args)
}

/// `(variable, bad value, distinctive substring, expected message)`.
const CASES: &[(&str, &str, &str, &str)] = &[
    (
        "RAKUTEN_POLL_ADMIN_TOKEN",
        "short",
        "short",
        "error: invalid setting --admin-token / RAKUTEN_POLL_ADMIN_TOKEN: the admin token must be 16-256 characters without spaces",
    ),
    (
        "RAKUTEN_POLL_ADMIN_TOKEN",
        "S3CRET ADMIN TOKEN WITH SPACES",
        "S3CRET",
        "error: invalid setting --admin-token / RAKUTEN_POLL_ADMIN_TOKEN: the admin token must be 16-256 characters without spaces",
    ),
    // A short console key signs sessions an attacker can forge
    // after guessing it offline from one cookie.
    (
        "RAKUTEN_POLL_CONSOLE_KEY",
        "Sh0rtC0nsoleKey-0123456789",
        "Sh0rtC0nsoleKey",
        "error: invalid setting --console-key / RAKUTEN_POLL_CONSOLE_KEY: the console key must be at least 32 characters (e.g. `openssl rand -hex 32`)",
    ),
    (
        "RAKUTEN_POLL_DB_URL",
        "mysql://user:DbPa55word@db.example/polls",
        "DbPa55word",
        "error: invalid setting --db-url / RAKUTEN_POLL_DB_URL: the database URL must start with postgres:// or postgresql://",
    ),
    (
        "RAKUTEN_POLL_HINT_CHANNEL",
        "http://:RedisPa55@redis.example:6379/",
        "RedisPa55",
        "error: invalid setting --hint-channel / RAKUTEN_POLL_HINT_CHANNEL: must be `memory` or a redis:// or rediss:// URL",
    ),
    (
        "RAKUTEN_POLL_CARRIER_URL",
        "ftp://carrier:CarrierPa55@carrier.example/api?key=K3YVALUE",
        "CarrierPa55",
        "error: invalid setting --carrier-url / RAKUTEN_POLL_CARRIER_URL: ",
    ),
    (
        "RAKUTEN_POLL_CARRIER_TOKEN",
        "CarrierT0ken WITH SPACE",
        "CarrierT0ken",
        "error: invalid setting --carrier-token / RAKUTEN_POLL_CARRIER_TOKEN: the carrier token must be 1-4096 characters without spaces",
    ),
];

#[test]
fn refused_secret_settings_never_print_the_value() {
    for case in CASES {
        assert_secret_refused(env!("CARGO_BIN_EXE_card-polling"), &["serve"], *case);
    }
}

#[test]
fn refused_admin_token_flag_is_not_printed() {
    let out = run(&[], &["serve", "--admin-token", "Fl4gSecret"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("invalid setting --admin-token / RAKUTEN_POLL_ADMIN_TOKEN: "),
        "{stderr}"
    );
    assert!(!stderr.contains("Fl4gSecret"), "{stderr}");
}

#[test]
fn help_never_shows_secret_env_values() {
    let env = [
        ("RAKUTEN_POLL_ADMIN_TOKEN", "HelpAdminS3cret-0123456789"),
        (
            "RAKUTEN_POLL_DB_URL",
            "postgres://u:HelpDbPa55@127.0.0.1/db",
        ),
        (
            "RAKUTEN_POLL_HINT_CHANNEL",
            "redis://:HelpRedisPa55@127.0.0.1:6379/",
        ),
        (
            "RAKUTEN_POLL_CARRIER_URL",
            "https://c:HelpCarrierPa55@carrier.example/api",
        ),
        ("RAKUTEN_POLL_CARRIER_TOKEN", "HelpCarrierT0ken"),
    ];
    for args in [&["--help"][..], &["serve", "--help"][..]] {
        let out = run(&env, args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(0), "{args:?}: {text}");
        for part in [
            "HelpAdminS3cret",
            "HelpDbPa55",
            "HelpRedisPa55",
            "HelpCarrierPa55",
            "HelpCarrierT0ken",
        ] {
            assert!(!text.contains(part), "{args:?} shows {part}: {text}");
        }
    }
}

/// A PostgreSQL that does not answer said only "pool timed out", a
/// SQLite file that cannot be written was not named, and a Redis that does not answer was found
/// only after the migrations had run. Each start-up failure now names what it tried (the database
/// URL without its password), the setting to look at, and the hint channel is connected before
/// any database is touched (D-startup-names-what-failed).
#[test]
fn start_up_failures_name_what_failed_and_touch_nothing_first() {
    let dir = tempfile::tempdir().unwrap();
    // `serve` with `env` (besides a token and port 0) fails, its stderr holds `expected`.
    let fails_with = |env: &[(&str, &str)], expected: &str| -> String {
        let mut all = vec![
            ("RAKUTEN_POLL_ADMIN_TOKEN", "startup-admin-token-0123"),
            ("RAKUTEN_POLL_PORT", "0"),
        ];
        all.extend_from_slice(env);
        let out = run(&all, &["serve"]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "{stderr}");
        assert!(stderr.contains(expected), "{expected}: {stderr}");
        stderr
    };

    // Port 1 on loopback refuses at once.
    let stderr = fails_with(
        &[
            (
                "RAKUTEN_POLL_DB_URL",
                "postgres://u:StartPa55@127.0.0.1:1/polls",
            ),
            ("RAKUTEN_POLL_DB_LOCK_TIMEOUT_MS", "300"),
        ],
        "opening the PostgreSQL database postgres://127.0.0.1:1/polls (RAKUTEN_POLL_DB_URL)",
    );
    assert!(!stderr.contains("StartPa55"), "{stderr}");

    let db = dir.path().join("polls.db");
    fails_with(
        &[
            ("RAKUTEN_POLL_DB_PATH", db.to_str().unwrap()),
            ("RAKUTEN_POLL_HINT_CHANNEL", "redis://127.0.0.1:1/"),
        ],
        "connecting the Redis hint channel redis://127.0.0.1:1/ (RAKUTEN_POLL_HINT_CHANNEL)",
    );
    assert!(
        !db.exists(),
        "the database was created before Redis was checked"
    );

    // A file that is not an SQLite database is named with its setting too.
    let garbage = dir.path().join("garbage.db");
    std::fs::write(&garbage, vec![b'x'; 8192]).unwrap();
    let garbage = garbage.to_str().unwrap();
    fails_with(
        &[("RAKUTEN_POLL_DB_PATH", garbage)],
        &format!("{garbage} (RAKUTEN_POLL_DB_PATH)"),
    );

    fails_with(
        &[("RAKUTEN_POLL_DB_PATH", "/proc/no-such-dir/polls.db")],
        "opening the SQLite database /proc/no-such-dir/polls.db (RAKUTEN_POLL_DB_PATH)",
    );
}

/// A TLS certificate or key file that is missing or unusable stopped
/// start-up with exit code 1, like a run-time failure. It is a bad setting: exit code 2, one line
/// naming the variable of the file to fix (D-exit-2-or-3).
#[test]
fn a_missing_or_unusable_tls_file_exits_2_naming_its_variable() {
    let dir = tempfile::tempdir().unwrap();
    let files = rakuten_edge::testing::TestCa::new("card-polling test CA").write_leaf(dir.path());
    let db = dir.path().join("polls.db");
    test_util::process::assert_tls_files_refused(
        env!("CARGO_BIN_EXE_card-polling"),
        &[
            ("RAKUTEN_POLL_ADMIN_TOKEN", "startup-admin-token-0123"),
            ("RAKUTEN_POLL_PORT", "0"),
            ("RAKUTEN_POLL_DB_PATH", db.to_str().unwrap()),
        ],
        "RAKUTEN_POLL",
        (&files.cert, &files.key),
        dir.path(),
    );
}

/// With nothing answering at `RAKUTEN_POLL_DB_URL`, start-up waited 30 s
/// (sqlx's default) before it failed. The first connection now has a 5 s bound, whether the port
/// refuses or a peer accepts and never answers; the error names the database without its
/// password and the variable (D-startup-names-what-failed).
#[test]
fn start_up_fails_within_seconds_when_postgres_does_not_answer() {
    // A peer that accepts connections and never says a word (the accepted sockets stay open).
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in silent.incoming() {
            held.push(s);
        }
    });
    // A port nobody listens on (refused at once, retried by sqlx until its bound).
    let closed_port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    for port in [silent_port, closed_port] {
        let url = format!("postgres://u:SlowPa55@127.0.0.1:{port}/polls");
        let started = std::time::Instant::now();
        let out = run(
            &[
                ("RAKUTEN_POLL_ADMIN_TOKEN", "startup-admin-token-0123"),
                ("RAKUTEN_POLL_PORT", "0"),
                ("RAKUTEN_POLL_DB_URL", &url),
            ],
            &["serve"],
        );
        let took = started.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(
            took < std::time::Duration::from_secs(15),
            "port {port}: took {took:?}: {stderr}"
        );
        assert!(
            stderr.contains(&format!(
                "opening the PostgreSQL database postgres://127.0.0.1:{port}/polls (RAKUTEN_POLL_DB_URL)"
            )),
            "{stderr}"
        );
        assert!(!stderr.contains("SlowPa55"), "{stderr}");
    }
}

/// D-admin-token-is-nobody-elses: an imported account whose token is the admin token
/// started without a word, and its holder signed in as the bootstrap super_admin (the admin
/// token is checked first): the two roles collapsed. Start-up refuses it as a bad setting (exit
/// 2, naming `RAKUTEN_POLL_ADMIN_TOKEN` and the account), and a carrier token equal to the
/// admin token (which would hand the carrier super_admin here) names both variables. Neither
/// prints the token.
#[test]
fn an_admin_token_shared_with_an_account_or_the_carrier_exits_2_naming_both() {
    const SHARED: &str = "Shar3dAdminT0ken-0123";
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.db");
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let store = card_polling::store::sqlite::SqliteStore::open(&db)
            .await
            .unwrap();
        let batch: card_polling::store::ImportBatch = serde_json::from_value(serde_json::json!({
            "shops": [{"id": "S1", "name": "shop"}],
            "accounts": [{"id": "ops-agent", "role": "agent", "shop_id": "S1", "token": SHARED}],
        }))
        .unwrap();
        store
            .domain_import(&batch, rakuten_types::Timestamp::now_utc())
            .await
            .unwrap();
    });
    let db_path = db.to_str().unwrap();
    let cases = [
        (
            vec![
                ("RAKUTEN_POLL_ADMIN_TOKEN", SHARED),
                ("RAKUTEN_POLL_DB_PATH", db_path),
                ("RAKUTEN_POLL_PORT", "0"),
            ],
            "error: invalid setting --admin-token / RAKUTEN_POLL_ADMIN_TOKEN: is also the token of \
             the imported account \"ops-agent\" (role agent)",
        ),
        (
            vec![
                ("RAKUTEN_POLL_ADMIN_TOKEN", SHARED),
                ("RAKUTEN_POLL_CARRIER_URL", "https://carrier.example/api"),
                ("RAKUTEN_POLL_CARRIER_TOKEN", SHARED),
                ("RAKUTEN_POLL_DB_PATH", db_path),
            ],
            "error: invalid setting --carrier-token / RAKUTEN_POLL_CARRIER_TOKEN: is the same as \
             RAKUTEN_POLL_ADMIN_TOKEN",
        ),
    ];
    for (env, want) in cases {
        let out = run(&env, &["serve"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.lines().any(|l| l.starts_with(want)),
            "{want}\n{stderr}"
        );
        assert!(
            !stderr.contains("Shar3d") && !stdout.contains("Shar3d"),
            "{stderr}"
        );
    }
}
