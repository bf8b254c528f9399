//! What start-up builds from validated settings before the service runs: the carrier, the hint
//! channel and the store, each failure named by the setting to fix and its exit class
//! (D-startup-names-what-failed, D-exit-2-or-3). [`crate::settings`] only parses and validates.

use std::sync::Arc;

use anyhow::Context;

use rakuten_types::Clock;

use crate::domain::TokenHash;
use crate::hints::memory::MemoryChannel;
use crate::hints::redis::{ConnectError, RedisChannel};
use crate::hints::{Hints, QueueChannel};
use crate::settings::{HintChannelSetting, Settings};
use crate::store::postgres::PgStore;
use crate::store::sqlite::SqliteStore;
use crate::store::{AccountStore, ServiceStore, Store};
use crate::upstream::Upstream;

/// The carrier the settings choose: the HTTP carrier when `RAKUTEN_POLL_CARRIER_URL` is set,
/// else the simulated carrier.
///
/// # Errors
/// The HTTP client cannot be built.
pub fn carrier(settings: &Settings) -> anyhow::Result<Arc<dyn Upstream>> {
    Ok(match &settings.carrier_url {
        Some(url) => {
            let c = crate::upstream::HttpCarrier::new(
                url.expose().clone(),
                settings.carrier_token.clone(),
            )?
            .with_max_answer_bytes(settings.carrier_max_answer_bytes);
            tracing::info!(carrier = %c.redacted_url(), token = settings.carrier_token.is_some(), max_answer_bytes = c.max_answer_bytes(), "HTTP carrier");
            Arc::new(c)
        }
        None => Arc::new(crate::upstream::SimCarrier::new(settings.sim_config())),
    })
}

/// A database or Redis URL as start-up errors may print it: scheme, host, port and path, never
/// its password ([`crate::upstream::http::redact_url`]).
pub(crate) fn printable_url(url: &str) -> String {
    reqwest::Url::parse(url)
        .map(|u| crate::upstream::http::redact_url(&u))
        .unwrap_or_else(|_| "(unparsable URL)".into())
}

/// Whether PostgreSQL did not answer (no connection, none in time, still starting up, out of
/// connections): what a restart may fix (exit 3). A URL that does not parse, a role or database
/// that does not exist, a wrong password are answers, the operator's to fix (exit 2)
/// (D-exit-2-or-3).
fn not_answering(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut => true,
        sqlx::Error::Database(db) => matches!(db.code().as_deref(), Some("57P03" | "53300")),
        _ => false,
    }
}

/// The message of an SQLite file (or its folder) that this user cannot write (D-exit-2-or-3).
fn read_only_message(path: &std::path::Path) -> String {
    format!(
        "the SQLite database {} (RAKUTEN_POLL_DB_PATH) is read-only: this user cannot write the \
         file or its folder (WAL mode writes its -wal and -shm files beside it)",
        path.display()
    )
}

/// Connects the configured hint channel.
///
/// # Errors
/// Redis not answering, or its CA file unreadable: a [`rakuten_cli::SetupError`] (the service
/// refuses to start rather than run without its channel).
pub async fn connect_hints(settings: &Settings) -> anyhow::Result<Hints> {
    let channel: Arc<dyn QueueChannel> = match &settings.hint_channel {
        HintChannelSetting::Memory => Arc::new(MemoryChannel::default()),
        HintChannelSetting::Redis(url) => {
            let ca = match &settings.redis_ca_path {
                Some(path) => Some(std::fs::read(path).with_context(|| {
                    rakuten_cli::SetupError::new(
                        "RAKUTEN_POLL_REDIS_CA_PATH",
                        format!("reading RAKUTEN_POLL_REDIS_CA_PATH {}", path.display()),
                    )
                })?),
                None => None,
            };
            Arc::new(RedisChannel::connect(url.expose(), ca).await.map_err(|e| {
                let message = format!(
                    "connecting the Redis hint channel {} (RAKUTEN_POLL_HINT_CHANNEL)",
                    printable_url(url.expose())
                );
                // Redis may still be starting: exit 3, a restart retries; a URL or a
                // password Redis refuses exits 2 (D-exit-2-or-3).
                let setup = match &e {
                    ConnectError::NotAnswering(_) => {
                        rakuten_cli::SetupError::unavailable("RAKUTEN_POLL_HINT_CHANNEL", message)
                    }
                    ConnectError::Refused(_) => {
                        rakuten_cli::SetupError::new("RAKUTEN_POLL_HINT_CHANNEL", message)
                    }
                };
                anyhow::Error::new(e).context(setup)
            })?)
        }
    };
    Ok(Hints::new(channel, settings.hint_prefix.clone()))
}

