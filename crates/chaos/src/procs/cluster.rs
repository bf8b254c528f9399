//! Every process of a run ([`Cluster`]): the shop and the gateways started and answering, the
//! worker (and the site adapter it goes through) described here and started once the harness's
//! proxies listen.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::bail;

use super::services::{Gateway, Shop, SiteAdapter, Worker};
use super::{API_TOKEN, Proc, WORKER_ID, bin, env, wait_addr_file, wait_http_ok};

/// The site seam of a run's worker: the sim directly, or a site adapter in between
/// (D-chaos-site-seam).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SiteChoice {
    /// `RAKUTEN_SITE=sim`: the worker calls the shop's HTTP endpoints itself.
    Sim,
    /// `RAKUTEN_SITE=adapter` with `site-adapter serve --kind http` in between.
    HttpAdapter,
    /// `RAKUTEN_SITE=adapter` with `site-adapter serve --kind browser` (Debian's chromium and
    /// chromium-driver) in between.
    BrowserAdapter,
}

impl SiteChoice {
    /// The flag's spelling.
    pub fn name(self) -> &'static str {
        match self {
            SiteChoice::Sim => "sim",
            SiteChoice::HttpAdapter => "http-adapter",
            SiteChoice::BrowserAdapter => "browser-adapter",
        }
    }
}

/// Where the binaries are and how the processes are wired.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    /// Directory with `order-gateway`, `trading-worker`, `shop-sim`.
    pub bin_dir: PathBuf,
    /// The run directory.
    pub dir: PathBuf,
    /// Gateway instances.
    pub gateways: u32,
    /// `RAKUTEN_GATEWAY_DB_URL` (empty = SQLite file per run).
    pub gateway_db_url: String,
    /// `RAKUTEN_LEASE_TTL_SECONDS`.
    pub lease_ttl_seconds: f64,
    /// The worker's site seam; an adapter choice starts a `site-adapter` process.
    pub site: SiteChoice,
}

/// Every process of a run.
#[derive(Debug)]
pub struct Cluster {
    /// Gateway instances.
    pub gateways: Vec<Gateway>,
    /// The worker.
    pub worker: Worker,
    /// The shop.
    pub shop: Shop,
    /// The site adapter, with `--site http-adapter|browser-adapter` (started with the worker).
    pub adapter: Option<SiteAdapter>,
    adapter_plan: Option<AdapterPlan>,
}

/// How to start the site adapter once the shop proxy serves.
#[derive(Debug)]
struct AdapterPlan {
    kind: &'static str,
    shop_url: String,
    bin_dir: PathBuf,
    dir: PathBuf,
}

impl Cluster {
    /// Starts the shop and the gateways (waiting until they answer); the worker is described but
    /// started by [`Cluster::start_worker`] once the proxies listen: the gateway proxy at
    /// `proxy_port`, the shop proxy at `shop_proxy_port` (both already bound by the caller).
    ///
    /// # Errors
    /// A binary is missing or a process does not come up.
    pub async fn start(
        spec: &ClusterSpec,
        proxy_port: u16,
        shop_proxy_port: u16,
    ) -> anyhow::Result<Cluster> {
        // Every binary is looked up before anything starts: a missing one starts nothing.
        let gw_bin = bin(&spec.bin_dir, "order-gateway")?;
        let worker_bin = bin(&spec.bin_dir, "trading-worker")?;
        let shop_bin = bin(&spec.bin_dir, "shop-sim")?;
        let shop = Self::start_shop(spec, shop_bin).await?;
        let gateways = Self::start_gateways(spec, &gw_bin).await?;
        let (worker, adapter_plan) =
            Self::describe_worker(spec, worker_bin, proxy_port, shop_proxy_port)?;
        Ok(Cluster {
            gateways,
            worker,
            shop,
            adapter: None,
            adapter_plan,
        })
    }

