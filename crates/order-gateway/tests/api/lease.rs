use std::time::{Duration, Instant};

use rakuten_types::Clock;
use serde_json::json;

use crate::helpers::{Engine, answer, spawn_app, spawn_app_with};

#[tokio::test]
async fn two_workers_leasing_at_once_only_one_gets_the_task() {
    let app = spawn_app().await;
    app.submit("po-1").await.assert_ok();
    let (a, b) = tokio::join!(app.lease("w1", 0.0), app.lease("w2", 0.0));
    let granted: Vec<_> = [&a, &b]
        .into_iter()
        .filter(|x| !x.data().is_null())
        .collect();
    assert_eq!(granted.len(), 1, "{a:?} {b:?}");
    assert_eq!(granted[0].data()["task_id"], "po-1");
    assert_eq!(granted[0].data()["lease_count"], 1);
}

#[tokio::test]
async fn concurrent_lease_pairs_repeated_many_times_never_hand_out_two_tasks() {
    let app = spawn_app().await;
    for round in 0..40 {
        app.submit(&format!("a-{round}")).await.assert_ok();
        app.submit(&format!("b-{round}")).await.assert_ok();
        let (a, b) = tokio::join!(app.lease("w1", 0.0), app.lease("w2", 0.0));
        let granted: Vec<_> = [&a, &b]
            .into_iter()
            .filter(|x| !x.data().is_null())
            .collect();
        assert_eq!(granted.len(), 1, "round {round}: {a:?} {b:?}");
        let active = app.list("?status=leased").await;
        assert_eq!(active.assert_ok()["total"], 1);
        // Finish it so the next round starts with a free gate.
        let g = granted[0].data();
        let worker = if std::ptr::eq(granted[0], &a) {
            "w1"
        } else {
            "w2"
        };
        app.report(
            g["task_id"].as_str().unwrap(),
            json!({"worker_id": worker, "state": "paid", "terminal": true}),
        )
        .await
        .assert_ok();
        // The other task of the round is next; take it out of the way too.
        let next = app.lease("w3", 0.0).await;
        let n = next.assert_ok();
        app.report(
            n["task_id"].as_str().unwrap(),
            json!({"worker_id": "w3", "state": "cancelled", "terminal": true}),
        )
        .await
        .assert_ok();
    }
}

#[tokio::test]
async fn lease_returns_nothing_while_a_task_is_active() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    app.submit("po-2").await.assert_ok();
    let other = app.lease("w2", 0.0).await;
    assert_eq!(other.status, 200);
    assert!(other.data().is_null());
    assert_eq!(other.code(), 6004);
    // Still nothing once the first task is running.
    app.report("po-1", json!({"worker_id": "w1", "state": "ordered"}))
        .await
        .assert_ok();
    assert!(app.lease("w2", 0.0).await.data().is_null());
    // The gate frees on a terminal report.
    app.report(
        "po-1",
        json!({"worker_id": "w1", "state": "paid", "terminal": true}),
    )
    .await
    .assert_ok();
    assert_eq!(app.lease("w2", 0.0).await.assert_ok()["task_id"], "po-2");
}

#[tokio::test]
async fn lease_waits_for_wait_seconds_then_returns_null() {
    let app = spawn_app().await;
    let started = Instant::now();
    let a = app.lease("w1", 1.2).await;
    let took = started.elapsed();
    assert_eq!(a.status, 200);
    assert_eq!(
        a.body,
        json!({"success": true, "msg": "no task", "data": null, "code": 0})
    );
    assert!(
        took >= Duration::from_millis(1150),
        "returned after {took:?}"
    );
    assert!(took < Duration::from_secs(5), "returned after {took:?}");
}

