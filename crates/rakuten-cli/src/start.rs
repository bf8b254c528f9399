//! What a binary does first: reads `.env` (all of it or nothing; the environment wins over it),
//! parses the command line with the binary's deprecated variable names still honoured (each use
//! logged as a warning), lists the logging variables in every subcommand's `--help`, and starts
//! the logs.

use clap::{ArgMatches, CommandFactory, FromArgMatches};

use crate::aliases::{Alias, apply_aliases};
use crate::logs::{LOG_HELP, LogOutput, init_logs};
use crate::refusal::exit_clap;

/// Loads `.env`, parses the command line of `C`, starts the logs (filter `default_log` unless
/// `RUST_LOG` says otherwise) and returns the parsed command line. `--help` / `--version` print
/// and exit 0; a command-line error exits 2 (see the crate docs).
pub fn start<C: CommandFactory + FromArgMatches>(default_log: &str, aliases: &[Alias]) -> C {
    start_with(default_log, aliases, LogOutput::Stdout)
}

/// Stops the binary (exit 2, one line) when a `.env` file is found but a line of it does not
/// parse. `dotenvy` loads a file line by line and stops at the first bad one, so the settings
/// before it applied and those after it silently did not: a typo above `RAKUTEN_*_DB_URL` started
/// a service on its default SQLite file instead (D-env-file-all-or-nothing). The whole file is read once
/// first, without setting anything; only a file that parses throughout is then loaded.
fn refuse_malformed_dotenv() {
    let Ok(lines) = dotenvy::dotenv_iter() else {
        return; // no `.env` (or none readable): the environment and flags only
    };
    for line in lines {
        if let Err(e) = line {
            stderr_line!(
                "error: invalid settings file .env: {}; every line must be NAME=value, a comment \
                 (#) or blank; nothing from the file was applied",
                dotenv_error_place(&e)
            );
            std::process::exit(2);
        }
    }
}

/// Where a `.env` parse error is, without the line's value (it may be a token): the line's number
/// in `./.env` and the name before its `=`, if any.
fn dotenv_error_place(e: &dotenvy::Error) -> String {
    let dotenvy::Error::LineParse(bad, _) = e else {
        return e.to_string();
    };
    // dotenvy reports the text from where parsing failed, not always the whole line: the first
    // line of the file that holds it is the one.
    let bad = bad.lines().next().unwrap_or_default().trim();
    let text = std::fs::read_to_string(".env").unwrap_or_default();
    let found = (!bad.is_empty())
        .then(|| text.lines().enumerate().find(|(_, l)| l.contains(bad)))
        .flatten();
    match found {
        // The mark is invisible in "line 1 does not parse (\u{feff}RAKUTEN_…)".
        Some((0, line)) if line.starts_with('\u{feff}') => "line 1 starts with a byte order mark \
             (U+FEFF): save the file as UTF-8 without one"
            .to_owned(),
        Some((n, line)) => {
            let name = line
                .split_once('=')
                .map(|(name, _)| format!(" ({})", name.trim().chars().take(64).collect::<String>()))
                .unwrap_or_default();
            format!("line {} does not parse{name}", n + 1)
        }
        None => "a line does not parse".to_owned(),
    }
}

/// [`start`] with the logs on `output`.
pub fn start_with<C: CommandFactory + FromArgMatches>(
    default_log: &str,
    aliases: &[Alias],
    output: LogOutput,
) -> C {
    refuse_malformed_dotenv();
    let dotenv = dotenvy::dotenv();
    let mut cmd = C::command().mut_subcommands(|sc| sc.after_help(LOG_HELP));
    if cmd.get_subcommands().next().is_none() {
        cmd = cmd.after_help(LOG_HELP);
    }
    let (mut cmd, used) = apply_aliases(cmd, aliases, |k| std::env::var_os(k));
    let parsed = cmd
        .try_get_matches_from_mut(std::env::args_os())
        .and_then(|m: ArgMatches| C::from_arg_matches(&m));
    let cli = match parsed {
        Ok(c) => c,
        Err(e) => exit_clap(&cmd, e),
    };
    init_logs(default_log, output);
    if let Err(e) = dotenv
        && !e.not_found()
    {
        tracing::warn!(error = %e, "cannot read .env; using the environment and flags only");
    }
    for a in used {
        tracing::warn!(
            deprecated = a.deprecated,
            current = a.current,
            "deprecated setting name: {} is read because {} is not set; rename it",
            a.deprecated,
            a.current
        );
    }
    cli
}
