//! An order intent's optional deadline, `not_after` (D-task-not-after-expired): a queued task past
//! it is never leased — the lease query itself refuses it against the injected clock's now — and
//! the sweeper ends it `expired`, with a `task_expired` alert and its webhook event. A leased task
//! is unaffected; without a deadline nothing changes. Both engines.

use std::time::Duration;

use order_gateway::settings::Secret;
use rakuten_types::{Clock, Timestamp};
use serde_json::{Value, json};

use crate::helpers::{Engine, TestApp};
use crate::receiver::Receiver;

crate::on_both_engines!(
    a_queued_task_past_not_after_is_never_leased,
    a_leased_task_is_unaffected_by_its_not_after,
    a_not_after_in_the_past_or_malformed_is_refused,
    a_retried_submit_after_its_not_after_passed_returns_the_task,
);

fn order(task_id: &str, not_after: Option<Timestamp>) -> Value {
    let mut b = json!({"task_id": task_id, "site": "rakuten",
        "intent": {"item_url": "https://item.rakuten.co.jp/shop/a/", "quantity": 1}});
    if let Some(t) = not_after {
        b["not_after"] = json!(t.to_rfc3339());
    }
    b
}

fn in_secs(app: &TestApp, s: u64) -> Timestamp {
    app.clock.now().plus(Duration::from_secs(s))
}

async fn a_queued_task_past_not_after_is_never_leased(e: Engine) {
    let rx = Receiver::start().await;
    let app = e
        .spawn(|s| {
            s.worker_offline_alert_seconds = 100_000.0;
            s.alerts.webhook_urls = Some(Secret::new(rx.url.clone()));
        })
        .await;
    let deadline = in_secs(&app, 60);
    let ack = app.submit_body(order("po-na-1", Some(deadline))).await;
    assert_eq!(ack.assert_ok()["status"], "queued");
    app.submit("po-na-2").await.assert_ok();
    let d = app.task("po-na-1").await;
    assert_eq!(d.assert_ok()["not_after"], deadline.to_rfc3339());

    // Past the deadline, before any sweep: the lease query passes the older task over and hands
    // out the one without a deadline.
    app.clock.advance(Duration::from_secs(61));
    let g = app.lease("w1", 0.0).await;
    assert_eq!(g.assert_ok()["task_id"], "po-na-2");
    app.report(
        "po-na-2",
        json!({"worker_id": "w1", "state": "paid", "terminal": true}),
    )
    .await
    .assert_ok();
    let g = app.lease("w1", 0.0).await;
    assert!(g.assert_ok().is_null(), "never leased: {:?}", g.body);
    assert_eq!(app.status_of("po-na-1").await, "queued", "not swept yet");

    // The sweeper ends it, saying why.
    app.sweep().await;
    let d = app.task("po-na-1").await;
    let t = d.assert_ok();
    assert_eq!(t["status"], "expired");
    assert_eq!(t["lease_count"], 0);
    assert!(t["outcome"].is_null());
    assert!(t["lease_owner"].is_null());
    assert!(app.lease("w1", 0.0).await.assert_ok().is_null());
    let listed = app.list("?status=expired").await;
    assert_eq!(listed.assert_ok()["total"], 1);

    // Its alert, and the event a person receives.
    let run = app.run_alerts().await;
    let raised: Vec<_> = run
        .sync
        .raised
        .iter()
        .filter(|a| a.kind.as_str() == "task_expired")
        .collect();
    assert_eq!(raised.len(), 1, "{run:?}");
    assert_eq!(raised[0].subject, "po-na-1");
    assert!(
        raised[0].summary.contains("not_after") && raised[0].summary.contains("never leased"),
        "{}",
        raised[0].summary
    );
    app.deliver().await;
    let got = rx.delivered();
    let ev: Vec<&Value> = got.iter().filter(|e| e["kind"] == "task_expired").collect();
    assert_eq!(ev.len(), 1, "{got:?}");
    assert_eq!(ev[0]["task_id"], "po-na-1");
    assert_eq!(ev[0]["state"], "raised");

    // Neither an operator's cancel nor a resolve applies to it: it is over.
    app.cancel("po-na-1", "too late")
        .await
        .assert_err(409, 6003);
    app.resolve(
        "po-na-1",
        json!({"outcome": "failed", "reason": "too late"}),
    )
    .await
    .assert_err(409, 6003);
}

