//! How a binary ends on an error: [`exit_on_error`] prints `error: …` with its cause chain once,
//! on stderr, and exits 1, or 2 when a [`SetupError`] in it says the operator must fix the
//! configuration or the environment, or 3 when what it needs does not answer yet
//! (D-exit-2-or-3).

use std::fmt::Display;
use std::process::ExitCode;

use crate::logs::{LOG_FORMAT_VAR, LogFormat, parse_log_format};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
