use serde_json::json;

use std::sync::Arc;

use rakuten_types::ManualClock;

use crate::helpers::{TestApp, spawn_app, spawn_pg_app};
use test_util::PgSchema;

#[tokio::test]
async fn first_report_moves_leased_to_running() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    assert_eq!(app.status_of("po-1").await, "leased");
    let a = app
        .report("po-1", json!({"worker_id": "w1", "state": "created"}))
        .await;
    assert_eq!(
        a.assert_ok(),
        &json!({"task_id": "po-1", "status": "running", "state": "created", "duplicate": false})
    );
}

#[tokio::test]
async fn repeating_a_report_for_the_same_state_keeps_one_row() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    let body = json!({"worker_id": "w1", "state": "awaiting_payment", "payable_yen": 12800, "detail": "first"});
    app.report("po-1", body).await.assert_ok();
    let first_at = app.task("po-1").await.data()["history"][0]["reported_at"].clone();
    app.clock.advance(std::time::Duration::from_secs(5));
    let again = app
        .report("po-1", json!({"worker_id": "w1", "state": "awaiting_payment", "payable_yen": 12800, "detail": "resent"}))
        .await;
    assert_eq!(again.assert_ok()["duplicate"], true);
    let t = app.task("po-1").await;
    let history = t.data()["history"].as_array().unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0]["detail"], "resent", "the payload is overwritten");
    assert_eq!(
        history[0]["reported_at"], first_at,
        "the first report time is kept"
    );
}

/// A report re-sent with fewer fields (a retry that lost its optional fields) keeps what the
/// first one stored; fields it does carry still replace the stored ones.
async fn assert_resent_report_keeps_fields_it_omits(app: TestApp) {
    app.leased("po-1", "w1").await;
    let first = json!({"worker_id": "w1", "state": "awaiting_payment", "payable_yen": 12800,
        "pay_deadline": "2026-12-03T00:00:00Z", "site_order_id": "1-2-3",
        "evidence_ref": "po-1/05-payment", "detail": "first", "error_code": 5005});
    app.report("po-1", first).await.assert_ok();
    let again = app
        .report(
            "po-1",
            json!({"worker_id": "w1", "state": "awaiting_payment", "detail": "resent"}),
        )
        .await;
    assert_eq!(again.assert_ok()["duplicate"], true);
    let t = app.task("po-1").await;
    let h = &t.data()["history"][0];
    assert_eq!(h["detail"], "resent", "{h}");
    assert_eq!(h["payable_yen"], 12800, "{h}");
    assert!(
        h["pay_deadline"]
            .as_str()
            .unwrap()
            .starts_with("2026-12-03"),
        "{h}"
    );
    assert_eq!(h["site_order_id"], "1-2-3", "{h}");
    assert_eq!(h["evidence_ref"], "po-1/05-payment", "{h}");
    assert_eq!(h["error_code"], 5005, "{h}");
}

#[tokio::test]
async fn a_resent_report_with_fewer_fields_never_blanks_stored_fields() {
    assert_resent_report_keeps_fields_it_omits(spawn_app().await).await;
}

#[test_util::lane(postgres)]
#[tokio::test]
async fn a_resent_report_with_fewer_fields_never_blanks_stored_fields_on_postgres() {
    let db = Arc::new(PgSchema::new().await);
    let app = spawn_pg_app(db, ManualClock::at_fixed_date(), |_| {}).await;
    assert_resent_report_keeps_fields_it_omits(app).await;
}

#[tokio::test]
async fn terminal_report_with_a_final_state_implies_the_outcome() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    let a = app
        .report(
            "po-1",
            json!({"worker_id": "w1", "state": "paid", "terminal": true}),
        )
        .await;
    assert_eq!(a.assert_ok()["status"], "succeeded");
    let t = app.task("po-1").await;
    assert_eq!(t.data()["outcome"], "succeeded");

    app.leased("po-2", "w1").await;
    let c = app
        .report(
            "po-2",
            json!({"worker_id": "w1", "state": "cancelled", "terminal": true}),
        )
        .await;
    assert_eq!(c.assert_ok()["status"], "failed");
}