#[tokio::test]
async fn wait_is_capped_by_the_max_wait_setting() {
    let app = spawn_app_with(|s| s.lease_max_wait_seconds = 0.3).await;
    let started = Instant::now();
    let a = app.lease("w1", 30.0).await;
    assert!(a.data().is_null());
    let huge = app.lease("w1", 1e300).await;
    assert!(huge.data().is_null(), "{huge:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn long_poll_wakes_promptly_when_a_task_is_submitted() {
    let app = spawn_app().await;
    let poll = {
        let (client, url, token) = (
            app.client.clone(),
            app.url("/api/orders/lease?worker_id=w1&wait=10"),
            app.token.clone(),
        );
        tokio::spawn(async move {
            let r = answer(client.get(url).bearer_auth(token).send().await.unwrap()).await;
            (r, Instant::now())
        })
    };
    app.wait_for_long_polls("orders", 1).await;
    app.submit("po-1").await.assert_ok();
    let submitted = Instant::now();
    let (a, returned) = poll.await.unwrap();
    assert_eq!(a.assert_ok()["task_id"], "po-1");
    let lag = returned.saturating_duration_since(submitted);
    assert!(lag < Duration::from_millis(500), "hand-off took {lag:?}");
}

#[tokio::test]
async fn long_poll_gets_the_next_task_promptly_when_the_active_one_finishes() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    app.submit("po-2").await.assert_ok();
    let poll = {
        let (client, url, token) = (
            app.client.clone(),
            app.url("/api/orders/lease?worker_id=w2&wait=10"),
            app.token.clone(),
        );
        tokio::spawn(async move {
            let r = answer(client.get(url).bearer_auth(token).send().await.unwrap()).await;
            (r, Instant::now())
        })
    };
    app.wait_for_long_polls("orders", 1).await;
    app.report(
        "po-1",
        json!({"worker_id": "w1", "state": "paid", "terminal": true}),
    )
    .await
    .assert_ok();
    let done = Instant::now();
    let (a, returned) = poll.await.unwrap();
    assert_eq!(a.assert_ok()["task_id"], "po-2");
    assert!(returned.saturating_duration_since(done) < Duration::from_millis(500));
}

#[tokio::test]
async fn a_long_poll_whose_client_went_away_never_takes_a_lease() {
    let app = spawn_app().await;
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let gone = impatient
        .get(app.url("/api/orders/lease?worker_id=ghost&wait=20"))
        .bearer_auth(&app.token)
        .send()
        .await;
    assert!(gone.is_err(), "the client should have timed out");
    // The gateway drops the poll once it sees the connection closed; nothing is left to take
    // the task submitted next.
    app.wait_for_long_polls("orders", 0).await;
    app.submit("po-1").await.assert_ok();
    let t = app.task("po-1").await;
    assert_eq!(t.assert_ok()["status"], "queued");
    assert!(t.data()["lease_owner"].is_null());
    let g = app.lease("real", 0.0).await;
    assert_eq!(g.assert_ok()["task_id"], "po-1");
    assert_eq!(g.data()["lease_count"], 1);
}

#[tokio::test]
async fn a_worker_polling_again_gets_its_own_task_back_as_a_new_grant() {
    // The lost-response case: the lease committed but the worker never saw it.
    let app = spawn_app().await;
    let first = app.leased("po-1", "w1").await;
    app.submit("po-2").await.assert_ok();
    let again = app.lease("w1", 0.0).await;
    let g = again.assert_ok();
    assert_eq!(g["task_id"], "po-1");
    assert_eq!(
        g["lease_count"], 2,
        "count > 1 makes the worker verify first"
    );
    assert_ne!(g["lease_token"], first["lease_token"]);
    // Another worker still gets nothing.
    assert!(app.lease("w2", 0.0).await.data().is_null());
}

#[tokio::test]
async fn lease_with_a_site_filter_only_takes_that_site() {
    let app = spawn_app().await;
    app.submit("po-1").await.assert_ok();
    let a = app
        .get("/api/orders/lease?worker_id=w1&wait=0&site=rakuten")
        .send()
        .await
        .unwrap();
    assert_eq!(answer(a).await.assert_ok()["task_id"], "po-1");
}