    /// Starts the shop on a port of its choosing, with its submission log in the run directory,
    /// and waits until it answers.
    async fn start_shop(spec: &ClusterSpec, shop_bin: PathBuf) -> anyhow::Result<Shop> {
        let shop_dir = spec.dir.join("shop");
        std::fs::create_dir_all(&shop_dir)?;
        let submission_log = shop_dir.join("submissions.jsonl");
        let log_s = submission_log.display().to_string();
        let addr_file = shop_dir.join("shop.addr");
        let addr_s = addr_file.display().to_string();
        let mut shop_proc = Proc::new(
            "shop-sim",
            shop_bin,
            &[
                "serve",
                "--port",
                "0",
                "--addr-file",
                &addr_s,
                "--submission-log",
                &log_s,
            ],
            env(&[("RUST_LOG", "warn".into())]),
            shop_dir,
        );
        shop_proc.spawn(&[])?;
        let Some(addr) =
            wait_addr_file(&addr_file, &mut shop_proc, Duration::from_secs(20)).await?
        else {
            bail!(
                "shop-sim did not come up; see {}",
                shop_proc.log_path().display()
            );
        };
        if !wait_http_ok(
            &format!("http://{addr}/health"),
            &mut shop_proc,
            Duration::from_secs(20),
        )
        .await?
        {
            bail!(
                "shop-sim did not come up; see {}",
                shop_proc.log_path().display()
            );
        }
        Ok(Shop {
            proc_: shop_proc,
            addr,
            submission_log,
        })
    }

    /// Starts `spec.gateways` gateways, each with a directory of its own (and the shared
    /// `--gateway-db-url` when one is given), and waits until each answers.
    async fn start_gateways(spec: &ClusterSpec, gw_bin: &Path) -> anyhow::Result<Vec<Gateway>> {
        let mut gateways = Vec::new();
        for i in 0..spec.gateways {
            let dir = spec.dir.join(format!("gateway-{i}"));
            std::fs::create_dir_all(&dir)?;
            let mut e = env(&[
                ("RAKUTEN_API_TOKEN", API_TOKEN.into()),
                ("RAKUTEN_GATEWAY_HOST", "127.0.0.1".into()),
                (
                    "RAKUTEN_GATEWAY_DB_PATH",
                    dir.join("gateway.db").display().to_string(),
                ),
                (
                    "RAKUTEN_LEASE_TTL_SECONDS",
                    spec.lease_ttl_seconds.to_string(),
                ),
                ("RAKUTEN_LEASE_MAX_WAIT_SECONDS", "10".into()),
                ("RAKUTEN_SWEEP_INTERVAL_SECONDS", "0.25".into()),
                ("RUST_LOG", "warn".into()),
            ]);
            if !spec.gateway_db_url.is_empty() {
                e.push(("RAKUTEN_GATEWAY_DB_URL".into(), spec.gateway_db_url.clone()));
            }
            let mut g = Gateway {
                proc_: Proc::new("order-gateway", gw_bin.to_path_buf(), &["serve"], e, dir),
                addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            };
            g.start().await?;
            gateways.push(g);
        }
        Ok(gateways)
    }