async fn a_leased_task_is_unaffected_by_its_not_after(e: Engine) {
    let app = e.spawn(|_| {}).await;
    app.submit_body(order("po-na-3", Some(in_secs(&app, 60))))
        .await
        .assert_ok();
    let g = app.lease("w1", 0.0).await;
    let g = g.assert_ok().clone();
    assert_eq!(g["task_id"], "po-na-3");
    app.clock.advance(Duration::from_secs(120));
    app.sweep().await;
    assert_eq!(app.status_of("po-na-3").await, "leased");
    app.renew("po-na-3", json!({"worker_id": "w1"}))
        .await
        .assert_ok();
    app.report(
        "po-na-3",
        json!({"worker_id": "w1", "lease_token": g["lease_token"], "state": "paid", "terminal": true}),
    )
    .await
    .assert_ok();
    assert_eq!(app.status_of("po-na-3").await, "succeeded");
}

async fn a_not_after_in_the_past_or_malformed_is_refused(e: Engine) {
    let app = e.spawn(|_| {}).await;
    let now = app.clock.now();
    for (id, not_after) in [
        (
            "po-past",
            json!(now.minus(Duration::from_secs(1)).to_rfc3339()),
        ),
        ("po-now", json!(now.to_rfc3339())),
        ("po-text", json!("tomorrow")),
        ("po-number", json!(1_785_110_400)),
        ("po-null-date", json!("2026-02-30T00:00:00Z")),
    ] {
        let mut body = order(id, None);
        body["not_after"] = not_after.clone();
        let a = app.submit_body(body).await;
        a.assert_err(422, 1003);
        let msg = a.body["msg"].as_str().unwrap();
        assert!(msg.contains("not_after"), "{not_after}: {msg}");
        app.task(id).await.assert_err(404, 6001);
    }
    let a = app
        .submit_body(order(
            "po-past-2",
            Some(now.minus(Duration::from_secs(3600))),
        ))
        .await;
    let msg = a.body["msg"].as_str().unwrap();
    assert!(msg.contains("in the future"), "{:?}", a.body);
    // The message reads as one sentence: no run of spaces inside it.
    assert!(!msg.contains("  "), "{msg:?}");
    // Any RFC 3339 offset is read; the task shows it in the canonical form.
    let mut body = order("po-offset", None);
    body["not_after"] = json!("2026-07-27T10:00:00+09:00");
    app.submit_body(body).await.assert_ok();
    let d = app.task("po-offset").await;
    assert_eq!(d.assert_ok()["not_after"], "2026-07-27T01:00:00.000Z");
}

async fn a_retried_submit_after_its_not_after_passed_returns_the_task(e: Engine) {
    let app = e.spawn(|_| {}).await;
    let deadline = in_secs(&app, 10);
    app.submit_body(order("po-na-4", Some(deadline)))
        .await
        .assert_ok();
    app.clock.advance(Duration::from_secs(20));
    // The upstream's retry of a submit whose answer it lost: the same task, not a 422.
    let again = app.submit_body(order("po-na-4", Some(deadline))).await;
    let again = again.assert_ok();
    assert_eq!(again["created"], false);
    app.sweep().await;
    let again = app.submit_body(order("po-na-4", Some(deadline))).await;
    assert_eq!(again.assert_ok()["status"], "expired");
    // Another deadline under the same id is another request.
    let other = app
        .submit_body(order("po-na-4", Some(in_secs(&app, 3600))))
        .await;
    other.assert_err(409, 1006);
    assert!(
        other.body["msg"].as_str().unwrap().contains("not_after"),
        "{:?}",
        other.body
    );
    let none = app.submit_body(order("po-na-4", None)).await;
    none.assert_err(409, 1006);
}

/// The API document describes the deadline (its meaning, on `SubmitOrder` and `TaskSummary`) and
/// lists `expired` among the task statuses, so an upstream generating a client sees both.
#[tokio::test]
async fn the_api_document_describes_not_after_and_the_expired_status() {
    let app = Engine::Sqlite.spawn(|_| {}).await;
    let doc: Value = app
        .client
        .get(app.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let schemas = &doc["components"]["schemas"];
    for schema in ["SubmitOrder", "TaskSummary"] {
        let p = &schemas[schema]["properties"]["not_after"];
        assert!(p.is_object(), "{schema}.not_after: {}", schemas[schema]);
        let text = p.to_string();
        assert!(text.contains("expired"), "{schema}.not_after: {text}");
    }
    assert!(
        !schemas["SubmitOrder"]["required"]
            .as_array()
            .is_some_and(|r| r.iter().any(|f| f == "not_after")),
        "not_after is optional"
    );
    let statuses = schemas["TaskStatus"]["enum"].as_array().unwrap();
    assert!(statuses.iter().any(|s| s == "expired"), "{statuses:?}");
}
