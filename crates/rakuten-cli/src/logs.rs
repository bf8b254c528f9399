//! The logs of every binary: `RUST_LOG` filters (default given by the binary),
//! [`LOG_FORMAT_VAR`] picks `text` (default; ANSI colours only on a terminal) or `json` (one JSON
//! object per line), on stdout or, for tools whose stdout is their result, stderr.

use std::io::IsTerminal;

/// The variable choosing the log format.
pub const LOG_FORMAT_VAR: &str = "RAKUTEN_LOG_FORMAT";

/// Shown at the end of every subcommand's `--help`: the two variables every binary reads.
pub const LOG_HELP: &str = "\
Logs (every binary):
      RUST_LOG       log filter, e.g. `info` or `order_gateway=debug,info` [env: RUST_LOG]
      RAKUTEN_LOG_FORMAT
                     `text` (default) or `json`: one JSON object per line [env: RAKUTEN_LOG_FORMAT]";

/// Where the logs go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogOutput {
    /// Standard output (services).
    Stdout,
    /// Standard error (tools whose stdout is their result).
    Stderr,
}

/// Starts the global log subscriber: `RUST_LOG` (else `default_log`) as the filter,
/// [`LOG_FORMAT_VAR`] `text` or `json`. An unknown format exits 2.
pub(crate) fn init_logs(default_log: &str, output: LogOutput) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_format_is_text_or_json() {
        assert_eq!(parse_log_format(""), Ok(LogFormat::Text));
        assert_eq!(parse_log_format("JSON"), Ok(LogFormat::Json));
        assert!(parse_log_format("xml").is_err());
    }
}
