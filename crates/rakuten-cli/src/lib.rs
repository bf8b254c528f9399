//! What every binary of the workspace does at start, written once so that they all behave alike:
//!
//! - [`start`]: reads `.env` (the environment wins over it), parses the command line with the
//!   binary's deprecated variable names still honoured (each use logged as a warning), lists the
//!   logging variables in every subcommand's `--help`, and starts the logs;
//! - logs: `RUST_LOG` filters (default given by the binary), `RAKUTEN_LOG_FORMAT` picks `text`
//!   (default; ANSI colours only on a terminal) or `json` (one JSON object per line), on stdout;
//! - [`exit_invalid`]: a setting that fails validation prints one line naming the flag and its
//!   variable (`error: invalid setting --port / RAKUTEN_GATEWAY_PORT: …`) and exits 2, without a
//!   backtrace whatever `RUST_BACKTRACE` says; clap's own errors (unparsable value, unknown
//!   flag) also exit 2 and name the variable too;
//! - [`secret_arg`]: the clap value parser for secret settings, whose refusal names the flag and
//!   its variable in the same form but never quotes the value (D-secret-settings-never-echoed);
//! - [`number`]: clap value parsers for whole numbers and seconds whose refusal names the flag,
//!   the variable, the value and what the setting takes (D-setting-refusal-one-line);
//! - a missing required setting is one line naming its flag and variable (D-setting-refusal-one-line);
//! - [`exit_on_error`]: an error prints `error: …` with its cause chain once, on stderr, and
//!   exits 1, or 2 when a [`SetupError`] in it says the operator must fix the configuration or
//!   the environment (a read-only database, a missing file; D-exit-2-or-3), or 3 when what it
//!   needs does not answer yet (database, Redis, the listening port; D-exit-2-or-3);
//! - [`check_env_example`]: the test every binary runs on its `.env.example` against `--help`;
//! - [`migrations`]: released migrations keep the checksum databases recorded when only their
//!   comments were reworded.

pub mod migrations;
pub mod number;
pub mod secret_arg;

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

use std::ffi::OsString;
use std::fmt::Display;
use std::io::IsTerminal;
use std::process::ExitCode;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Arg, ArgMatches, Command, CommandFactory, FromArgMatches};

/// The variable choosing the log format.
pub const LOG_FORMAT_VAR: &str = "RAKUTEN_LOG_FORMAT";

/// Shown at the end of every subcommand's `--help`: the two variables every binary reads.
pub const LOG_HELP: &str = "\
Logs (every binary):
      RUST_LOG       log filter, e.g. `info` or `order_gateway=debug,info` [env: RUST_LOG]
      RAKUTEN_LOG_FORMAT
                     `text` (default) or `json`: one JSON object per line [env: RAKUTEN_LOG_FORMAT]";

/// A deprecated environment variable still read in place of its current name.
#[derive(Debug, Clone, Copy)]
pub struct Alias {
    /// The old name (read only when `current` is not set).
    pub deprecated: &'static str,
    /// The name the setting has now.
    pub current: &'static str,
}

/// Loads `.env`, parses the command line of `C`, starts the logs (filter `default_log` unless
/// `RUST_LOG` says otherwise) and returns the parsed command line. `--help` / `--version` print
/// and exit 0; a command-line error exits 2 (see the crate docs).
pub fn start<C: CommandFactory + FromArgMatches>(default_log: &str, aliases: &[Alias]) -> C {
    start_with(default_log, aliases, LogOutput::Stdout)
}

/// Where the logs go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogOutput {
    /// Standard output (services).
    Stdout,
    /// Standard error (tools whose stdout is their result).
    Stderr,
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

/// Points each argument whose variable is `current` at `deprecated` when only the deprecated
/// one is set (`lookup` reads the environment). Returns the command and the aliases used.
fn apply_aliases(
    mut cmd: Command,
    aliases: &[Alias],
    lookup: impl Fn(&str) -> Option<OsString>,
) -> (Command, Vec<Alias>) {
    let mut used = Vec::new();
    for a in aliases {
        if lookup(a.current).is_some() || lookup(a.deprecated).is_none() {
            continue;
        }
        let mut hit = false;
        let subs: Vec<String> = cmd
            .get_subcommands()
            .map(|s| s.get_name().to_owned())
            .collect();
        for (sub, id) in args_with_env(&cmd, a.current) {
            hit = true;
            cmd = match sub {
                Some(s) if subs.contains(&s) => {
                    cmd.mut_subcommand(s, |sc| sc.mut_arg(id, |arg| arg.env(a.deprecated)))
                }
                _ => cmd.mut_arg(id, |arg| arg.env(a.deprecated)),
            };
        }
        if hit {
            used.push(*a);
        }
    }
    (cmd, used)
}

