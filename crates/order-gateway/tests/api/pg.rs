//! A fresh PostgreSQL schema per test: `DATABASE_URL_TEST` (default
//! `postgres://postgres@127.0.0.1:5432/test`), schema `t_<uuid>`, reached through
//! `options=-c search_path=…` in the URL so every pool, listener and child process lands in it.
//! Dropped when the last holder lets go. PostgreSQL not answering is a loud failure, never a skip.

use std::time::Duration;

use sqlx::Connection;

/// The server the PostgreSQL tests use.
pub fn base_url() -> String {
    std::env::var("DATABASE_URL_TEST")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// One fresh schema.
#[derive(Debug)]
pub struct TestDb {
    pub schema: String,
    /// The URL of the schema (search_path set), for `RAKUTEN_GATEWAY_DB_URL`.
    pub url: String,
}

fn with_search_path(base: &str, schema: &str) -> String {
    let sep = if base.contains('?') { '&' } else { '?' };
    // The schema name doubles as the application name, so a test can find its own sessions.
    format!("{base}{sep}options=-c%20search_path%3D{schema}&application_name={schema}")
}

impl TestDb {
    pub async fn new() -> TestDb {
        let base = base_url();
        let schema = format!("t_{}", uuid::Uuid::now_v7().simple());
        let mut conn = tokio::time::timeout(Duration::from_secs(10), sqlx::PgConnection::connect(&base))
            .await
            .unwrap_or_else(|_| panic!("PostgreSQL at {base} (DATABASE_URL_TEST) did not answer within 10 s; the PostgreSQL tests need it running"))
            .unwrap_or_else(|e| panic!("PostgreSQL at {base} (DATABASE_URL_TEST) is not answering: {e}; the PostgreSQL tests need it running"));
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&mut conn)
            .await
            .expect("CREATE SCHEMA");
        let _ = conn.close().await;
        let url = with_search_path(&base, &schema);
        TestDb { schema, url }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let (base, schema) = (base_url(), self.schema.clone());
        // Drop runs inside the test's runtime; do the async cleanup on a thread of its own.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                if let Ok(mut c) = sqlx::PgConnection::connect(&base).await {
                    let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                        "DROP SCHEMA IF EXISTS {schema} CASCADE"
                    )))
                    .execute(&mut c)
                    .await;
                    let _ = c.close().await;
                }
            });
        })
        .join();
    }
}
