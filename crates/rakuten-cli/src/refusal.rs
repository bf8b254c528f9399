//! A refused setting is one line naming its flag and its variable, and the process exits 2
//! without a backtrace (D-setting-refusal-one-line): a value the binary's own validation refuses
//! ([`exit_invalid`]), and clap's own errors — a missing required setting, an unparsable number,
//! an unknown flag — which clap alone would print over several lines naming only the flag.

use std::fmt::Display;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Arg, Command, CommandFactory};

/// The flag (`--port`) of the argument read from `env`, searched in `cmd` and its subcommands.
pub fn flag_for_env(cmd: &Command, env: &str) -> Option<String> {
    std::iter::once(cmd)
        .chain(cmd.get_subcommands())
        .flat_map(Command::get_arguments)
        .find(|a| a.get_env().is_some_and(|e| e == env))
        .and_then(Arg::get_long)
        .map(|l| format!("--{l}"))
}

/// The variable of the argument whose flag is `--long`.
pub(crate) fn env_for_flag(cmd: &Command, long: &str) -> Option<String> {
    std::iter::once(cmd)
        .chain(cmd.get_subcommands())
        .flat_map(Command::get_arguments)
        .find(|a| a.get_long() == Some(long))
        .and_then(Arg::get_env)
        .map(|e| e.to_string_lossy().into_owned())
}

/// The one line a bad setting prints: `invalid setting --flag / VAR: reason` (just the
/// variable when it has no flag).
pub fn invalid_setting_message(cmd: &Command, env: &str, reason: impl Display) -> String {
    match flag_for_env(cmd, env) {
        Some(flag) => format!("invalid setting {flag} / {env}: {reason}"),
        None => format!("invalid setting {env}: {reason}"),
    }
}

/// Prints `error: invalid setting --flag / VAR: reason` on stderr and exits 2 (no backtrace).
pub fn exit_invalid<C: CommandFactory>(env: &str, reason: impl Display) -> ! {
    stderr_line!(
        "error: {}",
        invalid_setting_message(&C::command(), env, reason)
    );
    std::process::exit(2)
}

pub(crate) fn exit_clap(cmd: &Command, e: clap::Error) -> ! {
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit();
    }
    if let Some(lines) = missing_settings(cmd, &e) {
        for l in lines {
            stderr_line!("error: {l}");
        }
        std::process::exit(2)
    }
    if let Some(line) = unparsable_number(cmd, &e) {
        stderr_line!("error: {line}");
        std::process::exit(2)
    }
    let _ = e.print();
    if let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg)
        && let Some(long) = arg
            .split_whitespace()
            .next()
            .and_then(|f| f.strip_prefix("--"))
        && let Some(env) = env_for_flag(cmd, long)
    {
        stderr_line!("note: --{long} is also set by the variable {env} (environment or .env)");
    }
    std::process::exit(2)
}

/// `the following required arguments were not provided` as one line per setting naming its flag
/// and variable (clap's own text is several lines and shows only the flag); `None` for another
/// error, or when a missing argument has no variable.
fn missing_settings(cmd: &Command, e: &clap::Error) -> Option<Vec<String>> {
    if e.kind() != ErrorKind::MissingRequiredArgument {
        return None;
    }
    let Some(ContextValue::Strings(args)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    args.iter()
        .map(|a| {
            let flag = a.split_whitespace().next()?;
            let env = env_for_flag(cmd, flag.strip_prefix("--")?)?;
            Some(format!(
                "missing setting {flag} / {env}: it is required; set the variable (environment or \
                 .env) or pass the flag"
            ))
        })
        .collect()
}

/// A number refused by clap's own parser (`invalid digit found in string`) as one line naming
/// the flag, the variable and the value; the settings of the services use [`crate::number`], which says
/// the range too, so this only covers a setting that does not. `None` for another error.
fn unparsable_number(cmd: &Command, e: &clap::Error) -> Option<String> {
    use std::error::Error as _;
    let source = e.source()?;
    let what = if source.is::<std::num::ParseIntError>() {
        "a whole number"
    } else if source.is::<std::num::ParseFloatError>() {
        "a number"
    } else {
        return None;
    };
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    let Some(ContextValue::String(value)) = e.get(ContextKind::InvalidValue) else {
        return None;
    };
    let flag = arg.split_whitespace().next()?;
    let env = env_for_flag(cmd, flag.strip_prefix("--")?)?;
    Some(format!(
        "invalid setting {flag} / {env}: {value:?} is not {what}; it takes {what}"
    ))
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;
    use crate::test_cli::Cli;

    #[test]
    fn a_setting_error_names_the_flag_and_the_variable() {
        let msg = invalid_setting_message(&Cli::command(), "RAKUTEN_T_PORT", "must be > 0");
        assert_eq!(msg, "invalid setting --port / RAKUTEN_T_PORT: must be > 0");
        let msg = invalid_setting_message(&Cli::command(), "RAKUTEN_LOG_FORMAT", "bad");
        assert_eq!(msg, "invalid setting RAKUTEN_LOG_FORMAT: bad");
    }

    #[derive(Debug, Parser)]
    #[command(name = "t")]
    struct Required {
        #[arg(long, env = "RAKUTEN_T_TOKEN")]
        token: String,
        #[arg(long, env = "RAKUTEN_T_COUNT", default_value_t = 1)]
        count: u32,
    }

    /// D-setting-refusal-one-line: clap's several lines without the variable, and Rust's "invalid digit
    /// found in string", become one line naming the flag and the variable.
    #[test]
    fn a_missing_setting_or_an_unparsable_number_is_one_line_naming_the_variable() {
        let cmd = Required::command();
        let e = Required::try_parse_from(["t"]).unwrap_err();
        assert_eq!(
            missing_settings(&cmd, &e),
            Some(vec![
                "missing setting --token / RAKUTEN_T_TOKEN: it is required; set the variable \
                 (environment or .env) or pass the flag"
                    .to_owned()
            ])
        );
        let e = Required::try_parse_from(["t", "--token", "x", "--count", "lots"]).unwrap_err();
        assert_eq!(
            unparsable_number(&cmd, &e).as_deref(),
            Some(
                "invalid setting --count / RAKUTEN_T_COUNT: \"lots\" is not a whole number; it \
                 takes a whole number"
            )
        );
    }
}