/// `(subcommand, arg id)` of every argument read from `env`.
fn args_with_env(cmd: &Command, env: &str) -> Vec<(Option<String>, String)> {
    let is = |a: &Arg| a.get_env().is_some_and(|e| e == env);
    let mut out: Vec<(Option<String>, String)> = cmd
        .get_arguments()
        .filter(|a| is(a))
        .map(|a| (None, a.get_id().to_string()))
        .collect();
    for sc in cmd.get_subcommands() {
        out.extend(
            sc.get_arguments()
                .filter(|a| is(a))
                .map(|a| (Some(sc.get_name().to_owned()), a.get_id().to_string())),
        );
    }
    out
}

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
fn env_for_flag(cmd: &Command, long: &str) -> Option<String> {
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

fn exit_clap(cmd: &Command, e: clap::Error) -> ! {
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

/// Starts the global log subscriber: `RUST_LOG` (else `default_log`) as the filter,
/// [`LOG_FORMAT_VAR`] `text` or `json`. An unknown format exits 2.
fn init_logs(default_log: &str, output: LogOutput) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_log));
    let format = std::env::var(LOG_FORMAT_VAR).unwrap_or_default();
    let format = match parse_log_format(&format) {
        Ok(f) => f,
        Err(reason) => {
            stderr_line!("error: invalid setting {LOG_FORMAT_VAR}: {reason}");
            std::process::exit(2)
        }
    };
    let writer = move || -> Box<dyn std::io::Write> {
        match output {
            LogOutput::Stdout => Box::new(std::io::stdout()),
            LogOutput::Stderr => Box::new(std::io::stderr()),
        }
    };
    let terminal = match output {
        LogOutput::Stdout => std::io::stdout().is_terminal(),
        LogOutput::Stderr => std::io::stderr().is_terminal(),
    };
    // A log line that cannot be written is dropped. By default the subscriber reports the failed
    // write with `eprint!`, which panics when standard error is a closed pipe (`serve 2>&1 |
    // head -1`): the gateway exited 101 and the worker's signal task died, so it ignored SIGTERM.
    // The service must outlive its log reader.
    match format {
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .with_current_span(false)
            .with_writer(writer)
            .log_internal_errors(false)
            .init(),
        LogFormat::Text => tracing_subscriber::fmt()
            .with_env_filter(filter)
            // Colour codes only when a terminal reads them, not in log files.
            .with_ansi(terminal)
            .with_writer(writer)
            .log_internal_errors(false)
            .init(),
    }
}

/// A log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Parses [`LOG_FORMAT_VAR`]; empty = text.
///
/// # Errors
/// Anything but `text`, `json` or empty.
pub fn parse_log_format(s: &str) -> Result<LogFormat, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "" | "text" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        other => Err(format!("{other:?} is not a log format; use text or json")),
    }
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
/// the flag, the variable and the value; the settings of the services use [`number`], which says
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

/// A start-up failure that the operator fixes in the configuration or the environment, not a
/// fault of the program. Attach it as the context of the error
/// (`.context(SetupError::new("RAKUTEN_POLL_DB_PATH", …))`); [`exit_on_error`] then exits with
/// its [`Self::exit_code`]:
/// - 2 ([`Self::new`]): something only the operator can change — a read-only database file, a
///   missing file, a file that is no database. The code of a bad setting, which systemd's
///   `RestartPreventExitStatus=2` does not restart (D-exit-2-or-3).
/// - 3 ([`Self::unavailable`]): something that may come by itself — a database or Redis that does
///   not answer yet, a port an old process still holds. A supervisor should restart the service
///   (with back-off); a PostgreSQL that is still booting must not stop it for good (D-exit-2-or-3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupError {
    var: &'static str,
    message: String,
    unavailable: bool,
}

impl SetupError {
    /// `message` says what failed and names `var` (the variable to look at) and what it holds
    /// (an address, a file, a URL without its password). Exit code 2.
    pub fn new(var: &'static str, message: impl Into<String>) -> Self {
        SetupError {
            var,
            message: message.into(),
            unavailable: false,
        }
    }

    /// [`Self::new`] for what another process may soon fix: a server that does not answer, a
    /// port in use. Exit code 3, which supervisors restart.
    pub fn unavailable(var: &'static str, message: impl Into<String>) -> Self {
        SetupError {
            unavailable: true,
            ..Self::new(var, message)
        }
    }

