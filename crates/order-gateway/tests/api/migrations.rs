//! Migrations stay per engine (`migrations/sqlite`, `migrations/postgres`); these checks make sure
//! every file on disk is embedded in the binary, letter for letter, and applied by `open`.

use std::path::Path;

use order_gateway::store::postgres::{self, PgStore};
use order_gateway::store::sqlite::{self, SqliteStore};
use sqlx::Connection;
use sqlx::migrate::Migrator;

use test_util::PgSchema;

/// `(version, sql)` of every `NNNN_name.sql` file in `migrations/<engine>`, by version.
fn files_on_disk(engine: &str) -> Vec<(i64, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(engine);
    let mut files: Vec<(i64, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let version = name
                .split('_')
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name}: not NNNN_name.sql"));
            (version, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no migrations in {}", dir.display());
    files
}

fn assert_embedded(engine: &str, migrator: &Migrator) -> Vec<i64> {
    let on_disk = files_on_disk(engine);
    let embedded: Vec<(i64, String)> = migrator
        .iter()
        .map(|m| (m.version, m.sql.as_str().to_owned()))
        .collect();
    assert_eq!(
        embedded.iter().map(|m| m.0).collect::<Vec<_>>(),
        on_disk.iter().map(|m| m.0).collect::<Vec<_>>(),
        "{engine}: the embedded migrations are not the files on disk"
    );
    for ((v, sql), (_, file)) in embedded.iter().zip(&on_disk) {
        assert_eq!(sql, file, "{engine}: migration {v} differs from its file");
    }
    on_disk.into_iter().map(|m| m.0).collect()
}

const APPLIED: &str = "SELECT version FROM _sqlx_migrations WHERE success ORDER BY version";

#[tokio::test]
async fn every_sqlite_migration_file_is_embedded_and_applied() {
    let versions = assert_embedded("sqlite", &sqlite::migrator());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let applied: Vec<i64> = sqlx::query_scalar(APPLIED)
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert_eq!(applied, versions);
    order_gateway::store::OrderStore::close(&store).await;
}

#[test_util::lane(postgres)]
#[tokio::test]
async fn every_postgres_migration_file_is_embedded_and_applied() {
    let versions = assert_embedded("postgres", &postgres::migrator());
    let db = PgSchema::new().await;
    let store = PgStore::open(&db.url).await.unwrap();
    let applied: Vec<i64> = sqlx::query_scalar(APPLIED)
        .fetch_all(store.pool())
        .await
        .unwrap();
    assert_eq!(applied, versions);
    order_gateway::store::OrderStore::close(&store).await;
}

/// sqlx's SQLite driver binds `$n` by its number, not by position, which is what lets one SQL
/// text serve both engines: a `$1` used twice takes one value, and `$2` written before `$1`
/// still takes the second value bound.
#[tokio::test]
async fn sqlite_binds_numbered_parameters_by_number() {
    let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:")
        .await
        .unwrap();
    let (a, b, c): (String, String, String) = sqlx::query_as("SELECT $2, $1, $1 || $2")
        .bind("first")
        .bind("second")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!((a.as_str(), b.as_str()), ("second", "first"));
    assert_eq!(c, "firstsecond");
    // A NULL filter through the portable cast, `$1` twice: every row; a value: only its rows.
    let filter = "SELECT COUNT(*) FROM (SELECT 'x' AS site UNION ALL SELECT 'y') \
                  WHERE (CAST($1 AS TEXT) IS NULL OR site = $1) AND $2 = 7";
    for (site, want) in [(None, 2), (Some("x"), 1), (Some("z"), 0)] {
        let n: i64 = sqlx::query_scalar(filter)
            .bind(site)
            .bind(7_i64)
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(n, want, "site filter {site:?}");
    }
}
