//! Regression (security): a refused token list was echoed whole by clap's
//! `invalid value '<value>' for '--upstream-tokens'` line, secret included (and systemd writes
//! stderr to the journal). Each case runs the binary with one bad secret setting in the
//! environment and checks exit code 2, the one error line naming the flag and its variable, and
//! that neither the value nor a distinctive part of it reaches stdout or stderr; `--help` never
//! shows a secret's environment value.

use std::process::Output;

use test_util::{assert_secret_refused, run_in_clean_env};

fn run(env: &[(&str, &str)], args: &[&str]) -> Output {
    run_in_clean_env(env!("CARGO_BIN_EXE_order-gateway"), env, args)
}

/// `(variable, bad value, distinctive substring, expected first line)`.
const CASES: &[(&str, &str, &str, &str)] = &[
    (
        "RAKUTEN_UPSTREAM_TOKENS",
        "up:tok1-0123456789abcdef,S3CRET-TOKEN-VALUE",
        "S3CRET",
        "error: invalid setting --upstream-tokens / RAKUTEN_UPSTREAM_TOKENS: entry 2 is not name:token",
    ),
    (
        "RAKUTEN_WORKER_TOKENS",
        "w1:W0rkerS3cret INNER",
        "W0rkerS3cret",
        "error: invalid setting --worker-tokens / RAKUTEN_WORKER_TOKENS: entry 1: the token must be at least 16 characters, without spaces",
    ),
    // Short secrets started without a word; a token is guessed online, a console key
    // offline from one cookie.
    (
        "RAKUTEN_OPERATOR_TOKENS",
        "alice:Sh0rtS3c",
        "Sh0rtS3c",
        "error: invalid setting --operator-tokens / RAKUTEN_OPERATOR_TOKENS: entry 1: the token must be at least 16 characters, without spaces",
    ),
    (
        "RAKUTEN_API_TOKEN",
        "Sh0rtApiS3c",
        "Sh0rtApiS3c",
        "error: invalid setting --api-token / RAKUTEN_API_TOKEN: the token must be at least 16 characters, without spaces",
    ),
    (
        "RAKUTEN_CONSOLE_KEY",
        "Sh0rtC0nsoleKey-0123456789",
        "Sh0rtC0nsoleKey",
        "error: invalid setting --console-key / RAKUTEN_CONSOLE_KEY: the console key must be at least 32 characters (e.g. `openssl rand -hex 32`)",
    ),
    // An HMAC key a receiver's log gives away with one signed request.
    (
        "RAKUTEN_ALERT_WEBHOOK_SECRET",
        "Sh0rtH00kKey",
        "Sh0rtH00kKey",
        "error: invalid setting --webhook-secret / RAKUTEN_ALERT_WEBHOOK_SECRET: the secret must be at least 16 characters (e.g. `openssl rand -hex 32`)",
    ),
    (
        "RAKUTEN_OPERATOR_TOKENS",
        "ops:fine-token-0123456789,bad name!:Op3ratorS3cret",
        "Op3ratorS3cret",
        "error: invalid setting --operator-tokens / RAKUTEN_OPERATOR_TOKENS: entry 2: the name must be 1..=",
    ),
    (
        "RAKUTEN_METRICS_TOKENS",
        ":M3tricsS3cret",
        "M3tricsS3cret",
        "error: invalid setting --metrics-tokens / RAKUTEN_METRICS_TOKENS: entry 1: the name must be 1..=",
    ),
];

#[test]
fn refused_token_lists_never_print_the_value() {
    for case in CASES {
        assert_secret_refused(env!("CARGO_BIN_EXE_order-gateway"), &["serve"], *case);
    }
}

#[test]
fn refused_database_url_is_not_printed() {
    let out = run(
        &[
            ("RAKUTEN_API_TOKEN", "ApiT0ken-0123456789abcdef"),
            ("RAKUTEN_GATEWAY_DB_URL", "mysql://u:GwDbPa55@db.example/gw"),
        ],
        &["serve"],
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("RAKUTEN_GATEWAY_DB_URL"), "{text}");
    for leak in ["GwDbPa55", "ApiT0ken"] {
        assert!(!text.contains(leak), "{text}");
    }
}

