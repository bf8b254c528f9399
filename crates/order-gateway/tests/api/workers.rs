//! The worker list pages with its total and the lease holders first, and offline workers past
//! the per-worker alert cap are named by one aggregate alert (D-worker-list-pages,
//! D-worker-offline-aggregate). Time is a `ManualClock`; each test runs on both engines.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use crate::helpers::{Engine, TestApp, answer};

crate::on_both_engines!(
    past_two_thousand_workers_the_list_has_its_total_and_the_lease_holder_on_the_first_page,
    offline_workers_past_the_alert_cap_are_counted_by_one_aggregate_alert,
    a_worker_silent_past_the_retention_is_forgotten_unless_it_holds_a_lease,
);

/// Polls once as each of `ids`, twenty at a time.
async fn poll_each(app: &Arc<TestApp>, ids: Vec<String>) {
    let mut polls = tokio::task::JoinSet::new();
    for chunk in ids.chunks(ids.len().div_ceil(20)) {
        let app = app.clone();
        let chunk = chunk.to_vec();
        polls.spawn(async move {
            for id in chunk {
                assert!(app.lease(&id, 0.0).await.data().is_null());
            }
        });
    }
    while let Some(r) = polls.join_next().await {
        r.unwrap();
    }
}

async fn page(app: &TestApp, query: &str) -> serde_json::Value {
    let a = answer(
        app.get(&format!("/api/workers{query}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    a.assert_ok().clone()
}

/// 2,100 worker ids, one holding a task and 2,099 that polled after it: the list answered a bare
/// array of the 1,000 longest silent, without the lease holder and without a total.
async fn past_two_thousand_workers_the_list_has_its_total_and_the_lease_holder_on_the_first_page(
    e: Engine,
) {
    let app = Arc::new(e.spawn(|_| {}).await);
    app.leased("po-1", "rw").await;
    app.clock.advance(Duration::from_secs(1));
    poll_each(&app, (0..2099).map(|i| format!("lp-{i:04}")).collect()).await;

    let first = page(&app, "").await;
    assert_eq!(first["total"], 2100);
    assert_eq!(
        (first["limit"].as_i64(), first["offset"].as_i64()),
        (Some(50), Some(0))
    );
    let items = first["items"].as_array().unwrap();
    assert_eq!(items.len(), 50);
    assert_eq!(
        items[0]["worker_id"], "rw",
        "the lease holder first: {}",
        items[0]
    );
    assert_eq!(items[0]["active_task"], "po-1");
    assert!(items[1..].iter().all(|w| w["active_task"].is_null()));

    // Every worker is on exactly one page of 200 (a larger limit is read as 200).
    let mut seen = HashSet::new();
    let mut offset = 0;
    loop {
        let p = page(&app, &format!("?limit=500&offset={offset}")).await;
        assert_eq!(p["limit"], 200);
        let items = p["items"].as_array().unwrap();
        if items.is_empty() {
            break;
        }
        for w in items {
            assert!(
                seen.insert(w["worker_id"].as_str().unwrap().to_owned()),
                "{w}"
            );
        }
        offset += 200;
    }
    assert_eq!(seen.len(), 2100);
    assert_eq!(page(&app, "?offset=2100").await["total"], 2100);
    answer(app.get("/api/workers?limit=0").send().await.unwrap())
        .await
        .assert_err(422, 1003);
}

/// 150 workers offline raised 150 `worker_offline` alerts, and 1,000 more would have raised none.
/// Now the 100 longest silent have one each and the rest one aggregate, whose count follows.
async fn offline_workers_past_the_alert_cap_are_counted_by_one_aggregate_alert(e: Engine) {
    let app = Arc::new(e.spawn(|s| s.worker_offline_alert_seconds = 2.0).await);
    poll_each(&app, (0..100).map(|i| format!("old-{i:03}")).collect()).await;
    app.clock.advance(Duration::from_secs(1));
    poll_each(&app, (0..50).map(|i| format!("new-{i:03}")).collect()).await;
    app.clock.advance(Duration::from_secs(3));

    let r = app.run_alerts().await;
    assert_eq!(r.sync.raised.len(), 101);
    let individual: HashSet<&str> = r
        .sync
        .raised
        .iter()
        .filter_map(|a| a.worker_id.as_deref())
        .collect();
    assert_eq!(individual.len(), 100);
    assert!(
        individual.iter().all(|w| w.starts_with("old-")),
        "the longest silent"
    );
    let agg: Vec<_> = r
        .sync
        .raised
        .iter()
        .filter(|a| a.subject == "workers/not-listed")
        .collect();
    assert_eq!(agg.len(), 1);
    assert_eq!(agg[0].kind.as_str(), "worker_offline");
    assert!(
        agg[0].summary.starts_with("50 more workers"),
        "{}",
        agg[0].summary
    );

    // Ten more go offline: no alert is raised or cleared, the aggregate's count follows.
    poll_each(&app, (0..10).map(|i| format!("late-{i:03}")).collect()).await;
    app.clock.advance(Duration::from_secs(3));
    let r = app.run_alerts().await;
    assert_eq!((r.sync.raised.len(), r.sync.cleared.len()), (0, 0));
    let open = answer(
        app.get("/api/alerts?kind=worker_offline&limit=200")
            .send()
            .await
            .unwrap(),
    )
    .await;
    let open = open.assert_ok();
    assert_eq!(open["total"], 101);
    let agg = open["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["subject"] == "workers/not-listed")
        .unwrap();
    assert!(
        agg["summary"]
            .as_str()
            .unwrap()
            .starts_with("60 more workers"),
        "{agg}"
    );

    // Back under the cap (every later one polls again): the aggregate clears.
    poll_each(&app, (0..50).map(|i| format!("new-{i:03}")).collect()).await;
    poll_each(&app, (0..10).map(|i| format!("late-{i:03}")).collect()).await;
    let r = app.run_alerts().await;
    assert_eq!(r.sync.raised.len(), 0);
    assert_eq!(r.sync.cleared.len(), 1);
    assert_eq!(r.sync.cleared[0].subject, "workers/not-listed");
}

/// Worker rows were never deleted but one by one by an operator: ids that polled once stayed in
/// the list and kept their `worker_offline` alert open for good.
async fn a_worker_silent_past_the_retention_is_forgotten_unless_it_holds_a_lease(e: Engine) {
    let app = e
        .spawn(|s| {
            s.worker_offline_alert_seconds = 2.0;
            s.worker_retention_seconds = 100.0;
            s.lease_ttl_seconds = 1000.0;
        })
        .await;
    app.leased("po-1", "holder").await;
    assert!(app.lease("gone", 0.0).await.data().is_null());
    app.clock.advance(Duration::from_secs(10));
    let r = app.run_alerts().await;
    assert_eq!(r.sync.raised.len(), 2, "{:?}", r.sync.raised);

    app.clock.advance(Duration::from_secs(91));
    let r = app.run_alerts().await;
    assert_eq!(r.sync.cleared.len(), 1);
    assert_eq!(r.sync.cleared[0].subject, "gone");
    let ws = page(&app, "").await;
    assert_eq!(ws["total"], 1);
    assert_eq!(ws["items"][0]["worker_id"], "holder");
    assert_eq!(ws["items"][0]["active_task"], "po-1");

    // It polls again: a worker like any other.
    assert!(app.lease("gone", 0.0).await.data().is_null());
    assert_eq!(page(&app, "").await["total"], 2);
}
