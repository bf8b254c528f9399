use serde_json::json;

use crate::helpers::spawn_app;

#[tokio::test]
async fn submitting_the_same_task_id_twice_creates_one_task() {
    let app = spawn_app().await;
    let first = app.submit("po-1").await;
    assert_eq!(
        first.assert_ok(),
        &json!({"task_id": "po-1", "status": "queued", "created": true})
    );
    let again = app.submit("po-1").await;
    assert_eq!(
        again.assert_ok(),
        &json!({"task_id": "po-1", "status": "queued", "created": false})
    );
    let list = app.list("").await;
    assert_eq!(list.assert_ok()["total"], 1);
}

#[tokio::test]
async fn resubmitting_a_leased_task_returns_its_current_status() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    let again = app.submit("po-1").await;
    assert_eq!(again.assert_ok()["status"], "leased");
    assert_eq!(again.data()["created"], false);
}

#[tokio::test]
async fn submitting_without_a_task_id_generates_one() {
    let app = spawn_app().await;
    let a = app
        .submit_body(json!({"site": "rakuten", "intent": {"item_url": "https://item.rakuten.co.jp/shop/a/", "quantity": 1}}))
        .await;
    let id = a.assert_ok()["task_id"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 36);
    assert_eq!(app.status_of(&id).await, "queued");
}

#[tokio::test]
async fn task_detail_has_fields_latest_state_and_history_oldest_first() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    for state in ["created", "in_cart", "ordered"] {
        app.report("po-1", json!({"worker_id": "w1", "state": state}))
            .await
            .assert_ok();
    }
    let t = app.task("po-1").await;
    let d = t.assert_ok();
    assert_eq!(d["status"], "running");
    assert_eq!(d["latest_state"], "ordered");
    assert_eq!(d["lease_owner"], "w1");
    assert_eq!(d["intent"]["quantity"], 1);
    let states: Vec<_> = d["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["state"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(states, ["created", "in_cart", "ordered"]);
}

#[tokio::test]
async fn list_pages_and_filters_by_status() {
    let app = spawn_app().await;
    for i in 0..5 {
        app.submit(&format!("po-{i}")).await.assert_ok();
    }
    app.lease("w1", 0.0).await.assert_ok();
    let page = app.list("?limit=2&offset=1").await;
    let d = page.assert_ok();
    assert_eq!(
        (
            d["total"].as_i64(),
            d["limit"].as_i64(),
            d["offset"].as_i64()
        ),
        (Some(5), Some(2), Some(1))
    );
    let ids: Vec<_> = d["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["task_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, ["po-1", "po-2"]);
    let queued = app.list("?status=queued&site=rakuten").await;
    assert_eq!(queued.assert_ok()["total"], 4);
    let leased = app.list("?status=leased").await;
    assert_eq!(leased.assert_ok()["items"][0]["task_id"], "po-0");
    let big = app.list("?limit=1000").await;
    assert_eq!(big.assert_ok()["limit"], 200);
    assert_eq!(app.list("").await.assert_ok()["limit"], 50);
}
