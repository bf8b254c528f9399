//! The worker's shared context ([`WorkerCtx`]): what every loop (order, account query, monitor)
//! and every step uses. It sits below the loops: they import it, it imports none of them; the
//! loops are assembled on top of it by [`crate::worker`].
//!
//! Also the outbox flush: every report leaves from the journal's outbox, so a report is never
//! sent before its step is journaled, and an unacknowledged one is sent again later.

use std::sync::Arc;

use rakuten_types::{Clock, TaskId};
use tokio_util::sync::CancellationToken;

use crate::account_lock::AccountLocks;
use crate::evidence::EvidenceStore;
use crate::failpoint::{Failpoint, Point};
use crate::gateway_client::{GatewayClient, GatewayError};
use crate::instance_lock::InstanceLock;
use crate::journal::Journal;
use crate::scraper::ScraperClient;
use crate::settings::Valid;
use crate::site::Site;

/// Everything the loops share.
#[derive(Debug)]
pub struct WorkerCtx {
    /// Validated settings.
    pub settings: Valid,
    /// Gateway client.
    pub gateway: GatewayClient,
    /// Local journal.
    pub journal: Journal,
    /// Evidence files.
    pub evidence: EvidenceStore,
    /// The site seam.
    pub site: Arc<dyn Site>,
    /// Item details.
    pub scraper: ScraperClient,
    /// Account locks (§11.1), shared with the account-query loop.
    pub locks: AccountLocks,
    /// Time source.
    pub clock: Arc<dyn Clock>,
    /// Test-only crash points.
    pub failpoint: Failpoint,
    /// Cancelled on shutdown.
    pub shutdown: CancellationToken,
    /// The journal's exclusive lock (D-worker-journal-lock), held while this context lives.
    pub instance_lock: InstanceLock,
}

impl WorkerCtx {
    /// Sends a task's pending reports, oldest first, with the task's current lease token.
    /// Stops at the first 6002 (rows stay pending: a later grant delivers them) or on shutdown;
    /// a row refused with another 4xx is rejected for good and the next one is tried.
    ///
    /// # Errors
    /// [`GatewayError::LeaseLost`] or [`GatewayError::ShuttingDown`]; journal errors are logged
    /// and returned as `Transient`.
    pub async fn flush(&self, task_id: &TaskId) -> Result<(), GatewayError> {
        let jerr =
            |e: crate::journal::JournalError| GatewayError::Transient(format!("journal: {e}"));
        let rows = self.journal.outbox_pending(task_id).await.map_err(jerr)?;
        if rows.is_empty() {
            return Ok(());
        }
        let token = self
            .journal
            .order_get(task_id)
            .await
            .map_err(jerr)?
            .and_then(|r| r.lease_token);
        for row in rows {
            let mut body = row.body.clone();
            body.lease_token = token.clone();
            self.failpoint.hit(Point::BeforeReport(body.state));
            match self.gateway.report(task_id, &body).await {
                Ok(ack) => {
                    tracing::info!(task_id = %task_id, state = %body.state, terminal = body.terminal, status = %ack.status, "reported");
                    self.journal
                        .outbox_ack(row.id, self.clock.now())
                        .await
                        .map_err(jerr)?;
                    self.failpoint.hit(Point::AfterReport(body.state));
                }
                Err(GatewayError::Rejected { status, code, msg }) => {
                    tracing::error!(task_id = %task_id, state = %body.state, status, code, msg = %msg, "report refused; dropped from the outbox");
                    self.journal
                        .outbox_fail(
                            row.id,
                            &format!("HTTP {status} code {code}: {msg}"),
                            true,
                            self.clock.now(),
                        )
                        .await
                        .map_err(jerr)?;
                }
                Err(e) => {
                    let _ = self
                        .journal
                        .outbox_fail(row.id, &e.to_string(), false, self.clock.now())
                        .await;
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}