    /// When `e` says the database (named by `var`) holds a migration this release does not have
    /// (sqlx's `VersionMissing`), or one of the same version with other contents
    /// (`VersionMismatch`): the schema belongs to another application sharing the database, to a
    /// newer release, or to a modified build. The operator gives the service its own database or
    /// schema (exit 2, D-exit-2-or-3), where any other failed migration is a fault (exit 1).
    pub fn foreign_migration(e: &sqlx::Error, var: &'static str) -> Option<Self> {
        use sqlx::migrate::MigrateError;
        let sqlx::Error::Migrate(m) = e else {
            return None;
        };
        match **m {
            MigrateError::VersionMissing(v) => Some(Self::migrated_elsewhere(var, v, false)),
            MigrateError::VersionMismatch(v) => Some(Self::migrated_elsewhere(var, v, true)),
            _ => None,
        }
    }

    /// When `e` is PostgreSQL saying the URL's `search_path` names no existing schema
    /// (`3F000`, "no schema has been selected to create in"), directly or inside a failed
    /// migration: the operator creates the schema or fixes the URL (exit 2, D-exit-2-or-3).
    pub fn missing_schema(e: &sqlx::Error, var: &'static str) -> Option<Self> {
        let db = match e {
            sqlx::Error::Database(db) => db,
            sqlx::Error::Migrate(m) => match &**m {
                sqlx::migrate::MigrateError::Execute(sqlx::Error::Database(db))
                | sqlx::migrate::MigrateError::ExecuteMigration(sqlx::Error::Database(db), _) => db,
                _ => return None,
            },
            _ => return None,
        };
        (db.code().as_deref() == Some("3F000")).then(|| {
            Self::new(
                var,
                format!(
                    "the database ({var}) has no schema to create tables in: the schema the URL's \
                     `search_path` names does not exist. Create it (`CREATE SCHEMA …`) or fix \
                     the URL"
                ),
            )
        })
    }

    fn migrated_elsewhere(var: &'static str, version: i64, modified: bool) -> Self {
        let what = if modified {
            format!("holds migration {version} with contents other than this release's")
        } else {
            format!("holds migration {version}, which this release does not know")
        };
        // A URL setting is PostgreSQL's, where a schema of its own is the lighter way out; a
        // path is an SQLite file, which has no schemas.
        let way_out = if var.ends_with("_URL") {
            "Give each service its own database, or its own schema (add \
             `?options=-c%20search_path%3D<schema>` to the URL)"
        } else {
            "Give each service its own database file"
        };
        Self::new(
            var,
            format!(
                "the database ({var}) {what}: it was migrated by another application sharing \
                 the database, by a newer release or by a modified build. {way_out}; never start \
                 an older release on a newer schema"
            ),
        )
    }

    /// 2 for the operator to fix, 3 for a restart to retry.
    pub fn exit_code(&self) -> u8 {
        if self.unavailable { 3 } else { 2 }
    }

    /// The variable to look at.
    pub fn var(&self) -> &'static str {
        self.var
    }
}

impl Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SetupError {}

/// `e` and its causes on one line (`context: cause: cause`), each cause once: a cause whose text
/// its parent already ends with (sqlx's database errors repeat their inner error) is left out.
pub fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    let mut last = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !last.is_empty() && last.ends_with(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
        last = text;
    }
    line
}

/// Ends `main`: `Ok` → success; `Err` → `error: …` with its causes on one line of stderr (no
/// backtrace), printed once (D-setting-refusal-one-line): exit 2 when the chain holds a [`SetupError`], else
/// exit 1. With JSON logs the error is also a log record, for the log collector; text logs would
/// only show the same line twice on a terminal.
pub fn exit_on_error(r: anyhow::Result<()>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let line = error_line(&e);
            let format = std::env::var(LOG_FORMAT_VAR).unwrap_or_default();
            if parse_log_format(&format) == Ok(LogFormat::Json) {
                tracing::error!(error = %line, "stopped on an error");
            }
            stderr_line!("error: {line}");
            match e.downcast_ref::<SetupError>() {
                Some(setup) => ExitCode::from(setup.exit_code()),
                None => ExitCode::FAILURE,
            }
        }
    }
}

