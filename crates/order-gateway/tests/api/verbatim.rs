//! An intent is kept as the JSON text the upstream sent (D-intent-verbatim-text): numbers that do
//! not fit a float, key order and spacing come back through `GET /api/orders/{id}` and through a
//! lease byte for byte, on both engines; a resubmit is the same intent when it is the same JSON
//! value, numbers as written (D-intent-resubmit-same-value).

use rakuten_types::WorkerId;

use crate::helpers::{Engine, TestApp, answer};
use crate::on_both_engines;

/// The intent as sent: three numbers a float cannot hold, unusual spacing and key order.
const INTENT: &str = r#"{"quantity": 1,  "options": {"big": 123456789012345678901234567890, "u64_plus_one": 18446744073709551616, "tenth": 0.1000000000000000055511151231257827}, "item_url":"https://item.rakuten.co.jp/shop/a/"}"#;

fn body(task_id: &str, intent: &str) -> String {
    format!(r#"{{"task_id":"{task_id}","site":"rakuten","intent":{intent}}}"#)
}

async fn submit_text(app: &TestApp, task_id: &str, intent: &str) -> crate::helpers::Answer {
    answer(
        app.post("/api/orders")
            .header("content-type", "application/json")
            .body(body(task_id, intent))
            .send()
            .await
            .unwrap(),
    )
    .await
}

async fn text_of(app: &TestApp, path: &str) -> String {
    let resp = app.get(path).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    resp.text().await.unwrap()
}

async fn intent_numbers_read_back_verbatim(e: Engine) {
    let app = e.spawn(|_| {}).await;
    submit_text(&app, "po-big", INTENT).await.assert_ok();
    // The detail carries the text as sent.
    let detail = text_of(&app, "/api/orders/po-big").await;
    assert!(
        detail.contains(&format!(r#""intent":{INTENT}"#)),
        "{detail}"
    );
    for number in [
        "123456789012345678901234567890",
        "18446744073709551616",
        "0.1000000000000000055511151231257827",
    ] {
        assert!(detail.contains(number), "{number} changed: {detail}");
    }
    // So does the lease the worker receives, on the wire and through the typed client.
    let lease = text_of(&app, "/api/orders/lease?worker_id=w1&wait=0").await;
    assert!(lease.contains(&format!(r#""intent":{INTENT}"#)), "{lease}");
    let client = gateway_client::Client::builder(&app.address, &app.token)
        .build()
        .unwrap();
    let grant = client
        .lease(&WorkerId::parse("w1").unwrap(), 0, None)
        .await
        .unwrap()
        .expect("the worker's own task comes back");
    assert_eq!(grant.intent.as_str(), INTENT);
    let d = client
        .task(&rakuten_types::TaskId::parse("po-big").unwrap())
        .await
        .unwrap();
    assert_eq!(d.intent.as_str(), INTENT);
    assert_eq!(d.intent_bytes, INTENT.len() as i64);
}

async fn a_resubmit_is_the_same_intent_when_it_is_the_same_json_value(e: Engine) {
    let app = e.spawn(|_| {}).await;
    let first = submit_text(&app, "po-same", INTENT).await;
    assert_eq!(first.assert_ok()["created"], true);
    // Byte for byte the same: the idempotent resubmit, as always.
    let again = submit_text(&app, "po-same", INTENT).await;
    assert_eq!(again.assert_ok()["created"], false);
    // The same value written otherwise (keys reordered, spacing, an escaped character): the
    // same intent; the first text is the one kept.
    let reordered = r#"{"item_url":"https:\/\/item.rakuten.co.jp\/shop\/a\/","options":{"tenth":0.1000000000000000055511151231257827,"big":123456789012345678901234567890,"u64_plus_one":18446744073709551616},"quantity":1}"#;
    let same = submit_text(&app, "po-same", reordered).await;
    assert_eq!(same.assert_ok()["created"], false);
    let detail = text_of(&app, "/api/orders/po-same").await;
    assert!(detail.contains(INTENT), "{detail}");
    // A number that differs only past a float's precision is a different intent (a float
    // comparison took the two as equal).
    for (other, field) in [
        (
            INTENT.replace(
                "123456789012345678901234567890",
                "123456789012345678901234567891",
            ),
            "intent.options",
        ),
        (
            INTENT.replace("0.1000000000000000055511151231257827", "0.1"),
            "intent.options",
        ),
        (
            INTENT.replace(r#""quantity": 1,"#, r#""quantity": 2,"#),
            "intent.quantity",
        ),
    ] {
        let a = submit_text(&app, "po-same", &other).await;
        a.assert_err(409, 1006);
        let msg = a.body["msg"].as_str().unwrap();
        assert!(msg.contains(&format!("different {field};")), "{msg}");
    }
}

on_both_engines!(
    intent_numbers_read_back_verbatim,
    a_resubmit_is_the_same_intent_when_it_is_the_same_json_value,
);