/// The database as start-up messages name it: where it is (never a password) and the variable
/// that chose it.
pub(crate) struct DatabaseName {
    /// `host:port/db (RAKUTEN_POLL_DB_URL)` or `path (RAKUTEN_POLL_DB_PATH)`.
    shown: String,
    /// The variable to fix.
    var: &'static str,
}

impl DatabaseName {
    fn of(settings: &Settings) -> Self {
        let (shown, var) = match &settings.db_url {
            Some(url) => (
                format!("{} (RAKUTEN_POLL_DB_URL)", printable_url(url.expose())),
                "RAKUTEN_POLL_DB_URL",
            ),
            None => (
                format!("{} (RAKUTEN_POLL_DB_PATH)", settings.db_path.display()),
                "RAKUTEN_POLL_DB_PATH",
            ),
        };
        DatabaseName { shown, var }
    }
}

/// The opened database: the engine's own store (its commit hook, its shutdown) beside the same
/// store behind the storage contract.
pub(crate) struct OpenedStore {
    /// The SQLite store, when the database is SQLite.
    pub(crate) sqlite: Option<SqliteStore>,
    /// The PostgreSQL store, when the database is PostgreSQL.
    pub(crate) postgres: Option<PgStore>,
    /// Either, behind the storage contract.
    pub(crate) store: Arc<dyn Store>,
    /// How start-up messages name it.
    pub(crate) name: DatabaseName,
}

/// Opens (and migrates) PostgreSQL when `RAKUTEN_POLL_DB_URL` is set, else the SQLite file;
/// `instance` is written on the audit facts of system transitions.
///
/// # Errors
/// A [`rakuten_cli::SetupError`] naming the variable to fix and whether a restart may help.
pub(crate) async fn open_store(settings: &Settings, instance: &str) -> anyhow::Result<OpenedStore> {
    // PostgreSQL when `RAKUTEN_POLL_DB_URL` is set, else the SQLite file.
    let lock_timeout = std::time::Duration::from_millis(settings.db_lock_timeout_ms);
    let name = DatabaseName::of(settings);
    let (database, database_var) = (&name.shown, name.var);
    // A database that cannot be opened or written is the operator's to fix (exit 2); a
    // PostgreSQL that does not answer may be booting, a restart retries (exit 3); a migration
    // that fails is neither (exit 1) (D-exit-2-or-3).
    let opening = |e: sqlx::Error, message: String| -> anyhow::Error {
        if let Some(foreign) = rakuten_cli::SetupError::foreign_migration(&e, database_var)
            .or_else(|| rakuten_cli::SetupError::missing_schema(&e, database_var))
        {
            anyhow::Error::new(e).context(foreign)
        } else if matches!(e, sqlx::Error::Migrate(_)) {
            anyhow::Error::new(e).context(message)
        } else if let Some(held) = sqlite_writer::FileLock::held_elsewhere(&e) {
            // Another card-polling process writes this file (D-one-process-per-sqlite-file).
            // `held` already says all the lock's error would (said twice otherwise): the
            // setup error alone.
            let message = format!("opening the SQLite database {database}: {held}");
            anyhow::Error::new(rakuten_cli::SetupError::unavailable(database_var, message))
        } else if crate::store::is_read_only(&e) {
            anyhow::Error::new(e).context(rakuten_cli::SetupError::new(
                database_var,
                read_only_message(&settings.db_path),
            ))
        } else if settings.db_url.is_some() && not_answering(&e) {
            anyhow::Error::new(e)
                .context(rakuten_cli::SetupError::unavailable(database_var, message))
        } else {
            anyhow::Error::new(e).context(rakuten_cli::SetupError::new(database_var, message))
        }
    };
    let (sqlite, postgres, store): (_, _, Arc<dyn Store>) = match &settings.db_url {
        Some(url) => {
            // `database` shows only the URL's scheme, host, port and database (it may hold
            // a password).
            let pg = PgStore::open_with(url.expose(), lock_timeout)
                .await
                .map_err(|e| {
                    opening(
                        e,
                        format!(
                            "opening the PostgreSQL database {database}: is it running and \
                             reachable (it must answer within {} s), and does the database \
                             exist?",
                            crate::store::postgres::CONNECT_TIMEOUT.as_secs()
                        ),
                    )
                })?
                .with_instance(instance);
            (None, Some(pg.clone()), Arc::new(pg))
        }
        None => {
            let sqlite = SqliteStore::open_with(&settings.db_path, lock_timeout)
                .await
                .map_err(|e| {
                    opening(
                        e,
                        format!(
                            "opening the SQLite database {database}: the file must be an \
                             SQLite database, and it and its folder writable (WAL mode \
                             writes beside it)"
                        ),
                    )
                })?
                .with_instance(instance);
            (Some(sqlite.clone()), None, Arc::new(sqlite))
        }
    };
    Ok(OpenedStore {
        sqlite,
        postgres,
        store,
        name,
    })
}

