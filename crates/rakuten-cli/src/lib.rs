//! What every binary of the workspace does at start, written once so that they all behave alike.
//! One module per concept, everything re-exported at the crate root:
//!
//! - `start.rs` — [`start()`]: reads `.env` (all of it or nothing, D-env-file-all-or-nothing; the
//!   environment wins over it), parses the command line, lists the logging variables in every
//!   subcommand's `--help`, and starts the logs;
//! - `aliases.rs` — [`Alias`]: the binary's deprecated variable names still honoured, each use
//!   logged as a warning;
//! - `logs.rs` — `RUST_LOG` filters (default given by the binary), [`LOG_FORMAT_VAR`] picks `text`
//!   (default; ANSI colours only on a terminal) or `json` (one JSON object per line), on stdout;
//! - `refusal.rs` — [`exit_invalid`]: a setting that fails validation prints one line naming the
//!   flag and its variable (`error: invalid setting --port / RAKUTEN_GATEWAY_PORT: …`) and exits
//!   2, without a backtrace whatever `RUST_BACKTRACE` says; clap's own errors (a missing required
//!   setting, an unparsable value, an unknown flag) also exit 2 and name the variable too
//!   (D-setting-refusal-one-line);
//! - [`secret_arg`]: the clap value parser for secret settings, whose refusal names the flag and
//!   its variable in the same form but never quotes the value (D-secret-settings-never-echoed);
//! - [`number`]: clap value parsers for whole numbers and seconds whose refusal names the flag,
//!   the variable, the value and what the setting takes (D-setting-refusal-one-line);
//! - `exit.rs` — [`exit_on_error`]: an error prints `error: …` with its cause chain once, on
//!   stderr, and exits 1, or 2 when a [`SetupError`] in it says the operator must fix the
//!   configuration or the environment (a read-only database, a missing file; D-exit-2-or-3), or 3
//!   when what it needs does not answer yet (database, Redis, the listening port; D-exit-2-or-3);
//! - `env_example.rs` — [`check_env_example`]: the test every binary runs on its `.env.example`
//!   against `--help`;
//! - [`migrations`]: released migrations keep the checksum databases recorded when only their
//!   comments were reworded;
//! - [`stderr_line!`]: the one way these modules write to stderr.

/// `eprintln!` that drops the line when standard error cannot take it. `eprintln!` panics on a
/// closed or full standard error (`… 2>&1 | head -1`, `2>/dev/full`), and a bad setting then
/// exited 101 instead of its documented 2.
#[macro_export]
macro_rules! stderr_line {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(::std::io::stderr(), $($arg)*);
    }};
}

mod aliases;
mod env_example;
mod exit;
mod logs;
pub mod migrations;
pub mod number;
mod refusal;
pub mod secret_arg;
mod start;

pub use aliases::Alias;
pub use env_example::{assert_env_example_matches_help, check_env_example};
pub use exit::{SetupError, error_line, exit_on_error};
pub use logs::{LOG_FORMAT_VAR, LOG_HELP, LogFormat, LogOutput, parse_log_format};
pub use refusal::{exit_invalid, flag_for_env, invalid_setting_message};
pub use start::{start, start_with};

/// A command line with one subcommand reading one variable, for the tests of the modules that
/// look arguments up by variable.
#[cfg(test)]
mod test_cli {
    use clap::Parser;

    #[derive(Debug, Parser)]
    #[command(name = "t")]
    pub(crate) struct Cli {
        #[command(subcommand)]
        pub(crate) cmd: Sub,
    }

    #[derive(Debug, clap::Subcommand)]
    pub(crate) enum Sub {
        Serve {
            #[arg(long, env = "RAKUTEN_T_PORT", default_value_t = 1)]
            port: u16,
        },
    }
}
