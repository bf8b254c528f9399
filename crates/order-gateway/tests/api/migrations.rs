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

/// Migrations 1 to `version` only: a database as an earlier release left it.
fn up_to(m: &Migrator, version: i64) -> Migrator {
    Migrator::with_migrations(m.iter().filter(|x| x.version <= version).cloned().collect())
}

/// A SQLite database at `path` migrated to `version`, holding `rows`, then opened by the store
/// (which applies the rest).
async fn sqlite_upgraded(path: &Path, version: i64, rows: &[&'static str]) -> SqliteStore {
    let mut conn =
        sqlx::SqliteConnection::connect(&format!("sqlite://{}?mode=rwc", path.display()))
            .await
            .unwrap();
    up_to(&sqlite::migrator(), version)
        .run(&mut conn)
        .await
        .unwrap();
    for sql in rows {
        sqlx::query(*sql).execute(&mut conn).await.unwrap();
    }
    conn.close().await.unwrap();
    SqliteStore::open(path).await.unwrap()
}

/// [`sqlite_upgraded`] on PostgreSQL.
async fn postgres_upgraded(db: &PgSchema, version: i64, rows: &[&'static str]) -> PgStore {
    let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
    up_to(&postgres::migrator(), version)
        .run(&mut conn)
        .await
        .unwrap();
    for sql in rows {
        sqlx::query(*sql).execute(&mut conn).await.unwrap();
    }
    conn.close().await.unwrap();
    PgStore::open(&db.url).await.unwrap()
}

/// Rows a gateway at 0009 wrote: a queued and a stale task, and an alert raised and cleared in
/// the same instant with an outbox row for each event, the cleared one written first.
const DATA_0009: &[&str] = &[
    "INSERT INTO tasks (task_id, site, intent_json, status, lease_count, created_at, updated_at) \
     VALUES ('po-q', 'rakuten', '{}', 'queued', 0, '2026-07-27T00:00:00.000Z', '2026-07-27T00:00:00.000Z')",
    "INSERT INTO alerts (alert_id, kind, subject, state, summary, task_id, raised_at, cleared_at) \
     VALUES ('al-1', 'task_queued_too_long', 'po-q', 'cleared', 's', 'po-q', \
             '2026-07-27T01:00:00.000Z', '2026-07-27T01:00:00.000Z')",
    "INSERT INTO alert_outbox (event_id, url, alert_id, body_json, state, attempts, \
     next_attempt_at, created_at) VALUES ('al-1:cleared', 'http://r.example/h', 'al-1', '{}', \
     'pending', 0, '2026-07-27T01:00:00.000Z', '2026-07-27T01:00:00.000Z')",
    "INSERT INTO alert_outbox (event_id, url, alert_id, body_json, state, attempts, \
     next_attempt_at, created_at) VALUES ('al-1:raised', 'http://r.example/h', 'al-1', '{}', \
     'pending', 0, '2026-07-27T01:00:00.000Z', '2026-07-27T01:00:00.000Z')",
];

const SEQS: &str = "SELECT event_id, seq FROM alert_outbox ORDER BY seq";
const TASKS: &str = "SELECT task_id, status, not_after FROM tasks ORDER BY task_id";

/// An upgrade keeps every task (no deadline) and numbers the events already written in the order
/// they happened, a raise before its clear (D-webhook-event-sequence); SQLite's rebuild of
/// `tasks` and `alerts` keeps their rows and keys.
#[tokio::test]
async fn migration_0010_keeps_tasks_and_numbers_existing_events_raise_first() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let store = sqlite_upgraded(&path, 9, DATA_0009).await;
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let seqs: Vec<(String, i64)> = sqlx::query_as(SEQS).fetch_all(&mut conn).await.unwrap();
    assert_eq!(
        seqs.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(),
        ["al-1:raised", "al-1:cleared"]
    );
    assert!(seqs[0].1 >= 1 && seqs[0].1 < seqs[1].1, "{seqs:?}");
    let tasks: Vec<(String, String, Option<String>)> =
        sqlx::query_as(TASKS).fetch_all(&mut conn).await.unwrap();
    assert_eq!(tasks, [("po-q".into(), "queued".into(), None)]);
    let broken: Vec<(String,)> = sqlx::query_as("SELECT \"table\" FROM pragma_foreign_key_check")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert!(broken.is_empty(), "{broken:?}");
    order_gateway::store::OrderStore::close(&store).await;
}

#[test_util::lane(postgres)]
#[tokio::test]
async fn postgres_migration_0010_keeps_tasks_and_numbers_existing_events_raise_first() {
    let db = PgSchema::new().await;
    let store = postgres_upgraded(&db, 9, DATA_0009).await;
    let seqs: Vec<(String, i64)> = sqlx::query_as(SEQS).fetch_all(store.pool()).await.unwrap();
    assert_eq!(
        seqs.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(),
        ["al-1:raised", "al-1:cleared"]
    );
    assert!(seqs[0].1 >= 1 && seqs[0].1 < seqs[1].1, "{seqs:?}");
    let tasks: Vec<(String, String, Option<String>)> =
        sqlx::query_as(TASKS).fetch_all(store.pool()).await.unwrap();
    assert_eq!(tasks, [("po-q".into(), "queued".into(), None)]);
    order_gateway::store::OrderStore::close(&store).await;
}

/// Rows a gateway at 0013 wrote: a task that ended `failed` with a later `paid` report, one that
/// ended `succeeded` after `paid`, and a queued one with no report.
const DATA_0013: &[&str] = &[
    "INSERT INTO tasks (task_id, site, intent_json, status, lease_owner, lease_count, created_at, \
     updated_at, outcome) VALUES ('po-late', 'rakuten', '{}', 'failed', 'w', 1, \
     '2026-07-27T00:00:00.000Z', '2026-07-27T00:00:00.000Z', 'failed')",
    "INSERT INTO tasks (task_id, site, intent_json, status, lease_owner, lease_count, created_at, \
     updated_at, outcome) VALUES ('po-ok', 'rakuten', '{}', 'succeeded', 'w', 1, \
     '2026-07-27T00:00:00.000Z', '2026-07-27T00:00:00.000Z', 'succeeded')",
    "INSERT INTO tasks (task_id, site, intent_json, status, lease_count, created_at, updated_at) \
     VALUES ('po-q', 'rakuten', '{}', 'queued', 0, '2026-07-27T00:00:00.000Z', \
     '2026-07-27T00:00:00.000Z')",
    "INSERT INTO task_reports (task_id, state, reported_at, worker_id, seq) VALUES \
     ('po-late', 'in_cart', '2026-07-27T00:01:00.000Z', 'w', 1), \
     ('po-late', 'paid', '2026-07-27T00:05:00.000Z', 'w', 2), \
     ('po-ok', 'in_cart', '2026-07-27T00:00:30.000Z', 'w', 1), \
     ('po-ok', 'paid', '2026-07-27T00:01:00.000Z', 'w', 2)",
];

const LATEST: &str = "SELECT task_id, latest_state FROM tasks ORDER BY task_id";

fn latest_0013() -> Vec<(String, Option<String>)> {
    vec![
        ("po-late".into(), Some("paid".into())),
        ("po-ok".into(), Some("paid".into())),
        ("po-q".into(), None),
    ]
}

/// An upgrade fills each task's latest reported state from its reports (the highest `seq`), so
/// a contradiction stored before it is still found (D-latest-state-on-the-task).
#[tokio::test]
async fn migration_0014_fills_each_tasks_latest_state_from_its_reports() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let store = sqlite_upgraded(&path, 13, DATA_0013).await;
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let latest: Vec<(String, Option<String>)> =
        sqlx::query_as(LATEST).fetch_all(&mut conn).await.unwrap();
    assert_eq!(latest, latest_0013());
    order_gateway::store::OrderStore::close(&store).await;
}

#[test_util::lane(postgres)]
#[tokio::test]
async fn postgres_migration_0014_fills_each_tasks_latest_state_from_its_reports() {
    let db = PgSchema::new().await;
    let store = postgres_upgraded(&db, 13, DATA_0013).await;
    let latest: Vec<(String, Option<String>)> = sqlx::query_as(LATEST)
        .fetch_all(store.pool())
        .await
        .unwrap();
    assert_eq!(latest, latest_0013());
    order_gateway::store::OrderStore::close(&store).await;
}
