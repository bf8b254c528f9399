//! Alerts as records and their delivery to a person (a real receiver on 127.0.0.1:0),
//! audited operator actions (resolve, cancel, reclaim's reason, workers), the evidence query of a
//! stale task, and the reclaim's own grant on the worker's first poll. Time is a `ManualClock`;
//! jobs run through their `run_once`. Every store-facing test runs on SQLite and PostgreSQL.

use std::time::Duration;

use order_gateway::jobs::webhooks::{SIGNATURE_HEADER, verify};
use order_gateway::settings::{Secret, WebhookFormat};
use rakuten_types::Clock;
use serde_json::{Value, json};

use crate::helpers::{Engine, TestApp, answer};
use crate::receiver::Receiver;

crate::on_both_engines!(
    a_stale_task_an_operator_resolves_sends_exactly_one_raised_and_one_cleared,
    a_receiver_that_fails_three_times_then_succeeds_gets_the_event,
    resolve_and_cancel_from_every_wrong_status_are_6003,
    cancel_racing_a_lease_has_exactly_one_winner,
    a_stale_task_gets_an_order_list_of_its_window_linked_from_its_detail,
    a_retired_worker_leaves_health_and_worker_offline_until_it_polls_again,
    needs_human_and_logged_out_raise_their_alerts_and_clear_when_the_cause_is_gone,
    a_reclaim_records_its_reason_and_the_first_poll_receives_its_grant,
    a_poison_row_set_aside_raises_a_needs_human_alert_that_reaches_the_receiver,
    resolving_against_the_latest_reported_state_needs_the_state_seen,
);

/// `failed` without a state while the worker's latest report is `paid` was taken, and
/// the mirror then said both. It needs the state the operator saw; a latest `in_cart` (the usual
/// stale task whose order went through unreported) still resolves `succeeded` without one.
async fn resolving_against_the_latest_reported_state_needs_the_state_seen(e: Engine) {
    let app = e.spawn(|_| {}).await;
    app.leased("po-paid", "w1").await;
    app.report("po-paid", json!({"worker_id": "w1", "state": "paid"}))
        .await
        .assert_ok();
    app.expire_leases();
    app.sweep().await;
    assert_eq!(app.status_of("po-paid").await, "stale");
    let r = app
        .resolve(
            "po-paid",
            json!({"outcome": "failed", "reason": "not on the site"}),
        )
        .await;
    r.assert_err(422, 1003);
    assert_eq!(
        r.body["msg"],
        "outcome failed contradicts the latest reported state paid, which makes the task \
         succeeded: send the state you saw on the site (state) with the outcome"
    );
    assert_eq!(app.status_of("po-paid").await, "stale", "nothing changed");
    app.resolve(
        "po-paid",
        json!({"outcome": "failed", "state": "cancelled", "reason": "the shop cancelled it"}),
    )
    .await
    .assert_ok();
    assert_eq!(app.status_of("po-paid").await, "failed");

    app.leased("po-cart", "w2").await;
    app.report("po-cart", json!({"worker_id": "w2", "state": "in_cart"}))
        .await
        .assert_ok();
    app.expire_leases();
    app.sweep().await;
    app.resolve(
        "po-cart",
        json!({"outcome": "succeeded", "reason": "order 306-9 in the site's list"}),
    )
    .await
    .assert_ok();
    assert_eq!(app.status_of("po-cart").await, "succeeded");
}

/// Settings for an app whose only alert is the one a test makes (no offline worker after the
/// lease TTL), delivering to `url`.
fn with_receiver(url: String) -> impl FnOnce(&mut order_gateway::Settings) {
    move |s| {
        s.worker_offline_alert_seconds = 100_000.0;
        s.alerts.webhook_urls = Some(Secret::new(url));
    }
}

fn events_about<'a>(events: &'a [Value], subject: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["subject"] == subject).collect()
}

