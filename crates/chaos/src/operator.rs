//! The operator: every half second, reclaims each stale task to the worker
//! (`POST /api/orders/{id}/reclaim`), as a human would after looking at the alert (§5). A task is
//! reclaimed at most `max_reclaims` times; after that it stays stale, for a human.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use rakuten_types::{TaskStatus, WorkerId};

use crate::gateway_api::GatewayApi;
use crate::procs::WORKER_ID;

/// What the operator did.
#[derive(Debug, Default, Clone)]
pub struct OperatorLog {
    /// Successful reclaims per task.
    pub reclaims: BTreeMap<String, u32>,
    /// Reclaims refused (another task active, raced): retried on the next round.
    pub refused: u32,
}

impl OperatorLog {
    /// Total successful reclaims.
    pub fn total(&self) -> u32 {
        self.reclaims.values().sum()
    }
}

/// Runs rounds until `stop`.
pub async fn run(
    api: GatewayApi,
    max_reclaims: u32,
    log: Arc<Mutex<OperatorLog>>,
    stop: CancellationToken,
) {
    let Ok(worker) = WorkerId::parse(WORKER_ID) else {
        return;
    };
    loop {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
            () = stop.cancelled() => return,
        }
        let Ok(stale) = api.tasks_all(Some(TaskStatus::Stale)).await else {
            continue;
        };
        for t in stale {
            let id = t.task_id.as_str().to_owned();
            let done = log
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .reclaims
                .get(&id)
                .copied()
                .unwrap_or(0);
            if done >= max_reclaims {
                continue;
            }
            let r = api
                .reclaim(&t.task_id, &worker, Some("chaos operator: stale task"))
                .await;
            let mut g = log
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match r {
                Ok(_) => *g.reclaims.entry(id).or_default() += 1,
                _ => g.refused += 1,
            }
        }
    }
}
