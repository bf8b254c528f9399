//! The upstream: submits `orders` intents at a steady rate, each with its own `task_id`
//! (`chaos-<seed>-<n>`), retrying through gateway restarts (a retry is an idempotent resubmit),
//! and now and then re-sends an earlier task id on purpose, which must not create a second task.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use rakuten_types::order::SubmitOrder;
use rakuten_types::{SITE_RAKUTEN, TaskId};

use crate::gateway_api::GatewayApi;

/// What the upstream did.
#[derive(Debug, Default, Clone)]
pub struct UpstreamLog {
    /// Task ids whose submission was acknowledged, in order.
    pub submitted: Vec<String>,
    /// Deliberate re-sends of an acknowledged task id.
    pub resends: u32,
    /// Re-sends that wrongly answered `created: true` (a violation).
    pub resend_created: Vec<String>,
    /// Submissions that failed for good: `(task id, why)`.
    pub failed: Vec<(String, String)>,
    /// The shop item id each task's intent names.
    pub items: BTreeMap<String, i64>,
}

/// The task id of order `n` of a run with `seed`.
pub fn task_id(seed: u64, n: u32) -> String {
    format!("chaos-{seed}-{n:05}")
}

/// A random intent and the shop-sim item id it must end up as (its seed catalog): mostly orders
/// that go through (tea, a shirt variant), some over the amount limit (camera: needs_human,
/// nothing submitted) and some sold out (failed).
pub fn intent(rng: &mut StdRng) -> (Value, i64) {
    let r: f64 = rng.random();
    if r < 0.50 {
        (
            json!({"item_url": "https://item.rakuten.co.jp/simshop/sample-tea/", "quantity": 1}),
            1001,
        )
    } else if r < 0.86 {
        let v = if rng.random_bool(0.5) {
            "red-m"
        } else {
            "blue-m"
        };
        (
            json!({"item_url": "https://item.rakuten.co.jp/simshop/sample-shirt/", "quantity": 1, "variant_id": v}),
            1002,
        )
    } else if r < 0.93 {
        (
            json!({"item_url": "https://item.rakuten.co.jp/simshop/sample-camera/", "quantity": 1}),
            1003,
        )
    } else {
        (
            json!({"item_url": "https://item.rakuten.co.jp/simshop/sample-soldout/", "quantity": 1}),
            1004,
        )
    }
}

/// Submits every order; returns when all were answered (or failed for good).
pub async fn run(api: GatewayApi, seed: u64, orders: u32, rate: f64, log: Arc<Mutex<UpstreamLog>>) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed_0001);
    let gap = Duration::from_secs_f64(1.0 / rate);
    let lock = |l: &Arc<Mutex<UpstreamLog>>| {
        l.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    };
    for n in 0..orders {
        let id = task_id(seed, n);
        let (intent, item_id) = intent(&mut rng);
        let r = api.submit(&order(&id, intent)).await;
        {
            let mut g = log
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            g.items.insert(id.clone(), item_id);
            match r {
                Ok(_) => g.submitted.push(id.clone()),
                Err(e) => g.failed.push((id.clone(), e.to_string())),
            }
        }
        // An upstream re-send of an earlier order now and then.
        if rng.random_bool(0.05) {
            let done = lock(&log).submitted;
            if !done.is_empty() {
                let old = done[rng.random_range(0..done.len())].clone();
                let again = intent_again(&old);
                if let Ok(ack) = api.submit(&order(&old, again)).await {
                    let mut g = log
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    g.resends += 1;
                    if ack.created {
                        g.resend_created.push(old);
                    }
                }
            }
        }
        tokio::time::sleep(gap).await;
    }
}

/// The submit body of task `id` (chaos ids are always valid task ids).
fn order(id: &str, intent: Value) -> SubmitOrder {
    SubmitOrder {
        task_id: TaskId::parse(id).ok(),
        site: SITE_RAKUTEN.to_owned(),
        intent: intent.into(),
        not_after: None,
    }
}

/// A re-send carries some intent; the gateway must keep the first one and create nothing.
fn intent_again(_task_id: &str) -> Value {
    json!({"item_url": "https://item.rakuten.co.jp/simshop/sample-tea/", "quantity": 1})
}
