//! `.env.example` lists exactly the settings `trading-worker run --help` lists: a setting added
//! without its line, or removed with its line left behind, fails here with the names to fix.

#[test]
fn the_env_example_lists_every_setting_of_help_and_nothing_else() {
    rakuten_cli::assert_env_example_matches_help(
        env!("CARGO_BIN_EXE_trading-worker"),
        &["run"],
        concat!(env!("CARGO_MANIFEST_DIR"), "/.env.example"),
        &["RAKUTEN_WORKER_FAILPOINT"],
    );
}