/// Checks a binary's `.env.example` against its `--help` output: every variable the help names
/// (`[env: NAME…]`) must appear in the example (as `NAME=` or commented `#NAME=`), and the example
/// must name nothing else. `ignore`: variables of test-only builds (e.g. failpoints).
///
/// # Errors
/// A message saying which file is out of date, with the missing and the stale names, for a test
/// to print as is.
pub fn check_env_example(
    example_path: &str,
    example: &str,
    help_command: &str,
    help: &str,
    ignore: &[&str],
) -> Result<(), String> {
    let in_help: std::collections::BTreeSet<String> = help
        .split("[env:")
        .skip(1)
        .filter_map(|rest| {
            let name: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            (!name.is_empty() && !ignore.contains(&name.as_str())).then_some(name)
        })
        .collect();
    let in_example: std::collections::BTreeSet<String> = example
        .lines()
        .filter_map(|l| {
            let l = l.trim().trim_start_matches('#').trim_start();
            let (name, _) = l.split_once('=')?;
            let ok = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            ok.then(|| name.to_owned())
        })
        .collect();
    let missing: Vec<&String> = in_help.difference(&in_example).collect();
    let stale: Vec<&String> = in_example.difference(&in_help).collect();
    if missing.is_empty() && stale.is_empty() {
        return Ok(());
    }
    let list = |v: &[&String]| {
        if v.is_empty() {
            "none".to_owned()
        } else {
            v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        }
    };
    Err(format!(
        "{example_path} is out of date with `{help_command}`:\n  missing (add them, with a comment and the default): {}\n  stale (remove them, or add the setting back): {}",
        list(&missing),
        list(&stale)
    ))
}

