//! Store-level checks: the schema enforces the invariants even when code is bypassed, and the
//! group-commit writer batches concurrent writes while isolating a failing one. (The
//! driver-neutral checks, run against SQLite and PostgreSQL alike, are in `conformance`.)

use std::sync::Arc;
use std::time::Duration;

use order_gateway::LeaseScope;
use order_gateway::store::sqlite::SqliteStore;
use order_gateway::store::{
    LeaseRequest, NewTask, OrderStore, RenewRequest, StoreError, TaskFilter,
};
use rakuten_types::{Clock, ManualClock, TaskId, WorkerId};
use sqlx::Connection;

fn new_task(id: &str) -> NewTask {
    NewTask {
        task_id: TaskId::parse(id).unwrap(),
        site: "rakuten".into(),
        intent_json: "{}".into(),
        not_after: None,
    }
}

#[tokio::test]
async fn the_database_itself_refuses_a_second_active_task_and_a_return_to_queued() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let clock = ManualClock::at_fixed_date();
    for id in ["a", "b"] {
        store.task_insert(new_task(id), clock.now()).await.unwrap();
    }
    let req = LeaseRequest {
        worker_id: WorkerId::parse("w1").unwrap(),
        site: None,
        ttl: Duration::from_secs(300),
        scope: LeaseScope::Global,
    };
    store.task_lease(req, clock.now()).await.unwrap();
    store.close().await;

    // Bypass the code: raw SQL against the file.
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let second = sqlx::query(
        "UPDATE tasks SET status = 'leased', lease_owner = 'w2', lease_expires_at = '2030-01-01T00:00:00.000Z', \
         lease_count = 1, lease_token = 'x', gate_key = '*' WHERE task_id = 'b'",
    )
    .execute(&mut conn)
    .await;
    let err = second.expect_err("two active tasks must be refused by the schema");
    assert!(err.to_string().contains("UNIQUE"), "{err}");
    let requeue = sqlx::query("UPDATE tasks SET status = 'queued' WHERE task_id = 'a'")
        .execute(&mut conn)
        .await;
    assert!(
        requeue.is_err(),
        "a granted task must not go back to queued"
    );
    let no_outcome = sqlx::query("UPDATE tasks SET status = 'succeeded' WHERE task_id = 'a'")
        .execute(&mut conn)
        .await;
    assert!(no_outcome.is_err(), "a terminal status needs its outcome");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_share_commits_and_a_failing_one_rolls_back_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("s.db")).await.unwrap());
    let clock = ManualClock::at_fixed_date();
    let (c0, o0) = store.write_stats();
    let mut handles = Vec::new();
    for i in 0..64 {
        let (store, now) = (store.clone(), clock.now());
        handles.push(tokio::spawn(async move {
            if i % 2 == 0 {
                store
                    .task_insert(new_task(&format!("t{i}")), now)
                    .await
                    .map(|_| ())
            } else {
                // Renewing a lease nobody holds fails inside its own savepoint.
                store
                    .task_renew(
                        RenewRequest {
                            task_id: TaskId::parse(&format!("t{}", i - 1)).unwrap(),
                            worker_id: WorkerId::parse("nobody").unwrap(),
                            lease_token: None,
                            ttl: Duration::from_secs(300),
                        },
                        now,
                    )
                    .await
                    .map(|_| ())
            }
        }));
    }
    let mut failures = 0;
    for h in handles {
        match h.await.unwrap() {
            Ok(()) => {}
            Err(StoreError::LeaseInvalid(_) | StoreError::TaskNotFound(_)) => failures += 1,
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    assert_eq!(failures, 32);
    let page = store
        .task_list(TaskFilter {
            limit: 200,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.total, 32, "every successful insert committed");
    let (c1, o1) = store.write_stats();
    assert_eq!(o1 - o0, 64);
    assert!(
        c1 - c0 < 64,
        "64 concurrent writes took {} commits",
        c1 - c0
    );
    store.close().await;
}
