//! The worker run with a worker-role token (`RAKUTEN_WORKER_TOKENS`) instead of an operator one:
//! every gateway call it makes is allowed, and a re-granted or reclaimed task is verified on the
//! site (D-worker-reads-held-task) rather than ending `needs_human` on a refused task read.

use std::sync::atomic::Ordering;
use std::time::Duration;

use rakuten_types::{Clock, TaskId};
use serde_json::json;
use trading_worker::Worker;
use trading_worker::query_loop::{Delivery, QueryTick};
use trading_worker::settings::Secret;

use crate::helpers::{Harness, WORKER_ROLE_TOKEN, run_until_handled};
use crate::recovery::{lose_a_lease, order_on_the_shop};

async fn worker_with_role_token(h: &Harness) -> Worker {
    h.worker_with(|s| s.api_token = Secret::new(WORKER_ROLE_TOKEN))
        .await
}

/// The first event of the task's journal (recovery starts with a `verify-` step).
async fn first_step(w: &Worker, task_id: &str) -> String {
    let events = w
        .ctx()
        .journal
        .events(&TaskId::parse(task_id).unwrap())
        .await
        .unwrap();
    events[0].step.clone()
}

/// A lease lapses (stale), the operator reclaims it for the worker, the
/// worker with a worker-role token reads the task, finds the order on the site and reports it.
#[tokio::test]
async fn a_worker_role_token_verifies_a_reclaimed_task_on_the_site() {
    let h = Harness::new().await;
    h.submit_tea("t-reclaimed").await;
    lose_a_lease(&h).await;
    h.proxy.clock.advance(h.proxy.ttl + Duration::from_secs(1));
    h.proxy
        .sweeper
        .run_once(h.proxy.clock.now())
        .await
        .expect("sweep");
    assert_eq!(h.task("t-reclaimed").await["status"], "stale");
    let existing = order_on_the_shop(&h, 1001, Some("t-reclaimed")).await;
    let r = h.reclaim("t-reclaimed", "test-worker").await;
    assert_eq!(r["code"], 0, "{r}");
    let w = worker_with_role_token(&h).await;
    run_until_handled(&w).await;
    let t = h.task("t-reclaimed").await;
    assert_eq!(t["status"], "succeeded", "{t}");
    assert_eq!(t["latest_state"], "paid");
    assert_eq!(h.submissions(), 1, "verified, not ordered again");
    let ids: Vec<_> = t["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["site_order_id"].as_str())
        .collect();
    assert!(ids.iter().all(|id| *id == existing), "{t}");
    assert!(first_step(&w, "t-reclaimed").await.starts_with("verify-"));
}

/// A lease whose answer was lost comes back re-granted; with a worker-role token the recovery
/// branch verifies (finds nothing) and executes once.
#[tokio::test]
async fn a_worker_role_token_recovers_a_regranted_task_that_was_never_ordered() {
    let h = Harness::new().await;
    h.submit_tea("t-regrant").await;
    lose_a_lease(&h).await;
    let w = worker_with_role_token(&h).await;
    run_until_handled(&w).await;
    let t = h.task("t-regrant").await;
    assert_eq!(t["status"], "succeeded", "{t}");
    assert_eq!(t["lease_count"], 2);
    assert_eq!(h.submissions(), 1);
    assert!(first_step(&w, "t-regrant").await.starts_with("verify-"));
}

/// Every gateway call of an ordinary run — order lease, renewals, reports, account-query lease
/// and result — is allowed to a worker-role token.
#[tokio::test]
async fn every_call_of_an_ordinary_run_works_with_a_worker_role_token() {
    let h = Harness::new().await;
    h.submit_tea("t-plain").await;
    let w = worker_with_role_token(&h).await;
    run_until_handled(&w).await;
    let t = h.task("t-plain").await;
    assert_eq!(t["status"], "succeeded", "{t}");
    assert!(h.proxy.renews.load(Ordering::SeqCst) >= 2, "renewed");

    h.seed_orders(&["2026-08-01T00:00:00Z".to_owned()]).await;
    h.submit_query("aq-role", "order_list", json!({"max_pages": 1}))
        .await;
    let lp = w.query_loop();
    let mut delivery = None;
    for _ in 0..5 {
        if let QueryTick::Handled { delivery: d, .. } = lp.run_once().await.expect("query lease") {
            delivery = Some(d);
            break;
        }
    }
    assert_eq!(
        delivery,
        Some(Delivery::Stored(
            rakuten_types::query::QueryStatus::Succeeded
        ))
    );
    assert_eq!(h.query("aq-role").await["status"], "succeeded");
}