#[tokio::test]
async fn terminal_report_with_an_explicit_outcome_uses_it() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    let a = app
        .report("po-1", json!({"worker_id": "w1", "state": "awaiting_payment", "terminal": true, "outcome": "needs_human", "error_code": 5004}))
        .await;
    assert_eq!(a.assert_ok()["status"], "needs_human");
    let t = app.task("po-1").await;
    assert_eq!(t.data()["history"][0]["error_code"], 5004);
}

#[tokio::test]
async fn terminal_report_without_outcome_in_a_non_final_state_is_refused() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    let a = app
        .report(
            "po-1",
            json!({"worker_id": "w1", "state": "ordered", "terminal": true}),
        )
        .await;
    a.assert_err(422, 1003);
    assert_eq!(app.status_of("po-1").await, "leased");
    assert_eq!(app.task("po-1").await.data()["history"], json!([]));
}

#[tokio::test]
async fn report_from_a_worker_that_does_not_hold_the_lease_is_6002() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    app.report("po-1", json!({"worker_id": "w2", "state": "created"}))
        .await
        .assert_err(409, 6002);
    app.renew("po-1", json!({"worker_id": "w2"}))
        .await
        .assert_err(409, 6002);
    assert_eq!(app.status_of("po-1").await, "leased");
}

#[tokio::test]
async fn report_on_an_unknown_task_is_6001() {
    let app = spawn_app().await;
    app.report("nope", json!({"worker_id": "w1", "state": "created"}))
        .await
        .assert_err(404, 6001);
    app.task("nope").await.assert_err(404, 6001);
}

#[tokio::test]
async fn reports_after_the_end_from_the_last_holder_are_appended_and_change_nothing() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    app.report(
        "po-1",
        json!({"worker_id": "w1", "state": "paid", "terminal": true}),
    )
    .await
    .assert_ok();
    let later = app
        .report("po-1", json!({"worker_id": "w1", "state": "shipped"}))
        .await;
    assert_eq!(later.assert_ok()["status"], "succeeded");
    let t = app.task("po-1").await;
    assert_eq!(t.data()["latest_state"], "shipped");
    assert_eq!(t.data()["history"].as_array().unwrap().len(), 2);
    assert_eq!(t.data()["status"], "succeeded");
    // Anyone else is refused.
    app.report("po-1", json!({"worker_id": "w2", "state": "delivered"}))
        .await
        .assert_err(409, 6002);
    // And the lease cannot be renewed.
    app.renew("po-1", json!({"worker_id": "w1"}))
        .await
        .assert_err(409, 6002);
}