async fn a_stale_task_an_operator_resolves_sends_exactly_one_raised_and_one_cleared(e: Engine) {
    let rx = Receiver::start().await;
    let app = e.spawn(with_receiver(rx.url.clone())).await;
    app.stale("po-r1", "w1").await;
    for _ in 0..3 {
        app.run_alerts().await;
        app.deliver().await;
    }
    let open = app.alerts("?state=open").await;
    let items = open.assert_ok()["items"].as_array().unwrap().clone();
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["kind"], "task_stale");
    assert_eq!(items[0]["task_id"], "po-r1");

    let ack = app
        .resolve(
            "po-r1",
            json!({"outcome": "succeeded", "reason": "order 306-1 seen paid on the site",
                   "site_order_id": "306-1", "state": "paid"}),
        )
        .await;
    assert_eq!(ack.assert_ok()["status"], "succeeded");
    for _ in 0..3 {
        app.run_alerts().await;
        app.deliver().await;
    }

    let delivered = rx.delivered();
    let about = events_about(&delivered, "po-r1");
    let states: Vec<&str> = about.iter().map(|e| e["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["raised", "cleared"], "{delivered:?}");
    assert_eq!(about[0]["alert_id"], about[1]["alert_id"]);
    assert_ne!(about[0]["event_id"], about[1]["event_id"]);
    assert_eq!(about[0]["kind"], "task_stale");
    assert_eq!(about[0]["task_id"], "po-r1");
    assert!(about[0]["occurred_at"].is_string() && about[0]["summary"].is_string());
    assert_eq!(
        rx.received().len(),
        2,
        "nothing delivered twice: {:?}",
        rx.received()
    );

    assert_eq!(app.alerts("").await.assert_ok()["total"], 0);
    let all = app.alerts("?state=all").await;
    assert_eq!(all.assert_ok()["items"][0]["state"], "cleared");

    // The detail shows the audit and the person's observation, marked as an operator's.
    let d = app.task("po-r1").await;
    let d = d.assert_ok();
    let actions = d["operator_actions"].as_array().unwrap();
    assert_eq!(actions.len(), 1);
    assert_eq!(actions[0]["action"], "resolve");
    assert_eq!(actions[0]["actor"], "api");
    assert_eq!(actions[0]["from_status"], "stale");
    assert_eq!(actions[0]["to_status"], "succeeded");
    assert_eq!(actions[0]["reason"], "order 306-1 seen paid on the site");
    let paid = d["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["state"] == "paid")
        .expect("paid in history");
    assert_eq!(paid["operator"], "api");
    assert_eq!(paid["site_order_id"], "306-1");
    assert!(paid["worker_id"].is_null());
    assert_eq!(d["latest_state"], "paid");
}

async fn a_receiver_that_fails_three_times_then_succeeds_gets_the_event(e: Engine) {
    let rx = Receiver::start().await;
    rx.fail_next(3);
    let app = e
        .spawn(|s| {
            with_receiver(rx.url.clone())(s);
            s.alerts.webhook_secret = Some(Secret::new("whsec-test-0123456789"));
        })
        .await;
    app.stale("po-f3", "w1").await;
    app.run_alerts().await;
    let mut runs = Vec::new();
    for _ in 0..4 {
        runs.push(app.deliver().await);
        // Past the longest backoff (300 s, jittered up to twice the step).
        app.clock.advance(Duration::from_secs(601));
        if runs.len() == 3 {
            // Three failed attempts: the receiver itself is now an alert.
            // Assert on the records, not on this run's delta: the app's own alert tick may
            // have raised it first.
            app.run_alerts().await;
            let open = app.alerts("?state=open").await;
            let items = open.assert_ok()["items"].as_array().unwrap().clone();
            assert!(
                items
                    .iter()
                    .any(|a| a["kind"] == "webhook_failing" && a["subject"] == "127.0.0.1"),
                "{items:?}"
            );
        }
    }
    let failed: Vec<usize> = runs.iter().map(|r| r.failed.len()).collect();
    let delivered: Vec<usize> = runs.iter().map(|r| r.delivered.len()).collect();
    assert_eq!(failed, [1, 1, 1, 0]);
    assert!(delivered[3] >= 1, "{runs:?}");
    // Every attempt of the stale task's event carried the same event id; the fourth got through.
    let got: Vec<_> = rx
        .received()
        .into_iter()
        .filter(|r| r.body.contains("po-f3"))
        .collect();
    let first: Value = serde_json::from_str(&got[0].body).unwrap();
    for r in &got {
        let b: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(b["event_id"], first["event_id"], "one event, retried");
        assert_eq!(
            r.headers["x-rakuten-event-id"].to_str().unwrap(),
            first["event_id"].as_str().unwrap()
        );
    }
    assert_eq!(
        got.iter().map(|r| r.status).collect::<Vec<_>>(),
        [503, 503, 503, 204]
    );
    // Delivered: the webhook_failing alert clears on the next run.
    let r = app.run_alerts().await;
    assert!(
        r.sync
            .cleared
            .iter()
            .any(|a| a.kind.as_str() == "webhook_failing"),
        "{r:?}"
    );
}

#[tokio::test]
async fn the_signature_of_a_delivery_verifies_with_the_shared_secret() {
    let rx = Receiver::start().await;
    let app = Engine::Sqlite
        .spawn(|s| {
            with_receiver(rx.url.clone())(s);
            s.alerts.webhook_secret = Some(Secret::new("whsec-0123456789abcdef"));
        })
        .await;
    app.stale("po-sig", "w1").await;
    app.run_alerts().await;
    app.deliver().await;
    let got = rx.received();
    assert_eq!(got.len(), 1);
    let header = got[0].headers[SIGNATURE_HEADER].to_str().unwrap();
    let now = app.clock.now().as_millis() / 1000;
    assert!(header.starts_with(&format!("t={now},v1=")), "{header}");
    assert!(verify(
        b"whsec-0123456789abcdef",
        header,
        got[0].body.as_bytes(),
        now,
        300
    ));
    assert!(!verify(b"wrong", header, got[0].body.as_bytes(), now, 300));
    let tampered = got[0].body.replace("po-sig", "po-xxx");
    assert!(!verify(
        b"whsec-0123456789abcdef",
        header,
        tampered.as_bytes(),
        now,
        300
    ));
}

#[tokio::test]
async fn slack_format_sends_one_line_of_text() {
    let rx = Receiver::start().await;
    let app = Engine::Sqlite
        .spawn(|s| {
            with_receiver(rx.url.clone())(s);
            s.alerts.webhook_format = WebhookFormat::Slack;
        })
        .await;
    app.stale("po-slack", "w1").await;
    app.run_alerts().await;
    app.deliver().await;
    let d = rx.delivered();
    assert_eq!(d.len(), 1);
    let text = d[0]["text"].as_str().unwrap();
    assert!(text.starts_with("[ALERT] task_stale po-slack"), "{text}");
    assert_eq!(d[0].as_object().unwrap().len(), 1, "only text");
}

/// Makes one task of every status; returns `(task_id, status)`.
async fn one_task_per_status(app: &TestApp) -> Vec<(&'static str, &'static str)> {
    let w = |id: &str| json!({"worker_id": "w1", "state": "ordered", "detail": id});
    app.stale("t-stale", "w1").await;
    app.leased("t-nh", "w1").await;
    app.report("t-nh", json!({"worker_id": "w1", "state": "awaiting_payment", "terminal": true, "outcome": "needs_human", "error_code": 5004}))
        .await
        .assert_ok();
    app.leased("t-ok", "w1").await;
    app.report(
        "t-ok",
        json!({"worker_id": "w1", "state": "paid", "terminal": true}),
    )
    .await
    .assert_ok();
    app.leased("t-failed", "w1").await;
    app.report(
        "t-failed",
        json!({"worker_id": "w1", "state": "cancelled", "terminal": true}),
    )
    .await
    .assert_ok();
    app.leased("t-running", "w1").await;
    app.report("t-running", w("t-running")).await.assert_ok();
    app.submit("t-queued").await.assert_ok();
    vec![
        ("t-stale", "stale"),
        ("t-nh", "needs_human"),
        ("t-ok", "succeeded"),
        ("t-failed", "failed"),
        ("t-running", "running"),
        ("t-queued", "queued"),
    ]
}

async fn resolve_and_cancel_from_every_wrong_status_are_6003(e: Engine) {
    let app = e.spawn(|_| {}).await;
    let mut tasks = one_task_per_status(&app).await;
    // A leased task too: finish the running one, then lease another.
    app.report(
        "t-running",
        json!({"worker_id": "w1", "state": "paid", "terminal": true}),
    )
    .await
    .assert_ok();
    tasks.retain(|(id, _)| *id != "t-running");
    tasks.push(("t-running", "succeeded"));
    let g = app.lease("w1", 0.0).await;
    assert_eq!(g.assert_ok()["task_id"], "t-queued");
    tasks.retain(|(id, _)| *id != "t-queued");
    tasks.push(("t-queued", "leased"));
    app.submit("t-queued2").await.assert_ok();
    tasks.push(("t-queued2", "queued"));
    for (id, status) in &tasks {
        assert_eq!(app.status_of(id).await, *status, "{id}");
    }
    let resolve = |outcome: &str| json!({"outcome": outcome, "reason": "checked the site"});
    for (id, status) in &tasks {
        if !matches!(*status, "stale" | "needs_human") {
            for o in ["succeeded", "failed"] {
                let a = app.resolve(id, resolve(o)).await;
                a.assert_err(409, 6003);
                assert!(a.body["msg"].as_str().unwrap().contains(status), "{a:?}");
            }
        }
        if *status != "queued" {
            app.cancel(id, "not wanted").await.assert_err(409, 6003);
        }
        assert_eq!(app.status_of(id).await, *status, "{id} unchanged");
        assert!(
            app.task(id).await.assert_ok()["operator_actions"]
                .as_array()
                .unwrap()
                .is_empty(),
            "a refused action writes no audit row"
        );
    }
    // Bad input: 422 before any status check; an unknown task: 404.
    app.resolve("t-stale", json!({"outcome": "needs_human", "reason": "x"}))
        .await
        .assert_err(422, 1003);
    app.resolve("t-stale", json!({"outcome": "failed", "reason": "  "}))
        .await
        .assert_err(422, 1003);
    app.cancel("t-queued2", "").await.assert_err(422, 1003);
    // A verdict contradicting the state the person says they saw, and a reason that
    // would act on the screen of the next operator who reads it, are 422s as well.
    for (body, msg) in [
        (
            json!({"outcome": "failed", "state": "paid", "reason": "x"}),
            "outcome failed contradicts state paid: an order in that state makes the task succeeded",
        ),
        (
            json!({"outcome": "succeeded", "state": "cancelled", "reason": "x"}),
            "outcome succeeded contradicts state cancelled: an order in that state makes the task failed",
        ),
        (
            json!({"outcome": "succeeded", "state": "in_cart", "reason": "x"}),
            "outcome succeeded contradicts state in_cart: no order was placed in that state",
        ),
        (
            json!({"outcome": "failed", "reason": "x\u{7}\u{1b}[2J"}),
            "reason contains control characters",
        ),
        (
            json!({"outcome": "failed", "reason": "\u{3164}\u{2800}"}),
            "reason is required",
        ),
        (
            json!({"outcome": "failed", "reason": "\u{200b}\u{200b}"}),
            "reason is required",
        ),
        (
            json!({"outcome": "succeeded", "reason": "ok \u{202e} gnp.exe"}),
            "reason contains the bidirectional control U+202E, which reorders how it reads",
        ),
    ] {
        let a = app.resolve("t-stale", body.clone()).await;
        a.assert_err(422, 1003);
        assert_eq!(a.body["msg"], msg, "{body}");
    }
    app.cancel("t-queued2", "\u{200b}")
        .await
        .assert_err(422, 1003);
    // A state that implies no outcome, or the one it implies, goes with either verdict.
    app.resolve("nope", resolve("failed"))
        .await
        .assert_err(404, 6001);
    app.cancel("nope", "x").await.assert_err(404, 6001);
    // The allowed ones, once each; a second time is 6003.
    app.resolve("t-stale", resolve("failed")).await.assert_ok();
    app.resolve("t-nh", resolve("succeeded")).await.assert_ok();
    let c = app.cancel("t-queued2", "duplicate order").await;
    assert_eq!(c.assert_ok()["status"], "failed");
    assert_eq!(c.assert_ok()["action"]["from_status"], "queued");
    app.resolve("t-stale", resolve("succeeded"))
        .await
        .assert_err(409, 6003);
    app.resolve("t-nh", resolve("failed"))
        .await
        .assert_err(409, 6003);
    app.cancel("t-queued2", "again").await.assert_err(409, 6003);
    assert_eq!(app.status_of("t-stale").await, "failed");
    assert_eq!(app.status_of("t-nh").await, "succeeded");
    assert_eq!(app.status_of("t-queued2").await, "failed");
}

async fn cancel_racing_a_lease_has_exactly_one_winner(e: Engine) {
    let app = e.spawn(|_| {}).await;
    let (mut cancels, mut leases) = (0, 0);
    for i in 0..20 {
        let id = format!("race-{i}");
        app.submit(&id).await.assert_ok();
        let (c, l) = tokio::join!(app.cancel(&id, "race"), app.lease("w1", 0.0));
        let cancelled = c.status == 200;
        let leased = !l.data().is_null();
        assert!(cancelled != leased, "exactly one winner: {c:?} {l:?}");
        if cancelled {
            cancels += 1;
            assert_eq!(app.status_of(&id).await, "failed");
        } else {
            leases += 1;
            c.assert_err(409, 6003);
            assert_eq!(l.data()["task_id"], id.as_str());
            assert_eq!(app.status_of(&id).await, "leased");
            app.report(
                &id,
                json!({"worker_id": "w1", "state": "cancelled", "terminal": true}),
            )
            .await
            .assert_ok();
        }
    }
    assert_eq!(cancels + leases, 20);
}

async fn a_stale_task_gets_an_order_list_of_its_window_linked_from_its_detail(e: Engine) {
    let app = e.spawn(|_| {}).await;
    let created = app.clock.now();
    app.stale("po-ev", "w1").await;
    // Assert on the task's record, not on one run's delta: the app's own alert tick may have
    // submitted the query first. Either way, exactly one.
    app.run_alerts().await;
    assert!(app.run_alerts().await.evidence.is_empty(), "submitted once");
    let d = app.task("po-ev").await;
    let queries = d.assert_ok()["evidence_queries"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(queries.len(), 1, "{queries:?}");
    let qid = queries[0].as_str().unwrap().to_owned();
    let q = app.query(&qid).await;
    let q = q.assert_ok();
    assert_eq!(q["kind"], "order_list");
    assert_eq!(q["status"], "queued");
    let since = created.minus(Duration::from_secs(3600));
    assert_eq!(q["params"]["since"], since.to_rfc3339());
    let open = app.alerts("?kind=task_stale").await;
    assert_eq!(open.assert_ok()["items"][0]["query_id"], qid.as_str());

    // Reclaimed, lapsed again, a new stale alert: the same window's query is still
    // queued, so the new alert links it instead of asking the site a second time.
    app.reclaim("po-ev", "w2").await.assert_ok();
    app.run_alerts().await; // the first alert clears: the task is leased
    app.expire_leases();
    app.sweep().await;
    assert_eq!(app.status_of("po-ev").await, "stale");
    app.run_alerts().await;
    app.run_alerts().await;
    let all = app.alerts("?kind=task_stale&state=all").await;
    let items = all.assert_ok()["items"].as_array().unwrap().clone();
    assert_eq!(items.len(), 2, "a second stale alert: {items:?}");
    assert!(
        items.iter().all(|a| a["query_id"] == qid.as_str()),
        "every stale alert of the task links the one query: {items:?}"
    );
    let d = app.task("po-ev").await;
    assert_eq!(
        d.assert_ok()["evidence_queries"],
        serde_json::json!([qid.as_str()])
    );

    // A worker can take it like any other account query.
    let g = app.lease_query("w1", 0.0).await;
    assert_eq!(g.assert_ok()["query_id"], qid.as_str());
}

async fn a_retired_worker_leaves_health_and_worker_offline_until_it_polls_again(e: Engine) {
    let app = e.spawn(|_| {}).await;
    assert!(app.lease("w-old", 0.0).await.data().is_null());
    app.clock.advance(Duration::from_secs(301));
    let r = app.run_alerts().await;
    assert_eq!(r.sync.raised.len(), 1);
    assert_eq!(r.sync.raised[0].subject, "w-old");
    let ws = answer(app.get("/api/workers").send().await.unwrap()).await;
    assert_eq!(ws.assert_ok()["items"][0]["offline"], true);
    assert_eq!(ws.assert_ok()["items"][0]["retired"], false);

    let del = |q: &str| {
        app.client
            .delete(app.url(&format!("/api/workers/w-old{q}")))
            .bearer_auth(&app.token)
            .send()
    };
    answer(del("").await.unwrap()).await.assert_err(422, 1003);
    let a = answer(del("?reason=decommissioned%20laptop").await.unwrap()).await;
    assert_eq!(a.assert_ok()["action"], "retire_worker");
    assert_eq!(a.assert_ok()["worker_id"], "w-old");
    let missing = answer(
        app.client
            .delete(app.url("/api/workers/w-none?reason=x"))
            .bearer_auth(&app.token)
            .send()
            .await
            .unwrap(),
    )
    .await;
    missing.assert_err(404, 1005);
    // A second retire moved the date and added an audit row; it is a 409 now, naming
    // when the worker was retired, and nothing is written.
    app.clock.advance(Duration::from_secs(60));
    let again = answer(del("?reason=again").await.unwrap()).await;
    again.assert_err(409, 1006);
    let msg = again.body["msg"].as_str().unwrap();
    assert!(
        msg.starts_with("worker w-old is already retired (since ")
            && msg.ends_with("it returns when it polls again"),
        "{msg}"
    );

    let h = app.health().await;
    assert!(
        h.assert_ok()["workers"].as_array().unwrap().is_empty(),
        "{h:?}"
    );
    let r = app.run_alerts().await;
    assert_eq!(r.sync.cleared.len(), 1);
    assert_eq!(r.sync.cleared[0].kind.as_str(), "worker_offline");
    let ws = answer(app.get("/api/workers").send().await.unwrap()).await;
    assert_eq!(ws.assert_ok()["items"][0]["retired"], true);

    // It polls again: back in /health, no longer retired.
    app.lease("w-old", 0.0).await;
    let h = app.health().await;
    assert_eq!(h.assert_ok()["workers"][0]["worker_id"], "w-old");
    let ws = answer(app.get("/api/workers").send().await.unwrap()).await;
    assert_eq!(ws.assert_ok()["items"][0]["retired"], false);
}

async fn needs_human_and_logged_out_raise_their_alerts_and_clear_when_the_cause_is_gone(e: Engine) {
    let app = e
        .spawn(|s| s.worker_offline_alert_seconds = 100_000.0)
        .await;
    // Amount guard (5004) and 3-D Secure (5005) both end needs_human.
    for (id, code) in [("po-guard", 5004), ("po-3ds", 5005)] {
        app.leased(id, "w1").await;
        app.report(id, json!({"worker_id": "w1", "state": "in_cart", "terminal": true, "outcome": "needs_human", "error_code": code}))
            .await
            .assert_ok();
    }
    let r = app.run_alerts().await;
    let mut summaries: Vec<(String, String)> = r
        .sync
        .raised
        .iter()
        .map(|a| (a.kind.to_string(), a.summary.clone()))
        .collect();
    summaries.sort();
    assert_eq!(summaries.len(), 2, "{summaries:?}");
    assert!(summaries.iter().all(|(k, _)| k == "task_needs_human"));
    assert!(summaries.iter().any(|(_, s)| s.contains("5004")));
    assert!(summaries.iter().any(|(_, s)| s.contains("5005")));

    // A 5001 from the query channel: logged out; a later success: logged in again.
    app.submit_list_query("aq-1").await.assert_ok();
    let g = app.lease_query("w1", 0.0).await;
    let token = g.assert_ok()["lease_token"].as_str().unwrap().to_owned();
    app.clock.advance(Duration::from_secs(1));
    app.query_result("aq-1", json!({"worker_id": "w1", "lease_token": token, "success": false, "error_code": 5001, "error_message": "logged out"}))
        .await
        .assert_ok();
    let r = app.run_alerts().await;
    assert_eq!(r.sync.raised.len(), 1, "{r:?}");
    assert_eq!(r.sync.raised[0].kind.as_str(), "account_logged_out");
    assert_eq!(r.sync.raised[0].subject, "rakuten");
    // /health shows these recorded alerts too, and says degraded (D-gateway-health-content).
    let h = app.health().await;
    let h = h.assert_ok();
    assert_eq!(h["status"], "degraded", "{h}");
    let kinds: Vec<&str> = h["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"account_logged_out"), "{h}");
    assert_eq!(
        kinds.iter().filter(|k| **k == "task_needs_human").count(),
        2,
        "{h}"
    );
    app.resolve(
        "po-guard",
        json!({"outcome": "failed", "reason": "over budget, not bought"}),
    )
    .await
    .assert_ok();
    app.clock.advance(Duration::from_secs(1));
    app.submit_list_query("aq-2").await.assert_ok();
    let g = app.lease_query("w1", 0.0).await;
    let token = g.assert_ok()["lease_token"].as_str().unwrap().to_owned();
    app.query_result("aq-2", json!({"worker_id": "w1", "lease_token": token, "success": true, "result": {"kind": "order_list", "since": null, "max_pages": 2, "window_fully_covered": true, "orders": [], "raw_pages": []}}))
        .await
        .assert_ok();
    let r = app.run_alerts().await;
    let mut cleared: Vec<String> = r.sync.cleared.iter().map(|a| a.subject.clone()).collect();
    cleared.sort();
    assert_eq!(cleared, ["po-guard", "rakuten"], "{r:?}");
}

async fn a_reclaim_records_its_reason_and_the_first_poll_receives_its_grant(e: Engine) {
    let app = e.spawn(|_| {}).await;
    app.stale("po-rc", "w1").await;
    let g = answer(
        app.post("/api/orders/po-rc/reclaim")
            .json(&json!({"worker_id": "w1", "reason": "checked: nothing ordered on the site"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let g = g.assert_ok().clone();
    assert_eq!(g["lease_count"], 2);
    let first = app.lease("w1", 0.0).await;
    let first = first.assert_ok();
    assert_eq!(first["lease_count"], 2, "the count rises once");
    assert_eq!(
        first["lease_token"], g["lease_token"],
        "the operator saw the live token"
    );
    // That token works.
    app.renew(
        "po-rc",
        json!({"worker_id": "w1", "lease_token": g["lease_token"]}),
    )
    .await
    .assert_ok();
    let d = app.task("po-rc").await;
    let actions = d.assert_ok()["operator_actions"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(actions.len(), 1);
    assert_eq!(actions[0]["action"], "reclaim");
    assert_eq!(actions[0]["reason"], "checked: nothing ordered on the site");
    assert_eq!(actions[0]["worker_id"], "w1");
    assert_eq!(actions[0]["from_status"], "stale");
    assert_eq!(actions[0]["to_status"], "leased");
}

#[tokio::test]
async fn the_audit_names_the_operator_token_and_other_roles_are_refused() {
    let app = Engine::Sqlite
        .spawn(|s| {
            s.operator_tokens = Some("alice:tok-alice-0123456789".parse().unwrap());
            s.worker_tokens = Some("pc-1:tok-worker-0123456789".parse().unwrap());
        })
        .await;
    app.stale("po-who", "w1").await;
    let as_token = |t: &'static str, path: &str, body: Value| {
        app.client
            .post(app.url(path))
            .bearer_auth(t)
            .json(&body)
            .send()
    };
    let body = json!({"outcome": "failed", "reason": "nothing on the site"});
    let refused = answer(
        as_token(
            "tok-worker-0123456789",
            "/api/orders/po-who/resolve",
            body.clone(),
        )
        .await
        .unwrap(),
    )
    .await;
    refused.assert_err(403, 1002);
    let a = answer(
        as_token("tok-alice-0123456789", "/api/orders/po-who/resolve", body)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(a.assert_ok()["action"]["actor"], "alice");
    let d = app.task("po-who").await;
    assert_eq!(d.assert_ok()["operator_actions"][0]["actor"], "alice");
    let alerts = answer(
        app.client
            .get(app.url("/api/alerts"))
            .bearer_auth("tok-worker-0123456789")
            .send()
            .await
            .unwrap(),
    )
    .await;
    alerts.assert_err(403, 1002);
}

/// A queued task whose stored intent does not decode is set aside by the next
/// lease (needs_human, reason `undecodable row`); the operator hears of it as of any other
/// needs_human task: an alert record naming the reason, delivered to the webhook receiver.
async fn a_poison_row_set_aside_raises_a_needs_human_alert_that_reaches_the_receiver(e: Engine) {
    let rx = Receiver::start().await;
    let app = e.spawn(with_receiver(rx.url.clone())).await;
    app.submit("po-poison").await.assert_ok();
    app.clock.advance(Duration::from_millis(5));
    app.submit("po-fine").await.assert_ok();
    assert_eq!(
        app.raw_sql("UPDATE tasks SET intent_json = '{not json' WHERE task_id = 'po-poison'")
            .await,
        1
    );
    let g = app.lease("w1", 0.0).await;
    assert_eq!(g.assert_ok()["task_id"], "po-fine");
    assert_eq!(app.status_of("po-poison").await, "needs_human");

    for _ in 0..3 {
        app.run_alerts().await;
        app.deliver().await;
    }
    let open = app.alerts("?state=open&kind=task_needs_human").await;
    let items = open.assert_ok()["items"].as_array().unwrap().clone();
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["task_id"], "po-poison");
    let summary = items[0]["summary"].as_str().unwrap();
    assert!(summary.contains("undecodable row"), "{summary}");
    assert!(
        !summary.contains("not json"),
        "row content never in an alert: {summary}"
    );

    let delivered = rx.delivered();
    let about = events_about(&delivered, "po-poison");
    assert_eq!(about.len(), 1, "{delivered:?}");
    assert_eq!(about[0]["kind"], "task_needs_human");
    assert_eq!(about[0]["state"], "raised");
    assert!(
        about[0]["summary"]
            .as_str()
            .unwrap()
            .contains("undecodable row")
    );
}
