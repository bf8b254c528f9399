//! Every scenario, and the soak, on a fresh temporary SQLite file per test.

use card_polling::Application;
use card_polling::settings::Settings;

/// The lanes a scenario test needs on this engine besides its own (`#[super::lane]`,
/// `#[super::lane(redis)]`): none, SQLite needs only the toolchain.
pub use test_util::lane;

/// This engine's folder under `migrations/`.
pub const MIGRATIONS_DIR: &str = "sqlite";
pub use card_polling::store::sqlite::RELEASED;

/// The store the raw-SQL fixtures and checks read through.
pub type EngineStore = card_polling::store::sqlite::SqliteStore;

/// Nothing to create: `Settings::for_tests` already points at a file in the test's temp dir.
pub async fn fresh_database(_settings: &mut Settings) -> Option<crate::PgSchema> {
    None
}

/// The app's store.
pub fn engine_store(app: &Application) -> EngineStore {
    app.sqlite().clone()
}

/// Takes the write lock of the app's database file from a second connection (`BEGIN IMMEDIATE`);
/// the test ends it with `ROLLBACK`.
pub async fn hold_write_lock(settings: &Settings) -> sqlx::SqliteConnection {
    hold_file_write_lock(&settings.db_path).await
}

/// [`hold_write_lock`] on the database file at `path`.
pub async fn hold_file_write_lock(path: &std::path::Path) -> sqlx::SqliteConnection {
    use sqlx::Connection;
    let opts = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
    let mut c = sqlx::SqliteConnection::connect_with(&opts)
        .await
        .expect("second connection");
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut c)
        .await
        .expect("write lock");
    c
}

scenarios!();

// The group-commit writer is SQLite's (D-sqlite-writer-group-commit).
#[path = "group_commit.rs"]
mod group_commit;

// Simulated hours of random traffic: long, so on one engine only (D-soak-test-sqlite-only).
#[path = "soak.rs"]
mod soak;

// The HTTP edge (TLS, connection bounds, strict JSON) does not depend on the engine.
#[path = "edge.rs"]
mod edge;

// The console in a real browser: pages do not depend on the engine.
#[path = "console.rs"]
mod console;
