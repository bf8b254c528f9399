//! Regression (security, D-secret-settings-never-echoed): `--help` never shows a secret's environment value (the
//! worker's secrets parse infallibly, so clap has no refused value to echo).

use test_util::run_in_clean_env;

#[test]
fn help_never_shows_secret_env_values() {
    for args in [&["--help"][..], &["run", "--help"][..]] {
        let out = run_in_clean_env(
            env!("CARGO_BIN_EXE_trading-worker"),
            &[
                ("RAKUTEN_API_TOKEN", "TwHelpS3cret"),
                ("RAKUTEN_SITE_SESSION", "TwSessS3cret"),
            ],
            args,
        );
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(0), "{args:?}: {text}");
        for part in ["TwHelpS3cret", "TwSessS3cret"] {
            assert!(!text.contains(part), "{args:?} shows {part}: {text}");
        }
    }
}