#[test]
fn help_never_shows_secret_env_values() {
    let env = [
        ("RAKUTEN_API_TOKEN", "HelpApiS3cret-0123456789"),
        (
            "RAKUTEN_GATEWAY_DB_URL",
            "postgres://u:HelpDbPa55@127.0.0.1/db",
        ),
        ("RAKUTEN_UPSTREAM_TOKENS", "up:HelpUpS3cret-0123456789"),
        ("RAKUTEN_WORKER_TOKENS", "w:HelpWorkerS3cret"),
        ("RAKUTEN_OPERATOR_TOKENS", "o:HelpOpS3cret-0123456789"),
        ("RAKUTEN_METRICS_TOKENS", "m:HelpMetricsS3cret"),
        (
            "RAKUTEN_CONSOLE_KEY",
            "HelpConsoleKey-0123456789-0123456789",
        ),
        (
            "RAKUTEN_ALERT_WEBHOOK_URLS",
            "https://u:HelpHookPa55@hook.example/",
        ),
        ("RAKUTEN_ALERT_WEBHOOK_SECRET", "HelpHookS3cret"),
        ("RAKUTEN_OPS_TOKEN", "HelpOpsT0ken"),
    ];
    for args in [
        &["--help"][..],
        &["serve", "--help"][..],
        &["ops", "--help"][..],
    ] {
        let out = run(&env, args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(0), "{args:?}: {text}");
        for (_, value) in env {
            let part = value
                .rsplit([':', '@', '/'])
                .find(|p| p.contains("Help"))
                .unwrap_or(value);
            assert!(!text.contains(part), "{args:?} shows {part}: {text}");
        }
    }
}

/// A TLS certificate or key file that is missing or unusable stopped
/// start-up with exit code 1, like a run-time failure. It is a bad setting: exit code 2, one line
/// naming the variable of the file to fix (D-exit-2-or-3).
#[test]
fn a_missing_or_unusable_tls_file_exits_2_naming_its_variable() {
    let dir = tempfile::tempdir().unwrap();
    let files = rakuten_edge::testing::TestCa::new("gateway test CA").write_leaf(dir.path());
    let db = dir.path().join("gw.db");
    test_util::process::assert_tls_files_refused(
        env!("CARGO_BIN_EXE_order-gateway"),
        &[
            ("RAKUTEN_API_TOKEN", "startup-api-token-0123456"),
            ("RAKUTEN_GATEWAY_PORT", "0"),
            ("RAKUTEN_GATEWAY_DB_PATH", db.to_str().unwrap()),
        ],
        "RAKUTEN_GATEWAY",
        (&files.cert, &files.key),
        dir.path(),
    );
}

/// D-admin-token-is-nobody-elses: one token in two roles made the roles collapse, and
/// the refusal named only `RAKUTEN_*_TOKENS`. Exit 2, one line naming both variables and both
/// names, never the token.
#[test]
fn a_token_shared_by_two_roles_exits_2_naming_both_variables() {
    for (env, first, second) in [
        (
            [
                ("RAKUTEN_API_TOKEN", "Shar3dT0ken-0123456789"),
                ("RAKUTEN_WORKER_TOKENS", "w1:Shar3dT0ken-0123456789"),
            ],
            "\"api\" in RAKUTEN_API_TOKEN",
            "\"w1\" in RAKUTEN_WORKER_TOKENS",
        ),
        (
            [
                ("RAKUTEN_UPSTREAM_TOKENS", "shop:Shar3dT0ken-0123456789"),
                ("RAKUTEN_METRICS_TOKENS", "prom:Shar3dT0ken-0123456789"),
            ],
            "\"shop\" in RAKUTEN_UPSTREAM_TOKENS",
            "\"prom\" in RAKUTEN_METRICS_TOKENS",
        ),
    ] {
        let out = run(&env, &["serve"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        let line = stderr.lines().next().unwrap_or_default();
        assert!(line.starts_with("error: invalid setting --"), "{stderr}");
        assert!(line.contains(first) && line.contains(second), "{stderr}");
        assert!(
            !stderr.contains("Shar3d") && !stdout.contains("Shar3d"),
            "{stderr}"
        );
    }
}
