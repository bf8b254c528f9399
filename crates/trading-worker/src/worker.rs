//! Assembly: builds the shared context ([`WorkerCtx`]) from settings and runs the loops on it
//! ([`Worker`]): the order loop, the account-query loop and the monitor. Nothing below imports
//! this module.

use std::sync::Arc;

use rakuten_types::Clock;
use tokio_util::sync::CancellationToken;

use crate::account_lock::AccountLocks;
use crate::ctx::WorkerCtx;
use crate::evidence::EvidenceStore;
use crate::gateway_client::GatewayClient;
use crate::instance_lock::InstanceLock;
use crate::journal::Journal;
use crate::monitor::Monitor;
use crate::order_loop::OrderLoop;
use crate::query_loop::QueryLoop;
use crate::scraper::ScraperClient;
use crate::settings::{SiteKind, Valid};
use crate::site::Site;
use crate::site::adapter::AdapterSite;
use crate::site::rakuten::RakutenSite;
use crate::site::sim::SimSite;

/// A built worker: its context, the order loop, the account-query loop and the monitor.
#[derive(Debug, Clone)]
pub struct Worker {
    ctx: Arc<WorkerCtx>,
}

impl Worker {
    /// Takes the journal's instance lock, opens the journal and builds the clients.
    /// `settings.gateway_url` must be set. The lock is held until the last clone of this worker
    /// (and of its context) is dropped.
    ///
    /// # Errors
    /// No gateway URL; another worker (process or in-process [`Worker`]) holds the journal's
    /// lock ([`crate::instance_lock::InstanceLockError::Held`], naming the lock file and the
    /// worker id); the journal cannot be opened; or an HTTP client cannot be built.
    pub async fn build(
        settings: Valid,
        clock: Arc<dyn Clock>,
        shutdown: CancellationToken,
    ) -> anyhow::Result<Self> {
        let site: Arc<dyn Site> = match settings.site {
            SiteKind::Rakuten => Arc::new(RakutenSite::new("rakuten-default")),
            SiteKind::Sim => Arc::new(SimSite::new(
                settings.site_base_url.as_deref().unwrap_or_default(),
                settings.site_session.clone(),
                settings.http_timeout,
            )?),
            SiteKind::Adapter => Arc::new(AdapterSite::new(
                settings.site_adapter_url.as_deref().unwrap_or_default(),
                settings.http_timeout,
            )?),
        };
        Self::build_with_site(settings, clock, shutdown, site).await
    }

    /// Like [`build`](Self::build) with a given site seam instead of the one the settings name
    /// (tests wrap the simulated shop to inject failures).
    ///
    /// # Errors
    /// As [`build`](Self::build).
    pub async fn build_with_site(
        settings: Valid,
        clock: Arc<dyn Clock>,
        shutdown: CancellationToken,
        site: Arc<dyn Site>,
    ) -> anyhow::Result<Self> {
        let Some(gw) = settings.gateway_url.clone() else {
            anyhow::bail!("RAKUTEN_ORDER_GATEWAY_URL is empty: the order loop cannot start");
        };
        // Before the journal opens: a second process must not touch it at all.
        let instance_lock = InstanceLock::acquire(&settings.db_path, &settings.worker_id)?;
        let journal = Journal::open(&settings.db_path).await?;
        let gateway = GatewayClient::new(
            &gw,
            settings.api_token.clone(),
            settings.worker_id.clone(),
            settings.http_timeout,
            settings.retry_max,
            shutdown.clone(),
            settings.gateway_ca.clone(),
        )?;
        let scraper = ScraperClient::new(
            settings.scraper_base_url.clone(),
            settings.api_token.clone(),
            settings.http_timeout,
        )?;
        let failpoint = settings.failpoint;
        Ok(Worker {
            ctx: Arc::new(WorkerCtx {
                evidence: EvidenceStore::new(settings.evidence_dir.clone()),
                settings,
                gateway,
                journal,
                site,
                scraper,
                locks: AccountLocks::default(),
                clock,
                failpoint,
                shutdown,
                instance_lock,
            }),
        })
    }

    /// The shared context.
    pub fn ctx(&self) -> &Arc<WorkerCtx> {
        &self.ctx
    }

    /// The order loop (§6).
    pub fn order_loop(&self) -> OrderLoop {
        OrderLoop::new(self.ctx.clone())
    }

    /// The account-query loop (§11).
    pub fn query_loop(&self) -> QueryLoop {
        QueryLoop::new(self.ctx.clone())
    }

    /// The post-payment monitor.
    pub fn monitor(&self) -> Monitor {
        Monitor::new(self.ctx.clone())
    }

    /// Clean stop, after [`run`](Self::run) returned: checkpoints and closes the journal
    /// ([`Journal::close`]) so that the database file alone holds it.
    pub async fn close(&self) {
        self.ctx.journal.close().await;
    }

    /// Runs the order loop, the account-query loop and the monitor until the shutdown token is
    /// cancelled. Pending reports of finished tasks are flushed first.
    pub async fn run(self) {
        let ids = self
            .ctx
            .journal
            .outbox_finished_tasks()
            .await
            .unwrap_or_default();
        for id in ids {
            if let Err(e) = self.ctx.flush(&id).await {
                tracing::warn!(task_id = %id, error = %e, "start-up flush incomplete");
            }
        }
        let shutdown = self.ctx.shutdown.clone();
        let orders = tokio::spawn(self.order_loop().run(shutdown.clone()));
        let queries = tokio::spawn(self.query_loop().run(shutdown.clone()));
        let monitor = tokio::spawn(self.monitor().run(shutdown));
        let _ = tokio::join!(orders, queries, monitor);
    }
}
