//! A whole number written with a fraction (`11.0`, `-194848.0`) is the integer it names wherever
//! the gateway reads an integer from a JSON body, as JSON Schema's `integer` (the document's type)
//! reads it; a fraction (`11.5`) and an out-of-range value are refused with the messages they
//! always had (D-json-whole-numbers). What is stored as sent stays as sent: the intent's text and a
//! query result's raw pages.

use serde_json::{Value, json};

use crate::helpers::{answer, spawn_app};

#[tokio::test]
async fn max_pages_written_with_a_fraction_is_accepted_and_stored_as_an_integer() {
    let app = spawn_app().await;
    // What schemathesis sent.
    let a = app
        .submit_query(
            json!({"query_id": "aq-f", "site": "rakuten", "kind": "order_list",
            "params": {"since": "0074-09-19T06:45:39Z", "max_pages": 11.0}}),
        )
        .await;
    a.assert_ok();
    let v = app.query("aq-f").await;
    assert_eq!(v.assert_ok()["params"]["max_pages"], json!(11));
    assert!(v.assert_ok()["params"]["max_pages"].is_u64());
    // The same request written with an integer is the same query, not a 409.
    let again = app
        .submit_query(
            json!({"query_id": "aq-f", "site": "rakuten", "kind": "order_list",
            "params": {"since": "0074-09-19T06:45:39Z", "max_pages": 11}}),
        )
        .await;
    assert_eq!(again.assert_ok()["created"], false);
    for bad in [json!(11.5), json!(21.0), json!(0)] {
        let a = app
            .submit_query(
                json!({"site": "rakuten", "kind": "order_list", "params": {"max_pages": bad}}),
            )
            .await;
        a.assert_err(422, 1003);
        assert_eq!(
            a.body["msg"], "params.max_pages must be an integer from 1 to 20",
            "{bad}"
        );
    }
}

#[tokio::test]
async fn a_query_result_with_ids_written_with_a_fraction_is_stored_as_sent() {
    let app = spawn_app().await;
    app.submit_list_query("aq-r").await.assert_ok();
    let g = app.lease_query("w1", 0.0).await.assert_ok().clone();
    let result = json!({
        "kind": "order_list", "since": null, "max_pages": 2.0, "window_fully_covered": true,
        "orders": [{"order_number": "1-2-3", "order_date": "2026-08-13T01:00:00.000Z",
                    "shop_id": -194848.0, "shop_name": "sim",
                    "items": [{"item_id": 776.0, "item_name": "tea", "item_url": "https://item.rakuten.co.jp/s/a/"}]}],
        "raw_pages": [{"price": 1.0, "count": 3}],
    });
    let a = app
        .query_result(
            "aq-r",
            json!({"worker_id": "w1", "lease_token": g["lease_token"], "success": true,
                   "result": result, "error_code": null, "error_message": null}),
        )
        .await;
    assert_eq!(a.assert_ok()["status"], "succeeded");
    let stored = app.query("aq-r").await.assert_ok()["result"].clone();
    assert_eq!(stored, result);
    assert_eq!(stored["raw_pages"][0]["price"], json!(1.0));
}

#[tokio::test]
async fn a_query_result_with_a_fractional_id_is_refused() {
    let app = spawn_app().await;
    app.submit_list_query("aq-x").await.assert_ok();
    let g = app.lease_query("w1", 0.0).await.assert_ok().clone();
    let result = json!({
        "kind": "order_list", "since": null, "max_pages": 2, "window_fully_covered": true,
        "orders": [{"order_number": "1", "order_date": "2026-08-13T01:00:00.000Z",
                    "shop_id": 1.5, "shop_name": "sim", "items": []}],
        "raw_pages": [],
    });
    let a = app
        .query_result(
            "aq-x",
            json!({"worker_id": "w1", "lease_token": g["lease_token"], "success": true, "result": result}),
        )
        .await;
    a.assert_err(422, 1003);
    let msg = a.body["msg"].as_str().unwrap();
    assert!(msg.contains("invalid type: floating point `1.5`"), "{msg}");
}

#[tokio::test]
async fn report_amounts_and_codes_written_with_a_fraction_are_integers() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    app.report(
        "po-1",
        json!({"worker_id": "w1", "state": "awaiting_payment", "payable_yen": 12800.0, "error_code": 5004.0}),
    )
    .await
    .assert_ok();
    let t = app.task("po-1").await;
    let last = t.assert_ok()["history"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        (last["payable_yen"].clone(), last["error_code"].clone()),
        (json!(12800), json!(5004))
    );
    for (field, bad, expected) in [
        (
            "payable_yen",
            json!(12800.5),
            "payable_yen: invalid type: floating point `12800.5`, expected a whole number",
        ),
        (
            "error_code",
            json!(3000000000u64),
            "error_code: invalid value: integer `3000000000`, expected a whole number",
        ),
        (
            "error_code",
            json!(3e9),
            "error_code: invalid type: floating point `3000000000.0`, expected a whole number",
        ),
    ] {
        let mut body = json!({"worker_id": "w1", "state": "paid"});
        body[field] = bad.clone();
        let a = app.report("po-1", body).await;
        a.assert_err(422, 1003);
        let msg = a.body["msg"].as_str().unwrap();
        assert!(msg.contains(expected), "{field} {bad}: {msg}");
    }
}

#[tokio::test]
async fn an_intent_quantity_written_with_a_fraction_is_accepted_and_kept_as_sent() {
    let app = spawn_app().await;
    let text = r#"{"item_url":"https://item.rakuten.co.jp/shop/a/","quantity":2.0,"max_total_yen":5000.0}"#;
    let a = answer(
        app.post("/api/orders")
            .header("content-type", "application/json")
            .body(format!(
                r#"{{"task_id":"po-q","site":"rakuten","intent":{text}}}"#
            ))
            .send()
            .await
            .unwrap(),
    )
    .await;
    a.assert_ok();
    let detail = app
        .get("/api/orders/po-q")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(detail.contains(&format!(r#""intent":{text}"#)), "{detail}");
    let listed: Value = app.list("").await.assert_ok()["items"][0]["intent"].clone();
    assert_eq!(listed["quantity"], json!(2));
    let half = app
        .submit_body(json!({"site": "rakuten", "intent": {"item_url": "https://item.rakuten.co.jp/shop/a/", "quantity": 1.5}}))
        .await;
    half.assert_err(422, 1003);
    assert!(
        half.body["msg"]
            .as_str()
            .unwrap()
            .contains("quantity must be an integer 1..=99"),
        "{:?}",
        half.body
    );
}
