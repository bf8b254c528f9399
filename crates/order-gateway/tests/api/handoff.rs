//! A submit that finds a long-poll waiting in its own process inserts the task and grants it to
//! that poll in one transaction (D-handoff-in-submit-commit): the grant is committed before the
//! submit's answer leaves, survives a crash, and a poll gone by then leaves a lease that expires to
//! `stale`. Another PostgreSQL instance's poll is still woken through `NOTIFY` and leases itself.

use std::sync::Arc;
use std::time::Duration;

use order_gateway::store::{LeaseAttempt, LeaseRequest, NewTask};
use rakuten_types::{Clock, ManualClock, TaskId, WorkerId};
use serde_json::{Value, json};
use test_util::PgSchema;

use crate::binary::Binary;
use crate::helpers::{Engine, TOKEN, TestApp, answer, spawn_pg_app};

const INTENT: &str = r#"{"item_url": "https://item.rakuten.co.jp/shop/a/", "quantity": 1}"#;

/// Starts a long-poll of `worker` and waits until it sits in the hand-off queue.
async fn waiting_poll(app: &TestApp, worker: &str) -> tokio::task::JoinHandle<Value> {
    let before = app.state.lease_notifier.handoff_waiters();
    let (client, url) = (
        app.client.clone(),
        app.url(&format!("/api/orders/lease?worker_id={worker}&wait=20")),
    );
    let poll = tokio::spawn(async move {
        client
            .get(url)
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    });
    let notifier = app.state.lease_notifier.clone();
    test_util::wait_until(
        "the poll to wait for a hand-off",
        Duration::from_secs(20),
        async || notifier.handoff_waiters() > before,
    )
    .await;
    poll
}

async fn a_submit_hands_its_task_to_a_waiting_poll_in_its_own_commit(engine: Engine) {
    let app = engine.spawn(|_| {}).await;
    let poll = waiting_poll(&app, "w-hand").await;
    let woken_before = app.state.lease_notifier.attempts().woken;
    app.submit("po-hand").await.assert_ok();
    // Committed with the submit: leased before the poll's answer is even read.
    let t = app.task("po-hand").await;
    assert_eq!(t.assert_ok()["status"], "leased", "{:?}", t.body);
    assert_eq!(t.data()["lease_owner"], "w-hand");
    assert_eq!(t.data()["lease_count"], 1);
    let g = poll.await.unwrap();
    assert_eq!(g["data"]["task_id"], "po-hand", "{g}");
    assert_eq!(g["data"]["lease_count"], 1, "{g}");
    // The grant is the live one: its token reports.
    let token = g["data"]["lease_token"].as_str().unwrap().to_owned();
    app.report(
        "po-hand",
        json!({"worker_id": "w-hand", "lease_token": token, "state": "paid", "terminal": true}),
    )
    .await
    .assert_ok();
    // One lease transaction for the waiting poll: the submit's.
    assert_eq!(app.state.lease_notifier.attempts().woken, woken_before + 1);
    assert_eq!(app.state.lease_notifier.handoff_waiters(), 0);
}

async fn a_submit_whose_waiting_poll_cannot_take_the_task_leaves_it_queued(engine: Engine) {
    let app = engine.spawn(|_| {}).await;
    // The gate is held by another worker's task: the waiting poll's attempt inside the submit
    // finds the gate busy; the new task stays queued and the submit still succeeds.
    app.leased("po-held", "w-holder").await;
    let poll = waiting_poll(&app, "w-wait").await;
    app.submit("po-next").await.assert_ok();
    assert_eq!(app.status_of("po-next").await, "queued");
    // Once the gate is free the poll gets the task, as before.
    app.report(
        "po-held",
        json!({"worker_id": "w-holder", "state": "paid", "terminal": true}),
    )
    .await
    .assert_ok();
    let g = poll.await.unwrap();
    assert_eq!(g["data"]["task_id"], "po-next", "{g}");
}

async fn a_poll_gone_at_hand_off_leaves_a_lease_that_expires_to_stale(engine: Engine) {
    let app = engine.spawn(|_| {}).await;
    // What a submit runs for a waiting poll, with nobody left to receive the grant.
    let waiter = LeaseRequest {
        worker_id: WorkerId::parse("w-gone").unwrap(),
        site: None,
        ttl: app.settings.lease_ttl(),
        scope: app.settings.lease_scope,
    };
    let task = NewTask {
        task_id: TaskId::parse("po-gone").unwrap(),
        site: "rakuten".into(),
        intent_json: INTENT.into(),
        not_after: None,
    };
    let (ack, attempt) = app
        .state
        .store
        .task_insert_handing(task, waiter, app.clock.now())
        .await
        .unwrap();
    assert!(ack.created);
    assert!(
        matches!(attempt, Some(LeaseAttempt::Granted(_))),
        "{attempt:?}"
    );
    assert_eq!(app.status_of("po-gone").await, "leased");
    // Nobody else gets it meanwhile.
    let other = app.lease("w-other", 0.0).await;
    assert!(other.data().is_null(), "{:?}", other.body);
    app.expire_leases();
    let staled = app.sweep().await;
    assert_eq!(staled.len(), 1, "{staled:?}");
    assert_eq!(app.status_of("po-gone").await, "stale");
}

