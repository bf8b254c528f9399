//! Probes: `/livez`, `/readyz` (503 when the database does not answer), and
//! `/health` in full only for an operator token (D-health-detail-for-operators).

use std::sync::Arc;

use rakuten_types::ManualClock;

use crate::helpers::{TestApp, answer, spawn_app, spawn_app_with, spawn_pg_app};
use test_util::PgSchema;

async fn probe(app: &TestApp, path: &str) -> crate::helpers::Answer {
    answer(app.client.get(app.url(path)).send().await.unwrap()).await
}

/// `/health`'s whole answer, with the test's token.
async fn health_with_token(app: &TestApp) -> serde_json::Value {
    answer(app.get("/health").send().await.unwrap())
        .await
        .assert_ok()
        .clone()
}

async fn readiness_follows_the_database(app: &TestApp) {
    assert_eq!(probe(app, "/livez").await.assert_ok()["status"], "alive");
    assert_eq!(probe(app, "/readyz").await.assert_ok()["status"], "ready");
    app.state.store.close().await;
    probe(app, "/readyz").await.assert_err(503, 1503);
    // The process still answers.
    assert_eq!(probe(app, "/livez").await.assert_ok()["status"], "alive");
}

#[tokio::test]
async fn readyz_is_503_once_the_sqlite_store_is_closed_while_livez_stays_200() {
    readiness_follows_the_database(&spawn_app().await).await;
}

#[test_util::lane(postgres)]
#[tokio::test]
async fn readyz_is_503_once_the_postgres_pool_is_closed_while_livez_stays_200() {
    let db = Arc::new(PgSchema::new().await);
    let app = spawn_pg_app(db, ManualClock::at_fixed_date(), |_| {}).await;
    readiness_follows_the_database(&app).await;
}

#[tokio::test]
async fn an_anonymous_health_call_sees_only_the_overall_status() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    let anon = app.health_anonymous().await;
    let d = anon.assert_ok();
    assert_eq!(d, &serde_json::json!({"status": "ok"}));
    let full = app.health().await;
    assert_eq!(full.data()["active"][0]["task_id"], "po-1");
    assert_eq!(full.data()["workers"][0]["worker_id"], "w1");
}

/// A worker token gets the status only: the detail is an operator's (D-health-detail-for-operators);
/// a wrong token is 401.
#[tokio::test]
async fn a_worker_token_sees_only_the_health_status_and_a_wrong_token_is_401() {
    let app = spawn_app_with(|s| {
        s.worker_tokens = Some("pc-1:worker-token-0123456789".parse().unwrap());
    })
    .await;
    app.submit("po-1").await.assert_ok();
    let worker = answer(
        app.client
            .get(app.url("/health"))
            .bearer_auth("worker-token-0123456789")
            .send()
            .await
            .unwrap(),
    )
    .await;
    let data = worker.assert_ok();
    assert_eq!(data.as_object().unwrap().len(), 1, "{data}");
    assert_eq!(data["status"], "ok");
    answer(
        app.client
            .get(app.url("/health"))
            .bearer_auth("nope")
            .send()
            .await
            .unwrap(),
    )
    .await
    .assert_err(401, 1001);
}

/// D-writes-failing-is-503-and-unready: while its batches fail as a
/// whole (a full disk; here the write lock held by another connection past the busy timeout),
/// `/readyz` is 503; the next batch that commits makes it ready again — the writer is not wedged.
#[tokio::test]
async fn readyz_is_503_while_the_sqlite_writer_fails_and_ready_again_once_it_commits() {
    use sqlx::Connection;

    let app = spawn_app().await;
    let url = format!("sqlite://{}", app.settings.db_path.display());
    let mut lock = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut lock)
        .await
        .unwrap();
    app.submit("po-locked").await.assert_err(503, 1503);
    // Unready once a batch has met the lock. On a loaded CI machine the submit's 503 once came
    // before `/readyz` saw the writer failing; wait for it, bounded (a condition, not a sleep).
    let a = test_util::wait_for(
        "/readyz to say unready while writes fail",
        std::time::Duration::from_secs(10),
        async || {
            let a = probe(&app, "/readyz").await;
            if a.status == 503 {
                Ok(a)
            } else {
                Err(format!("{:?}", a.body))
            }
        },
    )
    .await;
    a.assert_err(503, 1503);
    assert_eq!(probe(&app, "/livez").await.assert_ok()["status"], "alive");
    // `/health` says so too, to a monitor without a token and in full (D-gateway-health-content).
    assert_eq!(
        probe(&app, "/health").await.assert_ok()["status"],
        "degraded"
    );
    let full = health_with_token(&app).await;
    assert_eq!(full["status"], "degraded", "{full}");
    assert_eq!(full["writes_failing"], true, "{full}");

    lock.close().await.unwrap();
    app.submit("po-after").await.assert_ok();
    assert_eq!(probe(&app, "/readyz").await.assert_ok()["status"], "ready");
    // The failing state outlives the batch by `FAILING_WINDOW` only for storage failures; a
    // lock held past the timeout is over once a batch commits.
    let full = health_with_token(&app).await;
    assert_eq!(full["writes_failing"], false, "{full}");
    assert_eq!(full["status"], "ok", "{full}");
}