/// D-holder-fields-in-body: `worker_id`, `lease_token` and `reason` go in the JSON body; one sent
/// in the query string is a 422 that says so (the document names no such parameter), never
/// silently ignored, and a body without `worker_id` is a 422 too.
#[tokio::test]
async fn holder_fields_in_the_query_string_are_refused_with_where_they_go() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    for (path, body, field) in [
        (
            "/api/orders/po-1/report?worker_id=w1",
            json!({"state": "created"}),
            "worker_id",
        ),
        (
            "/api/orders/po-1/renew?worker_id=w1",
            json!({"worker_id": "w1"}),
            "worker_id",
        ),
        (
            "/api/orders/po-1/renew?lease_token=x",
            json!({"worker_id": "w1"}),
            "lease_token",
        ),
        (
            "/api/orders/po-1/reclaim?reason=checked",
            json!({"worker_id": "w1"}),
            "reason",
        ),
    ] {
        let a = crate::helpers::answer(app.post(path).json(&body).send().await.unwrap()).await;
        a.assert_err(422, 1003);
        let msg = a.body["msg"].as_str().unwrap();
        assert!(
            msg.contains(&format!("`{field}` goes in the JSON body")),
            "{path}: {msg}"
        );
    }
    // A reclaim never took a token: that one is an unknown parameter like any other.
    let a = crate::helpers::answer(
        app.post("/api/orders/po-1/reclaim?lease_token=x")
            .json(&json!({"worker_id": "w1"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    a.assert_err(422, 1003);
    assert!(
        a.body["msg"]
            .as_str()
            .unwrap()
            .contains("unknown query parameter"),
        "{:?}",
        a.body
    );
    // What schemathesis sent: the holder named nowhere but the query string.
    for path in [
        "/api/orders/po-1/renew",
        "/api/orders/po-1/report",
        "/api/orders/po-1/reclaim",
    ] {
        let a = crate::helpers::answer(
            app.post(path)
                .json(&json!({"worker_id": null, "state": "created"}))
                .send()
                .await
                .unwrap(),
        )
        .await;
        a.assert_err(422, 1003);
    }
    for path in ["/api/orders/po-1/renew", "/api/orders/po-1/reclaim"] {
        let a = crate::helpers::answer(app.post(path).json(&json!({})).send().await.unwrap()).await;
        a.assert_err(422, 1003);
        let msg = a.body["msg"].as_str().unwrap();
        assert!(msg.contains("missing field `worker_id`"), "{path}: {msg}");
    }
    // The task is untouched by all of it, and the body form works.
    app.renew("po-1", json!({"worker_id": "w1"}))
        .await
        .assert_ok();
    app.report("po-1", json!({"worker_id": "w1", "state": "created"}))
        .await
        .assert_ok();
}

#[tokio::test]
async fn a_lease_token_from_an_earlier_grant_is_refused_with_6002() {
    let app = spawn_app().await;
    let first = app.leased("po-1", "w1").await;
    let old = first["lease_token"].as_str().unwrap().to_owned();
    // A new grant of the same task (the worker polled again).
    let second = app.lease("w1", 0.0).await;
    let new = second.assert_ok()["lease_token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(old, new);
    app.report(
        "po-1",
        json!({"worker_id": "w1", "lease_token": old, "state": "created"}),
    )
    .await
    .assert_err(409, 6002);
    app.renew("po-1", json!({"worker_id": "w1", "lease_token": old}))
        .await
        .assert_err(409, 6002);
    app.report(
        "po-1",
        json!({"worker_id": "w1", "lease_token": new, "state": "created"}),
    )
    .await
    .assert_ok();
    // Without a token (the spec's contract) the holder still works.
    app.renew("po-1", json!({"worker_id": "w1"}))
        .await
        .assert_ok();
}

/// A terminal report whose outcome contradicts its order state is refused as a resolve with the
/// same pair is (D-report-outcome-must-fit-state), and nothing of it is stored.
async fn a_terminal_report_whose_outcome_contradicts_its_state_is_refused(
    engine: crate::helpers::Engine,
) {
    let app = engine.spawn(|_| {}).await;
    for (i, (state, outcome)) in [
        ("paid", "failed"),
        ("created", "succeeded"),
        ("cancelled", "succeeded"),
        ("in_cart", "succeeded"),
        ("delivered", "failed"),
    ]
    .into_iter()
    .enumerate()
    {
        let task = format!("po-{i}");
        app.leased(&task, "w1").await;
        app.report(
            &task,
            json!({"worker_id": "w1", "state": state, "terminal": true, "outcome": outcome}),
        )
        .await
        .assert_err(422, 1003);
        assert_eq!(app.status_of(&task).await, "leased", "{state} + {outcome}");
        assert_eq!(app.task(&task).await.data()["history"], json!([]));
        // The task is still the worker's: a fitting verdict ends it.
        let fitting = if outcome == "failed" {
            "succeeded"
        } else {
            "failed"
        };
        let end = app
            .report(
                &task,
                json!({"worker_id": "w1", "state": state, "terminal": true, "outcome": fitting}),
            )
            .await;
        assert_eq!(end.assert_ok()["status"], fitting);
    }
    // needs_human is no verdict: it goes with any state.
    app.leased("po-nh", "w1").await;
    let nh = app
        .report(
            "po-nh",
            json!({"worker_id": "w1", "state": "paid", "terminal": true, "outcome": "needs_human"}),
        )
        .await;
    assert_eq!(nh.assert_ok()["status"], "needs_human");
}

mod contradicting_outcome {
    use super::*;
    crate::on_both_engines!(a_terminal_report_whose_outcome_contradicts_its_state_is_refused);
}
