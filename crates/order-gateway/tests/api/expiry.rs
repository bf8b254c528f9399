use std::time::Duration;

use serde_json::json;

use crate::helpers::spawn_app;

#[tokio::test]
async fn renew_extends_the_lease() {
    let app = spawn_app().await;
    let g = app.leased("po-1", "w1").await;
    app.clock.advance(Duration::from_secs(200));
    let r = app.renew("po-1", json!({"worker_id": "w1"})).await;
    let new_exp = r.assert_ok()["lease_expires_at"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(new_exp.as_str() > g["lease_expires_at"].as_str().unwrap());
    app.clock.advance(Duration::from_secs(200));
    assert!(
        app.sweep().await.is_empty(),
        "renewed lease must not expire"
    );
    assert_eq!(app.status_of("po-1").await, "leased");
}

#[tokio::test]
async fn expired_lease_makes_task_stale_and_plain_lease_never_returns_it() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    app.report("po-1", json!({"worker_id": "w1", "state": "ordered"}))
        .await
        .assert_ok();
    app.expire_leases();
    let staled = app.sweep().await;
    assert_eq!(staled.len(), 1);
    assert_eq!(app.status_of("po-1").await, "stale");
    // Neither its old holder nor anyone else gets it from a plain lease.
    for w in ["w1", "w2"] {
        let a = app.lease(w, 0.0).await;
        assert!(a.data().is_null(), "{a:?}");
    }
    assert_eq!(app.status_of("po-1").await, "stale");
    // A new task can be leased: the stale one does not hold the gate.
    app.submit("po-2").await.assert_ok();
    assert_eq!(app.lease("w2", 0.0).await.assert_ok()["task_id"], "po-2");
}

#[tokio::test]
async fn renew_and_report_after_expiry_are_6002_even_before_the_sweeper_runs() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    app.expire_leases();
    app.renew("po-1", json!({"worker_id": "w1"}))
        .await
        .assert_err(409, 6002);
    app.report(
        "po-1",
        json!({"worker_id": "w1", "state": "paid", "terminal": true}),
    )
    .await
    .assert_err(409, 6002);
    // The worker's own poll does not revive an expired lease either.
    assert!(app.lease("w1", 0.0).await.data().is_null());
    app.sweep().await;
    assert_eq!(app.status_of("po-1").await, "stale");
}

#[tokio::test]
async fn the_sweeper_racing_a_terminal_report_lets_exactly_one_win() {
    for round in 0..15 {
        let app = spawn_app().await;
        let id = format!("po-{round}");
        app.leased(&id, "w1").await;
        // Just before expiry for the report; the sweeper sweeps at expiry.
        app.clock.advance(Duration::from_secs_f64(
            app.settings.lease_ttl_seconds - 0.001,
        ));
        let sweep_at = rakuten_types::Clock::now(&app.clock).plus(Duration::from_millis(1));
        let sweeper = app.sweeper.clone();
        let (report, swept) = tokio::join!(
            app.report(
                &id,
                json!({"worker_id": "w1", "state": "paid", "terminal": true})
            ),
            async move { sweeper.run_once(sweep_at).await.unwrap() }
        );
        let status = app.status_of(&id).await;
        if report.status == 200 {
            assert_eq!(status, "succeeded");
            assert!(swept.is_empty());
        } else {
            report.assert_err(409, 6002);
            assert_eq!(status, "stale");
            assert_eq!(swept.len(), 1);
        }
    }
}

#[tokio::test]
async fn reclaimed_task_has_lease_count_above_one_and_known_state() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    app.report(
        "po-1",
        json!({"worker_id": "w1", "state": "ordered", "site_order_id": "266123-1"}),
    )
    .await
    .assert_ok();
    app.expire_leases();
    app.sweep().await;
    let r = app.reclaim("po-1", "w2").await;
    let g = r.assert_ok();
    assert_eq!(g["task_id"], "po-1");
    assert_eq!(g["lease_count"], 2);
    assert_eq!(g["known_state"], "ordered");
    assert!(g["lease_token"].as_str().is_some());
    assert_eq!(app.status_of("po-1").await, "leased");
    // The named worker receives it through its next poll, still with count > 1.
    let polled = app.lease("w2", 0.0).await;
    let p = polled.assert_ok();
    assert_eq!(p["task_id"], "po-1");
    assert!(p["lease_count"].as_i64().unwrap() > 1);
    assert_eq!(p["known_state"], "ordered");
    // The old holder cannot report on it.
    app.report(
        "po-1",
        json!({"worker_id": "w1", "state": "paid", "terminal": true}),
    )
    .await
    .assert_err(409, 6002);
}

#[tokio::test]
async fn reclaim_while_another_task_is_active_is_refused_and_changes_nothing() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    app.expire_leases();
    app.sweep().await;
    app.leased("po-2", "w2").await;
    app.reclaim("po-1", "w3").await.assert_err(409, 1006);
    assert_eq!(app.status_of("po-1").await, "stale");
    assert_eq!(app.task("po-1").await.data()["lease_count"], 1);
}

#[tokio::test]
async fn reclaiming_a_task_that_is_not_stale_is_6003_and_unknown_is_6001() {
    let app = spawn_app().await;
    app.submit("po-q").await.assert_ok();
    app.reclaim("po-q", "w1").await.assert_err(409, 6003);
    app.lease("w1", 0.0).await.assert_ok();
    app.reclaim("po-q", "w1").await.assert_err(409, 6003);
    app.report(
        "po-q",
        json!({"worker_id": "w1", "state": "paid", "terminal": true}),
    )
    .await
    .assert_ok();
    app.reclaim("po-q", "w1").await.assert_err(409, 6003);
    app.reclaim("nope", "w1").await.assert_err(404, 6001);
    let missing =
        crate::helpers::answer(app.post("/api/orders/po-q/reclaim").send().await.unwrap()).await;
    missing.assert_err(422, 1003);
}

/// With a 4 s lease, a grant made while the clock ran an hour ahead kept the task
/// `leased` for an hour after the clock was corrected, and the global gate refused every other
/// task meanwhile.
#[tokio::test]
async fn a_lease_granted_while_the_clock_ran_an_hour_ahead_is_clamped_once_it_is_corrected() {
    let app = crate::helpers::spawn_app_with(|s| s.lease_ttl_seconds = 4.0).await;
    let correct = rakuten_types::Clock::now(&app.clock);
    app.clock.advance(Duration::from_secs(3600));
    app.leased("po-1", "w1").await;
    app.clock.set(correct);
    // The first sweep clamps the lease to now + TTL + margin; it is still held.
    assert!(app.sweep().await.is_empty());
    assert_eq!(app.status_of("po-1").await, "leased");
    app.submit("po-2").await.assert_ok();
    // Past TTL + margin by the corrected clock it lapses, and the gate is free again.
    app.clock
        .advance(order_gateway::jobs::sweeper::LEASE_CLAMP_MARGIN + Duration::from_secs(5));
    let staled = app.sweep().await;
    assert_eq!(staled.len(), 1);
    assert_eq!(app.status_of("po-1").await, "stale");
    let g = app.lease("w2", 0.0).await;
    assert_eq!(g.assert_ok()["task_id"], "po-2");
}
