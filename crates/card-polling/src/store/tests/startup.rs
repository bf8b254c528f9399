//! Opening a store on PostgreSQL while another instance migrates.

use super::*;

/// CI failure: an instance started with a 0.3 s request lock timeout while another session held
/// the migration table; `lock_timeout` cancelled its migration and start-up failed. Migrations now
/// wait on their own session; only requests are bounded.
#[test_util::lane(postgres)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_waits_for_another_instances_migration_past_the_request_lock_timeout() {
    let schema = PgSchema::new().await;
    drop(PgStore::open(&schema.url).await.unwrap());
    let mut other = sqlx::PgConnection::connect(&schema.url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut other).await.unwrap();
    sqlx::query("LOCK TABLE _sqlx_migrations IN ACCESS EXCLUSIVE MODE")
        .execute(&mut other)
        .await
        .unwrap();
    let url = schema.url.clone();
    let opening =
        tokio::spawn(async move { PgStore::open_with(&url, Duration::from_millis(300)).await });
    let holder = backend_pid(&mut other).await;
    wait_until_blocked_by(holder, "the migration to wait for the lock").await;
    // A real delay, the behaviour under test: the migration keeps waiting past the 300 ms request
    // lock timeout (the old start-up had failed by now).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!opening.is_finished(), "start-up did not wait for the lock");
    sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();
    let store = tokio::time::timeout(Duration::from_secs(60), opening)
        .await
        .expect("start-up ends once the lock is gone")
        .unwrap();
    assert!(store.is_ok(), "{:?}", store.err());
}
