//! A throw-away PostgreSQL schema per test: `DATABASE_URL_TEST` (default [`DEFAULT_URL`]),
//! schema `t_<uuid v7>`, reached through `options=-c search_path=…` in the URL so that every
//! pool, listener and child process given that URL lands in it. Dropped with its holder.
//! PostgreSQL not answering is a loud failure, never a skip: a suite that silently skipped its
//! PostgreSQL half would pass without testing it.

use std::time::Duration;

use sqlx::Connection;

/// The server the PostgreSQL tests use when `DATABASE_URL_TEST` is unset.
pub const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// How long PostgreSQL may take to accept the connection that creates a schema before the test
/// fails (a stopped server refuses at once; a wedged one would otherwise hang the suite).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The server the PostgreSQL tests use: `DATABASE_URL_TEST`, or [`DEFAULT_URL`].
pub fn base_url() -> String {
    std::env::var("DATABASE_URL_TEST").unwrap_or_else(|_| DEFAULT_URL.into())
}

/// One fresh, empty schema on [`base_url`], dropped (with everything in it) when this value is.
#[derive(Debug)]
pub struct PgSchema {
    /// The schema's name, `t_<32 hex digits>`; also the sessions' `application_name`.
    pub name: String,
    /// [`base_url`] with the schema as its search path, for a service's database URL setting.
    pub url: String,
}

/// [`base_url`] with `search_path` set to `schema`, which need not exist (a test of what a
/// service does with a schema that was never created).
pub fn url_with_search_path(schema: &str) -> String {
    with_search_path(&base_url(), schema)
}

/// `base` with `search_path` set to `schema`; the schema name doubles as the application name,
/// so a test can find its own sessions in `pg_stat_activity` (a service may override it).
fn with_search_path(base: &str, schema: &str) -> String {
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}options=-c%20search_path%3D{schema}&application_name={schema}")
}

impl PgSchema {
    /// Creates the schema.
    ///
    /// # Panics
    /// PostgreSQL does not answer within 10 s or refuses the connection, or refuses
    /// `CREATE SCHEMA`; the message names the URL and says the PostgreSQL tests need it.
    pub async fn new() -> PgSchema {
        let base = base_url();
        let name = format!("t_{}", uuid::Uuid::now_v7().simple());
        let mut conn = tokio::time::timeout(CONNECT_TIMEOUT, sqlx::PgConnection::connect(&base))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "POSTGRESQL IS NOT ANSWERING at {base} (DATABASE_URL_TEST) within 10 s: the \
                     PostgreSQL tests need it (start it, or point DATABASE_URL_TEST at one)"
                )
            })
            .unwrap_or_else(|e| {
                panic!(
                    "POSTGRESQL IS NOT ANSWERING at {base} (DATABASE_URL_TEST) ({e}): the \
                     PostgreSQL tests need it (start it, or point DATABASE_URL_TEST at one)"
                )
            });
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {name}")))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("CREATE SCHEMA {name} on {base}: {e}"));
        let _ = conn.close().await;
        let url = with_search_path(&base, &name);
        PgSchema { name, url }
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        let name = self.name.clone();
        // Own thread and runtime: `Drop` usually runs inside the test's runtime, which cannot
        // block on itself.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                if let Ok(mut c) = sqlx::PgConnection::connect(&base_url()).await {
                    // A stray session of a failed test still holding a lock: leave the schema
                    // behind rather than hang the suite.
                    let _ = sqlx::query("SET lock_timeout = '10s'")
                        .execute(&mut c)
                        .await;
                    let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                        "DROP SCHEMA IF EXISTS {name} CASCADE"
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_path_joins_a_url_with_or_without_a_query() {
        assert_eq!(
            with_search_path("postgres://h/db", "t_1"),
            "postgres://h/db?options=-c%20search_path%3Dt_1&application_name=t_1"
        );
        assert_eq!(
            with_search_path("postgres://h/db?sslmode=disable", "t_1"),
            "postgres://h/db?sslmode=disable&options=-c%20search_path%3Dt_1&application_name=t_1"
        );
    }
}