#[tokio::test]
async fn site_scope_gates_per_site_and_still_serialises_within_a_site() {
    let app = spawn_app_with(|s| s.lease_scope = order_gateway::LeaseScope::Site).await;
    app.leased("po-1", "w1").await;
    app.submit("po-2").await.assert_ok();
    let other = app.lease("w2", 0.0).await;
    assert!(other.data().is_null());
    assert_eq!(other.code(), 6004);
}

/// One wake per leasable task, end to end: 100 long-polls of distinct workers wait, one task is submitted:
/// one grant, and one lease transaction for it. Heartbeats are the witness (each lease attempt
/// touches its worker's `last_seen_at`): with the clock moved on before the submit, only workers
/// whose poll ran a lease transaction afterwards show the new time. The only other attempts allowed
/// are those of a poll whose periodic database check (1 s) fell between the submit's commit and
/// the grant's and saw the task leasable; the notifier counts them apart, so the test does not
/// depend on that window's luck.
async fn a_hundred_waiting_polls_cost_one_lease_transaction_for_one_task(engine: Engine) {
    let app = engine.spawn(|_| {}).await;
    let notifier = app.state.lease_notifier.clone();
    // PostgreSQL: the LISTEN session wakes every waiter once when it comes up (to find what was
    // committed before it listened); let that happen before the polls wait.
    test_util::wait_until("LISTEN to come up", Duration::from_secs(20), async || {
        app.state.store.wakeups_listening()
    })
    .await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for i in 0..100 {
        let (client, url, token, tx) = (
            app.client.clone(),
            app.url(&format!("/api/orders/lease?worker_id=p-{i:03}&wait=12")),
            app.token.clone(),
            tx.clone(),
        );
        tokio::spawn(async move {
            let r = answer(client.get(url).bearer_auth(token).send().await.unwrap()).await;
            let _ = tx.send((i, r));
        });
    }
    // Every poll ran its first attempt and waits.
    test_util::wait_for(
        "every poll's first attempt",
        Duration::from_secs(20),
        async || {
            let a = notifier.attempts();
            if a.first >= 100 {
                Ok(())
            } else {
                Err(format!("{a:?}"))
            }
        },
    )
    .await;
    let before = notifier.attempts();
    assert_eq!((before.woken, before.rechecked), (0, 0), "{before:?}");
    app.clock.advance(Duration::from_secs(30));
    let moved_to = app.clock.now();
    app.submit("po-1").await.assert_ok();

    // Exactly one answer is the grant; the other 99 keep waiting until their `wait` ends.
    let mut answers = Vec::new();
    while answers.len() < 100 {
        let (i, r) = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("every poll answers within its wait")
            .unwrap();
        answers.push((i, r));
    }
    let granted: Vec<_> = answers
        .iter()
        .filter(|(_, r)| !r.data().is_null())
        .collect();
    assert_eq!(granted.len(), 1, "{granted:?}");
    let (winner, grant) = granted[0];
    assert_eq!(grant.assert_ok()["task_id"], "po-1");

    let after = notifier.attempts();
    assert_eq!(after.first, 100);
    assert_eq!(after.woken, 1, "one wake for one task: {after:?}");
    let ws = answer(app.get("/api/workers?limit=200").send().await.unwrap()).await;
    let moved: Vec<String> = ws.assert_ok()["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["last_seen_at"] == serde_json::to_value(moved_to).unwrap())
        .map(|w| w["worker_id"].as_str().unwrap().to_owned())
        .collect();
    assert!(moved.contains(&format!("p-{winner:03}")), "{moved:?}");
    assert_eq!(
        moved.len() as u64,
        after.woken + after.rechecked,
        "a heartbeat moved only for a lease transaction after the submit: {moved:?} {after:?}"
    );
    // How many periodic checks fell in the window between the two commits depends on the
    // machine's load (none on a quiet one); each is accounted for above, none is a wake-up.
    assert!(after.rechecked < 100, "{after:?}");
}

crate::on_both_engines!(a_hundred_waiting_polls_cost_one_lease_transaction_for_one_task);