    /// The worker, not started: its settings point at the gateway proxy and, directly or through
    /// the site adapter of `spec.site` (planned here, started with the worker), at the shop proxy.
    fn describe_worker(
        spec: &ClusterSpec,
        worker_bin: PathBuf,
        proxy_port: u16,
        shop_proxy_port: u16,
    ) -> anyhow::Result<(Worker, Option<AdapterPlan>)> {
        // The worker reaches the shop through the harness's second proxy, directly or through
        // the adapter, so that the shop-link faults hit whichever path the steps take.
        let shop_via_proxy = format!("http://127.0.0.1:{shop_proxy_port}");
        // The adapter starts with the worker (`start_worker`): the browser one opens the shop at
        // start-up, and the shop proxy answers only once the caller has started it.
        let adapter_kind = match spec.site {
            SiteChoice::Sim => None,
            SiteChoice::HttpAdapter => Some("http"),
            SiteChoice::BrowserAdapter => Some("browser"),
        };
        let site_env: Vec<(&str, String)> = match adapter_kind {
            None => vec![
                ("RAKUTEN_SITE", "sim".into()),
                ("RAKUTEN_SITE_BASE_URL", shop_via_proxy.clone()),
            ],
            // RAKUTEN_SITE_ADAPTER_URL is added once the adapter has its port.
            Some(_) => vec![
                ("RAKUTEN_SITE", "adapter".into()),
                // Order-list gathering for stale tasks reads the shop's list directly.
                ("RAKUTEN_SCRAPER_BASE_URL", shop_via_proxy.clone()),
            ],
        };

        let wdir = spec.dir.join("worker");
        std::fs::create_dir_all(&wdir)?;
        let db_path = wdir.join("trading.db");
        let renew = (spec.lease_ttl_seconds / 4.0).max(0.25);
        let mut worker_env = site_env;
        worker_env.extend([
            (
                "RAKUTEN_ORDER_GATEWAY_URL",
                format!("http://127.0.0.1:{proxy_port}"),
            ),
            ("RAKUTEN_API_TOKEN", API_TOKEN.into()),
            ("RAKUTEN_WORKER_ID", WORKER_ID.into()),
            ("RAKUTEN_TRADING_DB_PATH", db_path.display().to_string()),
            (
                "RAKUTEN_EVIDENCE_DIR",
                wdir.join("evidence").display().to_string(),
            ),
            ("RAKUTEN_LEASE_WAIT_SECONDS", "5".into()),
            ("RAKUTEN_LEASE_RENEW_INTERVAL_SECONDS", renew.to_string()),
            ("RAKUTEN_MONITOR_INTERVAL_SECONDS", "30".into()),
            ("RAKUTEN_GATEWAY_RETRY_MAX_SECONDS", "1".into()),
            (
                "RAKUTEN_HTTP_TIMEOUT_SECONDS",
                (spec.lease_ttl_seconds * 2.0).max(5.0).to_string(),
            ),
            ("RUST_LOG", "info".into()),
        ]);
        let worker = Worker {
            proc_: Proc::new(
                "trading-worker",
                worker_bin,
                &["run"],
                env(&worker_env),
                wdir,
            ),
            db_path,
            failpoint: None,
        };
        let adapter_plan = adapter_kind.map(|k| AdapterPlan {
            kind: k,
            shop_url: shop_via_proxy,
            bin_dir: spec.bin_dir.clone(),
            dir: spec.dir.clone(),
        });
        Ok((worker, adapter_plan))
    }

    /// Starts the site adapter (with `--site …-adapter`) and the worker (first start).
    ///
    /// # Errors
    /// It cannot be spawned.
    pub async fn start_worker(&mut self) -> anyhow::Result<()> {
        if let (Some(plan), None) = (&self.adapter_plan, &self.adapter) {
            let a = SiteAdapter::start(&plan.bin_dir, &plan.dir, plan.kind, &plan.shop_url).await?;
            self.worker.proc_.env.push((
                "RAKUTEN_SITE_ADAPTER_URL".into(),
                format!("http://{}", a.addr),
            ));
            self.adapter = Some(a);
        }
        self.worker.start(None).await
    }

    /// Restarts whatever is down (and a worker still armed with a failpoint), so that the run
    /// can settle fault-free.
    ///
    /// # Errors
    /// A process does not come back.
    pub async fn ensure_running(&mut self) -> anyhow::Result<()> {
        for g in &mut self.gateways {
            if !g.proc_.running() {
                g.kill9().await;
                g.start().await?;
            }
        }
        if !self.worker.proc_.running() || self.worker.failpoint.is_some() {
            self.worker.kill9().await;
            self.worker.start(None).await?;
        }
        Ok(())
    }

    /// The gateways' base URLs.
    pub fn gateway_urls(&self) -> Vec<String> {
        self.gateways.iter().map(Gateway::url).collect()
    }

    /// Kills everything.
    pub async fn shutdown(&mut self) {
        self.worker.kill9().await;
        for g in &mut self.gateways {
            g.kill9().await;
        }
        if let Some(a) = &mut self.adapter {
            a.stop().await;
        }
        self.shop.proc_.kill9().await;
    }
}
