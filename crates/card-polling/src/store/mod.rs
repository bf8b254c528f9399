//! Storage behind narrow traits with verb-noun methods, one per capability
//! ([`capability`]: [`ServiceStore`], [`AccountStore`], [`ImportStore`], [`PackageStore`],
//! [`AssetStore`], [`ItemStore`], [`ClaimStore`], [`ScheduleStore`], [`RetentionStore`]; [`Store`]
//! is all of them), and one implementation written once for both engines
//! (D-one-sql-store-per-engine):
//! - `error.rs`: [`StoreError`], how a database error maps to it, and how an import row is named
//!   in its messages.
//! - [`types`]: what the capabilities take and answer, one file per subject (import, packages,
//!   items, schedule, retention); re-exported here.
//! - `engine.rs`: the macro that compiles `sql/` once per engine.
//! - `sql/`: the SQL, one file per capability (`observe.rs`, `accounts.rs`, `import.rs`,
//!   `package.rs`, `assets.rs`, `query.rs` items in scope, `items.rs` claim/attempt/finish/expire,
//!   `schedule.rs`, `retention.rs`) beside the shared steps (`enqueue.rs` snapshot and
//!   enqueue-or-merge, `bulk.rs`, `rows.rs`), compiled once per engine by [`sqlite`] (the default)
//!   and [`postgres`] (`RAKUTEN_POLL_DB_URL`), which also open the pool and embed their
//!   migrations (`migrations/sqlite`, `migrations/postgres`, same numbering).
//! - `dialect.rs`: what the engines force apart (write transaction, row locking, aggregates and
//!   collation, time arithmetic, boolean literal), each with its reason.
//! - `common.rs`: row decoders, the item-list filter and pagination, the migration source, generic
//!   over the sqlx database.
//! - `tests/`: the store checks, one file per capability, run unchanged on both engines.
//!
//! Every method that changes state is one transaction on PostgreSQL and one SAVEPOINT of the
//! group-commit writer's `BEGIN IMMEDIATE` batch on SQLite (D-sqlite-writer-group-commit; a large import is several,
//! D-import-in-parts), and every transition is a guarded `UPDATE … WHERE status … RETURNING`: zero rows is
//! a typed error, never a silent no-op. Enqueueing happens inside the transaction that commits the business fact.

pub mod capability;
mod common;
mod dialect;
mod engine;
mod error;
mod hot;
pub mod observe;
pub mod postgres;
mod retry;
pub mod sqlite;
mod sqlite_sync;
#[cfg(test)]
mod tests;
pub mod types;

use engine::one_implementation;

pub use capability::{
    AccountStore, AssetStore, ClaimStore, ImportStore, ItemStore, PackageStore, RetentionStore,
    ScheduleStore, ServiceStore, Store,
};
pub use error::{StoreError, StoreResult, import_row, is_read_only};
pub use types::import::*;
pub use types::items::*;
pub use types::package::*;
pub use types::retention::*;
pub use types::schedule::*;

/// How long a request waits for the database (SQLite busy timeout, PostgreSQL `lock_timeout`,
/// a pool connection) unless `RAKUTEN_POLL_DB_LOCK_TIMEOUT_MS` says otherwise.
pub const DEFAULT_LOCK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

// Both engines' migrations, checked where both are in view, against what was released.
#[cfg(test)]
mod released_tests {
    use super::common;

    #[test]
    fn released_migrations_keep_their_statements() {
        for (files, released) in [
            (super::sqlite::MIGRATIONS, super::sqlite::RELEASED),
            (super::postgres::MIGRATIONS, super::postgres::RELEASED),
        ] {
            let embedded = common::Embedded(files, released);
            rakuten_cli::migrations::check_released(&embedded.files(), released).unwrap();
        }
    }
}