async fn a_resubmitted_task_is_not_granted_again_by_its_hand_off(engine: Engine) {
    let app = engine.spawn(|_| {}).await;
    app.leased("po-held", "w-holder").await;
    app.submit("po-once").await.assert_ok();
    let poll = waiting_poll(&app, "w-late").await;
    // The idempotent resubmit creates nothing, so its hand-off grants nothing.
    let again = app.submit("po-once").await;
    assert_eq!(again.assert_ok()["created"], false);
    assert_eq!(app.status_of("po-once").await, "queued");
    app.report(
        "po-held",
        json!({"worker_id": "w-holder", "state": "paid", "terminal": true}),
    )
    .await
    .assert_ok();
    let g = poll.await.unwrap();
    assert_eq!(g["data"]["task_id"], "po-once", "{g}");
    assert_eq!(g["data"]["lease_count"], 1, "{g}");
}

crate::on_both_engines!(
    a_submit_hands_its_task_to_a_waiting_poll_in_its_own_commit,
    a_submit_whose_waiting_poll_cannot_take_the_task_leaves_it_queued,
    a_poll_gone_at_hand_off_leaves_a_lease_that_expires_to_stale,
    a_resubmitted_task_is_not_granted_again_by_its_hand_off,
);

/// kill -9 right after a hand-off: the grant the poll received was committed with the task.
#[tokio::test]
async fn a_handed_off_grant_survives_a_crash_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("data").join("gw.db");
    let db = db.to_str().unwrap();
    let client = reqwest::Client::new();
    let mut gw = Binary::start(dir.path(), &[("RAKUTEN_GATEWAY_DB_PATH", db)]).await;
    let base = gw.base.clone();
    let poll = tokio::spawn({
        let (client, url) = (
            client.clone(),
            format!("{base}/api/orders/lease?worker_id=w-crash&wait=20"),
        );
        async move { answer(client.get(url).bearer_auth(TOKEN).send().await.unwrap()).await }
    });
    crate::helpers::wait_for_long_polls(&client, &base, "orders", 1).await;
    let s = answer(
        client
            .post(format!("{base}/api/orders"))
            .bearer_auth(TOKEN)
            .json(&json!({"task_id": "po-crash", "site": "rakuten", "intent": {"item_url": "https://item.rakuten.co.jp/shop/a/", "quantity": 1}}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s.assert_ok()["created"], true);
    let g = poll.await.unwrap();
    assert_eq!(g.assert_ok()["task_id"], "po-crash");
    let token = g.data()["lease_token"].as_str().unwrap().to_owned();

    gw.child.kill().unwrap(); // SIGKILL
    gw.child.wait().unwrap();

    let gw = Binary::start(dir.path(), &[("RAKUTEN_GATEWAY_DB_PATH", db)]).await;
    let base = gw.base.clone();
    let t = answer(
        client
            .get(format!("{base}/api/orders/po-crash"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(t.assert_ok()["status"], "leased", "{:?}", t.body);
    assert_eq!(t.data()["lease_owner"], "w-crash");
    assert_eq!(t.data()["lease_count"], 1);
    // The token handed out before the crash is the live one.
    let r = answer(
        client
            .post(format!("{base}/api/orders/po-crash/report"))
            .bearer_auth(TOKEN)
            .json(&json!({"worker_id": "w-crash", "lease_token": token, "state": "ordered"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.assert_ok()["status"], "running", "{:?}", r.body);
}

/// On PostgreSQL a submit hands its task to a poll of its own instance; with the poll on another
/// instance it commits the task alone and that instance's poll is woken through `NOTIFY` and
/// leases itself, as before.
#[test_util::lane(postgres)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_poll_of_another_instance_is_woken_and_leases_itself() {
    let db = Arc::new(PgSchema::new().await);
    let clock = ManualClock::at_fixed_date();
    let a = spawn_pg_app(db.clone(), clock.clone(), |_| {}).await;
    let b = spawn_pg_app(db.clone(), clock.clone(), |_| {}).await;
    test_util::wait_until("LISTEN to come up", Duration::from_secs(20), async || {
        a.state.store.wakeups_listening() && b.state.store.wakeups_listening()
    })
    .await;
    let poll = waiting_poll(&b, "w-far").await;
    let woken_before = b.state.lease_notifier.attempts().woken;
    a.submit("po-far").await.assert_ok();
    // A had no poll waiting: its submit took none, and committed the task alone.
    assert_eq!(a.state.lease_notifier.handoff_waiters(), 0);
    let g = poll.await.unwrap();
    assert_eq!(g["data"]["task_id"], "po-far", "{g}");
    assert!(b.state.lease_notifier.attempts().woken > woken_before);
    b.report(
        "po-far",
        json!({"worker_id": "w-far", "state": "paid", "terminal": true}),
    )
    .await
    .assert_ok();

    // The same instance: handed over in the submit's own transaction.
    let poll = waiting_poll(&a, "w-near").await;
    a.submit("po-near").await.assert_ok();
    assert_eq!(a.status_of("po-near").await, "leased");
    let g = poll.await.unwrap();
    assert_eq!(g["data"]["task_id"], "po-near", "{g}");
    assert_eq!(b.state.lease_notifier.handoff_waiters(), 0);
}
