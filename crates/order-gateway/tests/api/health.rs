use std::time::Duration;

use serde_json::json;

use crate::helpers::{spawn_app, spawn_app_with};

fn alert_kinds(h: &serde_json::Value) -> Vec<(String, String)> {
    h["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["kind"].as_str().unwrap().to_owned(),
                a["subject"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn health_is_ok_with_counts_when_nothing_is_wrong() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    app.submit("po-2").await.assert_ok();
    let h = app.health().await;
    let d = h.assert_ok();
    assert_eq!(d["status"], "ok");
    assert_eq!(d["queued"], 1);
    assert_eq!(d["active"][0]["task_id"], "po-1");
    assert_eq!(d["active"][0]["lease_owner"], "w1");
    assert_eq!(d["workers"][0]["worker_id"], "w1");
    assert_eq!(d["workers"][0]["last_seen_seconds"], 0.0);
}

#[tokio::test]
async fn health_is_degraded_when_a_worker_is_silent_past_the_threshold() {
    let app = spawn_app().await;
    app.lease("w1", 0.0).await;
    app.clock.advance(Duration::from_secs(299));
    assert_eq!(app.health().await.data()["status"], "ok");
    app.clock.advance(Duration::from_secs(2));
    let h = app.health().await;
    let d = h.assert_ok();
    assert_eq!(d["status"], "degraded");
    assert_eq!(d["workers"][0]["offline"], true);
    assert_eq!(d["workers"][0]["last_seen_seconds"], 301.0);
    assert_eq!(
        alert_kinds(d),
        [("worker_offline".to_owned(), "w1".to_owned())]
    );
    // Polling again clears it.
    app.lease("w1", 0.0).await;
    assert_eq!(app.health().await.data()["status"], "ok");
}

#[tokio::test]
async fn health_alerts_on_a_task_queued_too_long() {
    let app = spawn_app().await;
    app.submit("po-1").await.assert_ok();
    app.clock.advance(Duration::from_secs(601));
    let h = app.health().await;
    assert_eq!(h.data()["status"], "degraded");
    assert_eq!(
        alert_kinds(h.data()),
        [("task_queued_too_long".to_owned(), "po-1".to_owned())]
    );
}

#[tokio::test]
async fn health_alerts_on_every_stale_task() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    app.report("po-1", json!({"worker_id": "w1", "state": "ordered"}))
        .await
        .assert_ok();
    app.expire_leases();
    app.sweep().await;
    app.lease("w1", 0.0).await; // keep the worker fresh
    let h = app.health().await;
    let d = h.assert_ok();
    assert_eq!(d["stale"], 1);
    assert_eq!(d["status"], "degraded");
    assert_eq!(
        alert_kinds(d),
        [("task_stale".to_owned(), "po-1".to_owned())]
    );
}

#[tokio::test]
async fn openapi_document_lists_every_endpoint() {
    let app = spawn_app().await;
    let doc: serde_json::Value = app
        .client
        .get(app.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for path in [
        "/api/orders",
        "/api/orders/lease",
        "/api/orders/{task_id}",
        "/api/orders/{task_id}/renew",
        "/api/orders/{task_id}/report",
        "/api/orders/{task_id}/reclaim",
        "/health",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} missing");
    }
    // /health's per-instance clocks are in the document (schemathesis checks
    // answers against it).
    let schemas = &doc["components"]["schemas"];
    assert!(
        schemas["Health"]["properties"]["clocks"].is_object(),
        "{}",
        schemas["Health"]
    );
    for field in [
        "instance_id",
        "offset_ms",
        "skewed",
        "last_jump_at",
        "updated_at",
    ] {
        assert!(
            schemas["InstanceClock"]["properties"][field].is_object(),
            "InstanceClock.{field}: {}",
            schemas["InstanceClock"]
        );
    }
    let kinds = schemas["AlertKind"].to_string();
    assert!(
        kinds.contains("clock_jump") && kinds.contains("clock_skew"),
        "{kinds}"
    );
}

/// With the offline threshold at 2 s, one poll as `zz-real` then one each as
/// `aa-0000` … `aa-0999`; `/health` listed only the first 1,000 workers by name, so `zz-real` and
/// its offline alert were missing.
#[tokio::test]
async fn an_offline_worker_and_its_alert_stay_in_view_past_a_thousand_workers() {
    let app = std::sync::Arc::new(spawn_app_with(|s| s.worker_offline_alert_seconds = 2.0).await);
    app.lease("zz-real", 0.0).await;
    app.clock.advance(Duration::from_secs(3));
    let mut polls = tokio::task::JoinSet::new();
    for chunk in 0..20 {
        let app = app.clone();
        polls.spawn(async move {
            for i in 0..50 {
                app.lease(&format!("aa-{:04}", chunk * 50 + i), 0.0).await;
            }
        });
    }
    while let Some(r) = polls.join_next().await {
        r.unwrap();
    }
    let h = app.health().await;
    let d = h.assert_ok();
    assert_eq!(d["workers_total"], 1001);
    assert_eq!(d["workers"].as_array().unwrap().len(), 1000);
    assert_eq!(d["workers"][0]["worker_id"], "zz-real", "offline first");
    assert_eq!(d["workers"][0]["offline"], true);
    assert_eq!(
        alert_kinds(d),
        [("worker_offline".to_owned(), "zz-real".to_owned())]
    );
    // The operator's worker list pages with its total (D-worker-list-pages): most recently seen
    // first, so the long-silent worker is on the last page, and the total says it is there.
    let ws = crate::helpers::answer(app.get("/api/workers").send().await.unwrap()).await;
    let ws = ws.assert_ok();
    assert_eq!(ws["total"], 1001);
    assert_eq!(ws["items"].as_array().unwrap().len(), 50);
    let last =
        crate::helpers::answer(app.get("/api/workers?offset=1000").send().await.unwrap()).await;
    let last = last.assert_ok();
    assert_eq!(last["items"][0]["worker_id"], "zz-real", "{last}");
    assert_eq!(last["items"][0]["offline"], true);
}

/// An operator's whole `/health` answer also has `status`: with an open summary schema it matched
/// both branches of the document's `oneOf`, which a schema-checking client (schemathesis) refuses.
/// The summary admits no other property, so each answer matches exactly one branch.
#[tokio::test]
async fn the_health_summary_schema_is_closed_so_a_whole_answer_matches_one_branch() {
    let app = spawn_app().await;
    let doc: serde_json::Value = app
        .client
        .get(app.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let summary = &doc["components"]["schemas"]["HealthSummary"];
    assert_eq!(summary["additionalProperties"], false, "{summary}");
    assert_eq!(
        summary["required"],
        serde_json::json!(["status"]),
        "{summary}"
    );
}