/// Records the feature's go-live instant on first start (the first write: a database that opens
/// but cannot be written fails here, named as such).
///
/// # Errors
/// The write fails; a read-only file or a failing disk as a [`rakuten_cli::SetupError`].
pub(crate) async fn record_go_live(
    store: &dyn ServiceStore,
    clock: &dyn Clock,
    settings: &Settings,
    name: &DatabaseName,
) -> anyhow::Result<()> {
    let (database, database_var) = (&name.shown, name.var);
    // The first write: a database that opens but cannot be written (a read-only file) fails
    // here, so it is named here too: read-only, not busy (D-exit-2-or-3).
    let enabled_at = store
        .meta_feature_enabled_at(clock.now())
        .await
        .map_err(|e| {
            let message = format!("writing to the database {database}");
            if e.is_read_only() {
                let ro = read_only_message(&settings.db_path);
                anyhow::Error::new(e).context(rakuten_cli::SetupError::new(database_var, ro))
            } else if sqlite_writer::WriterError::is_storage_failure(&e) {
                anyhow::Error::new(e).context(rakuten_cli::SetupError::new(database_var, message))
            } else {
                anyhow::Error::new(e).context(message)
            }
        })?;
    tracing::info!(%enabled_at, "priority polling feature enabled since");
    tracing::info!(%enabled_at, "priority polling feature enabled since");
    Ok(())
}

/// The hash of the bootstrap admin token, refused when an imported account holds the same
/// token (D-admin-token-is-nobody-elses).
///
/// # Errors
/// [`crate::settings::InvalidSetting`] naming `RAKUTEN_POLL_ADMIN_TOKEN`, or the read failed.
pub(crate) async fn admin_token_hash(
    store: &dyn AccountStore,
    settings: &Settings,
    name: &DatabaseName,
) -> anyhow::Result<TokenHash> {
    let database = &name.shown;
    // An imported account holding the admin token would sign in as the bootstrap admin
    // (checked first), so its own role would never apply (D-admin-token-is-nobody-elses): a bad setting,
    // refused before the service listens.
    let admin_hash = TokenHash::of(settings.admin_token.expose());
    if let Some(account) = store
        .account_find_by_token(&admin_hash)
        .await
        .with_context(|| format!("reading the accounts of the database {database}"))?
    {
        return Err(crate::settings::InvalidSetting {
            name: "RAKUTEN_POLL_ADMIN_TOKEN",
            reason: format!(
                "is also the token of the imported account {:?} (role {}): the two would \
                 collapse into one super_admin; choose another admin token, or replace that \
                 account's token",
                account.id,
                account.role.as_str()
            ),
        }
        .into());
    }
    Ok(admin_hash)
}