/// For a binary's test: runs `bin args… --help` (empty environment, so no value leaks in) and
/// checks `example_path` against it with [`check_env_example`].
///
/// # Panics
/// The binary cannot run, the file cannot be read, or they disagree (the message lists the
/// missing and stale names).
pub fn assert_env_example_matches_help(
    bin: &str,
    args: &[&str],
    example_path: &str,
    ignore: &[&str],
) {
    let out = std::process::Command::new(bin)
        .args(args)
        .arg("--help")
        .env_clear()
        .output()
        .unwrap_or_else(|e| panic!("cannot run {bin}: {e}"));
    assert!(out.status.success(), "{bin} --help failed");
    let help = String::from_utf8_lossy(&out.stdout);
    let example = std::fs::read_to_string(example_path)
        .unwrap_or_else(|e| panic!("cannot read {example_path}: {e}"));
    let name = std::path::Path::new(bin)
        .file_name()
        .map_or_else(|| bin.to_owned(), |n| n.to_string_lossy().into_owned());
    let command = std::iter::once(name.as_str())
        .chain(args.iter().copied())
        .chain(["--help"])
        .collect::<Vec<_>>()
        .join(" ");
    if let Err(msg) = check_env_example(example_path, &example, &command, &help, ignore) {
        panic!("{msg}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// D-exit-2-or-3: another application's migration is the operator's to fix (exit 2), with
    /// the way out of its engine: a schema of its own on PostgreSQL, a file of its own on SQLite.
    #[test]
    fn a_foreign_migration_is_a_setting_error_with_its_engines_way_out() {
        use sqlx::migrate::MigrateError;
        let missing = sqlx::Error::Migrate(Box::new(MigrateError::VersionMissing(20991231)));
        let pg = SetupError::foreign_migration(&missing, "RAKUTEN_POLL_DB_URL").unwrap();
        assert_eq!(pg.exit_code(), 2);
        assert!(
            pg.to_string()
                .contains("holds migration 20991231, which this release"),
            "{pg}"
        );
        assert!(pg.to_string().contains("search_path"), "{pg}");
        let file = SetupError::foreign_migration(&missing, "RAKUTEN_POLL_DB_PATH").unwrap();
        assert!(file.to_string().contains("its own database file"), "{file}");
        assert!(!file.to_string().contains("search_path"), "{file}");
        let changed = sqlx::Error::Migrate(Box::new(MigrateError::VersionMismatch(3)));
        let changed = SetupError::foreign_migration(&changed, "RAKUTEN_GATEWAY_DB_URL").unwrap();
        assert!(
            changed.to_string().contains("with contents other than"),
            "{changed}"
        );
        let other = sqlx::Error::Migrate(Box::new(MigrateError::Dirty(3)));
        assert!(SetupError::foreign_migration(&other, "RAKUTEN_GATEWAY_DB_URL").is_none());
    }

    #[derive(Debug, Parser)]
    #[command(name = "t")]
    struct Cli {
        #[command(subcommand)]
        cmd: Sub,
    }

    #[derive(Debug, clap::Subcommand)]
    enum Sub {
        Serve {
            #[arg(long, env = "RAKUTEN_T_PORT", default_value_t = 1)]
            port: u16,
        },
    }

    #[test]
    fn a_setting_error_names_the_flag_and_the_variable() {
        let msg = invalid_setting_message(&Cli::command(), "RAKUTEN_T_PORT", "must be > 0");
        assert_eq!(msg, "invalid setting --port / RAKUTEN_T_PORT: must be > 0");
        let msg = invalid_setting_message(&Cli::command(), "RAKUTEN_LOG_FORMAT", "bad");
        assert_eq!(msg, "invalid setting RAKUTEN_LOG_FORMAT: bad");
    }

    #[test]
    fn a_deprecated_variable_is_read_only_when_the_current_one_is_unset() {
        let aliases = [Alias {
            deprecated: "T_OLD_PORT",
            current: "RAKUTEN_T_PORT",
        }];
        let old_only = |k: &str| (k == "T_OLD_PORT").then(|| OsString::from("7"));
        let (cmd, used) = apply_aliases(Cli::command(), &aliases, old_only);
        assert_eq!(used.len(), 1);
        assert_eq!(flag_for_env(&cmd, "T_OLD_PORT").as_deref(), Some("--port"));
        let both = |_: &str| Some(OsString::from("7"));
        let (cmd, used) = apply_aliases(Cli::command(), &aliases, both);
        assert!(used.is_empty());
        assert_eq!(
            flag_for_env(&cmd, "RAKUTEN_T_PORT").as_deref(),
            Some("--port")
        );
    }

    #[test]
    fn an_env_example_check_names_missing_and_stale_variables() {
        let help = "--port <P>\n  Port [env: RAKUTEN_T_PORT=] [default: 1]\n--x [env: RAKUTEN_T_X]\n[env: RAKUTEN_T_TEST_ONLY=]";
        let good = "# port\n#RAKUTEN_T_PORT=1\nRAKUTEN_T_X=y\n";
        assert_eq!(
            check_env_example(
                "a.env",
                good,
                "t serve --help",
                help,
                &["RAKUTEN_T_TEST_ONLY"]
            ),
            Ok(())
        );
        let bad = "#RAKUTEN_T_PORT=1\nRAKUTEN_T_OLD=1\n";
        let e = check_env_example(
            "a.env",
            bad,
            "t serve --help",
            help,
            &["RAKUTEN_T_TEST_ONLY"],
        )
        .unwrap_err();
        assert!(
            e.contains("a.env is out of date with `t serve --help`"),
            "{e}"
        );
        assert!(
            e.contains("missing (add them, with a comment and the default): RAKUTEN_T_X"),
            "{e}"
        );
        assert!(
            e.contains("stale (remove them, or add the setting back): RAKUTEN_T_OLD"),
            "{e}"
        );
    }

    /// D-exit-2-or-3, D-setting-refusal-one-line: a set-up failure is told apart however deep its context sits, and
    /// a cause its parent already quotes is printed once.
    #[test]
    fn a_setup_error_is_found_in_the_chain_and_each_cause_printed_once() {
        let io = std::io::Error::from(std::io::ErrorKind::AddrInUse);
        let e = anyhow::Error::new(io)
            .context(SetupError::unavailable(
                "RAKUTEN_T_PORT",
                "cannot listen on 127.0.0.1:1 (RAKUTEN_T_PORT)",
            ))
            .context("starting");
        assert_eq!(
            e.downcast_ref::<SetupError>().map(SetupError::var),
            Some("RAKUTEN_T_PORT")
        );
        assert_eq!(
            e.downcast_ref::<SetupError>().map(SetupError::exit_code),
            Some(3),
            "a port in use may be freed: a supervisor restarts exit 3"
        );
        assert_eq!(
            SetupError::new("RAKUTEN_T_PATH", "read-only").exit_code(),
            2
        );
        assert_eq!(
            error_line(&e),
            "starting: cannot listen on 127.0.0.1:1 (RAKUTEN_T_PORT): address in use"
        );
        let repeated = anyhow::anyhow!("(code: 8) read-only").context("db: (code: 8) read-only");
        assert_eq!(error_line(&repeated), "db: (code: 8) read-only");
        assert!(anyhow::anyhow!("x").downcast_ref::<SetupError>().is_none());
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

    #[test]
    fn log_format_is_text_or_json() {
        assert_eq!(parse_log_format(""), Ok(LogFormat::Text));
        assert_eq!(parse_log_format("JSON"), Ok(LogFormat::Json));
        assert!(parse_log_format("xml").is_err());
    }
}
