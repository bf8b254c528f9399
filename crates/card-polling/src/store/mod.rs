//! Storage behind a narrow trait with verb-noun methods ([`Store`], the contract; this file), one
//! implementation written once for both engines (D-one-sql-store-per-engine):
//! - `sql/`: the SQL, one file per concern (`mod.rs` the trait impl, `domain.rs` host domain,
//!   `enqueue.rs` snapshot and enqueue-or-merge, `items.rs` claim/attempt/finish/close/expire,
//!   `query.rs` scoped reads, `rows.rs`, `schedule.rs` ordinary polling and manual triggers),
//!   compiled once per engine by [`sqlite`] (the default) and [`postgres`]
//!   (`RAKUTEN_POLL_DB_URL`), which also open the pool and embed their migrations
//!   (`migrations/sqlite`, `migrations/postgres`, same numbering).
//! - `dialect.rs`: what the engines force apart (write transaction, row locking, aggregates and
//!   collation, time arithmetic, boolean literal), each with its reason.
//! - `common.rs`: row decoders, the item-list filter and pagination, the migration source, generic
//!   over the sqlx database.
//! - `tests.rs`: the store checks, run unchanged on both engines.
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
