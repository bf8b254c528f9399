//! Every scenario on a fresh PostgreSQL schema per test (`RAKUTEN_POLL_DB_URL` pointed at it).

use card_polling::Application;
use card_polling::settings::{Secret, Settings};

/// This engine's folder under `migrations/`.
pub const MIGRATIONS_DIR: &str = "postgres";

/// The store the raw-SQL fixtures and checks read through.
pub type EngineStore = card_polling::store::postgres::PgStore;

/// A fresh schema, and the settings pointed at it.
pub async fn fresh_database(settings: &mut Settings) -> Option<crate::PgSchema> {
    let schema = crate::PgSchema::new().await;
    settings.db_url = Some(Secret::new(schema.url.clone()));
    Some(schema)
}

/// The app's store.
pub fn engine_store(app: &Application) -> EngineStore {
    app.postgres().expect("the app runs on PostgreSQL").clone()
}

/// Locks the app's `priority_items` table (`ACCESS EXCLUSIVE`) from a second session; the test
/// ends it with `ROLLBACK`.
pub async fn hold_write_lock(settings: &Settings) -> sqlx::PgConnection {
    use sqlx::Connection;
    let url = settings
        .db_url
        .as_ref()
        .expect("a PostgreSQL app")
        .expose()
        .to_owned();
    let mut c = sqlx::PgConnection::connect(&url)
        .await
        .expect("second session");
    sqlx::query("BEGIN").execute(&mut c).await.expect("begin");
    sqlx::query("LOCK TABLE priority_items IN ACCESS EXCLUSIVE MODE")
        .execute(&mut c)
        .await
        .expect("table lock");
    c
}

scenarios!();
