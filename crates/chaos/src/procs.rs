//! The real binaries as child processes: each with its own directory under the run directory,
//! its log file (appended across restarts), 127.0.0.1 ports the processes bind themselves (port 0,
//! read back from the address file each service writes; a restart comes back on the same port,
//! with the same database, journal and evidence directory, as a real restart would, retrying if
//! the port was taken meanwhile), `kill -9` and restart.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::process::{Child, Command};

use crate::settings::SiteChoice;

/// The bearer token the harness gives every gateway and worker.
pub const API_TOKEN: &str = "chaos-token-0123456789";

/// The worker id (the same across restarts).
pub const WORKER_ID: &str = "chaos-w1";

/// One child process that can be killed and started again with the same command.
#[derive(Debug)]
pub struct Proc {
    name: String,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    cwd: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    /// Times started.
    pub starts: u32,
    /// Times killed with SIGKILL by the harness.
    pub kills: u32,
}

impl Proc {
    /// A process description; nothing is started.
    pub fn new(
        name: &str,
        program: PathBuf,
        args: &[&str],
        env: Vec<(String, String)>,
        cwd: PathBuf,
    ) -> Self {
        let log = cwd.join(format!("{name}.log"));
        Proc {
            name: name.into(),
            program,
            args: args.iter().map(|s| (*s).to_owned()).collect(),
            env,
            cwd,
            log,
            child: None,
            starts: 0,
            kills: 0,
        }
    }

    /// Starts the process with `extra_env` on top of its own environment.
    ///
    /// # Errors
    /// The program cannot be spawned.
    pub fn spawn(&mut self, extra_env: &[(&str, &str)]) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("open {}", self.log.display()))?;
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            // The run directory has no `.env`: nothing but what the harness sets applies.
            .current_dir(&self.cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .kill_on_drop(true);
        // Nothing of the harness's own environment configures a child: every RAKUTEN_* /
        // SHOP_SIM_* setting comes from the harness (a stray RAKUTEN_WORKER_FAILPOINT or DB
        // path in the caller's shell would change the experiment).
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if k.starts_with("RAKUTEN_") || k.starts_with("SHOP_SIM_") {
                cmd.env_remove(k.as_ref());
            }
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("spawn {} ({})", self.name, self.program.display()))?;
        self.child = Some(child);
        self.starts += 1;
        Ok(())
    }

    /// `kill -9` and reap; nothing when not running.
    pub async fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            if matches!(c.try_wait(), Ok(None)) {
                self.kills += 1;
            }
            let _ = c.start_kill();
            let _ = c.wait().await;
        }
    }

    /// Sends `signal` (a `kill -s` name such as `STOP` or `CONT`) to the running process.
    ///
    /// # Errors
    /// Not running, or `kill` failed.
    pub async fn signal(&mut self, signal: &str) -> anyhow::Result<()> {
        let pid = self
            .child
            .as_ref()
            .and_then(Child::id)
            .with_context(|| format!("{} is not running", self.name))?;
        let st = Command::new("kill")
            .args(["-s", signal, &pid.to_string()])
            .status()
            .await
            .context("run kill")?;
        if !st.success() {
            bail!("kill -s {signal} {pid} failed: {st}");
        }
        Ok(())
    }

    /// Whether the process was started and has exited (crashed, aborted) since.
    pub fn exited(&mut self) -> bool {
        match &mut self.child {
            Some(c) => !matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Whether the process is running.
    pub fn running(&mut self) -> bool {
        self.child.is_some() && !self.exited()
    }

    /// The log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }
}

async fn wait_http_ok(url: &str, proc_: &mut Proc, within: Duration) -> anyhow::Result<bool> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()?;
    let until = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < until {
        if proc_.exited() {
            return Ok(false);
        }
        if let Ok(r) = http.get(url).send().await
            && r.status().is_success()
        {
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(false)
}

/// Waits until the process has written its bound address to `file` (it was started on port 0);
/// `None` when it exits or `within` passes first.
async fn wait_addr_file(
    file: &Path,
    proc_: &mut Proc,
    within: Duration,
) -> anyhow::Result<Option<SocketAddr>> {
    let until = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < until {
        if let Ok(text) = std::fs::read_to_string(file) {
            return Ok(Some(text.trim().parse().with_context(|| {
                format!("address file {} holds {text:?}", file.display())
            })?));
        }
        if proc_.exited() {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(None)
}

/// A gateway instance.
#[derive(Debug)]
pub struct Gateway {
    /// The process.
    pub proc_: Proc,
    /// Its address; port 0 until the first start has bound one.
    pub addr: SocketAddr,
}

impl Gateway {
    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Starts it unless it runs, and waits until `/health` answers. The first start binds port 0
    /// and reads the port back from `RAKUTEN_GATEWAY_ADDR_FILE`; a restart asks for the same
    /// port (retried a few times if something else took it meanwhile).
    ///
    /// # Errors
    /// It does not come up within 20 s.
    pub async fn start(&mut self) -> anyhow::Result<()> {
        // Overlapping injectors: another one may have restarted it already.
        if self.proc_.running() {
            return Ok(());
        }
        if self.addr.port() == 0 {
            let file = self.proc_.cwd.join("gateway.addr");
            let _ = std::fs::remove_file(&file);
            self.proc_.spawn(&[
                ("RAKUTEN_GATEWAY_PORT", "0"),
                ("RAKUTEN_GATEWAY_ADDR_FILE", &file.display().to_string()),
            ])?;
            match wait_addr_file(&file, &mut self.proc_, Duration::from_secs(20)).await? {
                Some(addr) => self.addr = addr,
                None => bail!(
                    "gateway did not come up; see {}",
                    self.proc_.log_path().display()
                ),
            }
            if wait_http_ok(
                &format!("{}/health", self.url()),
                &mut self.proc_,
                Duration::from_secs(20),
            )
            .await?
            {
                return Ok(());
            }
            bail!(
                "gateway on {} did not answer; see {}",
                self.addr,
                self.proc_.log_path().display()
            );
        }
        let port = self.addr.port().to_string();
        for _ in 0..5 {
            self.proc_.spawn(&[("RAKUTEN_GATEWAY_PORT", &port)])?;
            if wait_http_ok(
                &format!("{}/health", self.url()),
                &mut self.proc_,
                Duration::from_secs(20),
            )
            .await?
            {
                return Ok(());
            }
            self.proc_.kill9().await;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        bail!(
            "gateway on {} did not come up; see {}",
            self.addr,
            self.proc_.log_path().display()
        )
    }

    /// `kill -9`.
    pub async fn kill9(&mut self) {
        self.proc_.kill9().await;
    }
}

/// The worker.
#[derive(Debug)]
pub struct Worker {
    /// The process.
    pub proc_: Proc,
    /// Its journal file.
    pub db_path: PathBuf,
    failpoint: Option<String>,
}

impl Worker {
    /// (Re)starts it, optionally armed with a `RAKUTEN_WORKER_FAILPOINT`; a running worker is
    /// killed first.
    ///
    /// # Errors
    /// It cannot be spawned.
    pub async fn start(&mut self, failpoint: Option<&str>) -> anyhow::Result<()> {
        // Never two worker processes at once (overlapping injectors): a start is a restart.
        self.proc_.kill9().await;
        self.failpoint = failpoint.map(str::to_owned);
        match failpoint {
            Some(fp) => self.proc_.spawn(&[("RAKUTEN_WORKER_FAILPOINT", fp)]),
            None => self.proc_.spawn(&[]),
        }
    }

    /// `kill -9`.
    pub async fn kill9(&mut self) {
        self.proc_.kill9().await;
    }

    /// Whether it has exited (a failpoint fired, or it crashed).
    pub fn exited(&mut self) -> bool {
        self.proc_.exited()
    }
}

/// The simulated shop (never killed: its state is in memory).
#[derive(Debug)]
pub struct Shop {
    /// The process.
    pub proc_: Proc,
    /// Its address.
    pub addr: SocketAddr,
    /// The JSONL submission log.
    pub submission_log: PathBuf,
}

impl Shop {
    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
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

/// A `site-adapter serve` process between the worker and the shop proxy (never killed by a
/// fault: like the shop, it stands for the outside world; a kill would also leak its Chromium).
#[derive(Debug)]
pub struct SiteAdapter {
    /// The process.
    pub proc_: Proc,
    /// Its loopback address (the worker's `RAKUTEN_SITE_ADAPTER_URL`).
    pub addr: SocketAddr,
}

impl SiteAdapter {
    async fn start(
        bin_dir: &Path,
        dir: &Path,
        kind: &str,
        shop_url: &str,
    ) -> anyhow::Result<SiteAdapter> {
        let adir = dir.join("site-adapter");
        std::fs::create_dir_all(&adir)?;
        let addr_file = adir.join("adapter.addr");
        let mut p = Proc::new(
            "site-adapter",
            bin(bin_dir, "site-adapter")?,
            &["serve"],
            env(&[
                ("RAKUTEN_SITE_ADAPTER_LISTEN", "127.0.0.1:0".into()),
                (
                    "RAKUTEN_SITE_ADAPTER_ADDR_FILE",
                    addr_file.display().to_string(),
                ),
                ("RAKUTEN_SITE_ADAPTER_KIND", kind.into()),
                ("RAKUTEN_SITE_BASE_URL", shop_url.into()),
                ("RUST_LOG", "warn".into()),
            ]),
            adir,
        );
        p.spawn(&[])?;
        // A browser adapter starts chromedriver and Chromium first: allow for a slow machine.
        let Some(addr) = wait_addr_file(&addr_file, &mut p, Duration::from_secs(60)).await? else {
            let log = std::fs::read_to_string(p.log_path()).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(5).collect();
            p.kill9().await;
            bail!(
                "site-adapter did not come up; see {} (last lines, newest first: {})",
                p.log_path().display(),
                tail.join(" | ")
            );
        };
        Ok(SiteAdapter { proc_: p, addr })
    }

    /// Stops it with SIGTERM (it ends its WebDriver session, which takes Chromium down), then
    /// `kill -9` if it is still there after 10 s.
    pub async fn stop(&mut self) {
        if self.proc_.signal("TERM").await.is_ok() {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            while !self.proc_.exited() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        self.proc_.kill9().await;
    }
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

fn bin(dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let p = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    if !p.is_file() {
        bail!(
            "{} not found: build it first (cargo build -p order-gateway -p trading-worker -p shop-sim --features trading-worker/failpoints) or pass --build / --bin-dir",
            p.display()
        );
    }
    Ok(p)
}

fn env(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
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
        let gw_bin = bin(&spec.bin_dir, "order-gateway")?;
        let worker_bin = bin(&spec.bin_dir, "trading-worker")?;
        let shop_bin = bin(&spec.bin_dir, "shop-sim")?;

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
        let shop = Shop {
            proc_: shop_proc,
            addr,
            submission_log,
        };

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
                proc_: Proc::new("order-gateway", gw_bin.clone(), &["serve"], e, dir),
                addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            };
            g.start().await?;
            gateways.push(g);
        }

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
        Ok(Cluster {
            gateways,
            worker,
            shop,
            adapter: None,
            adapter_plan: adapter_kind.map(|k| AdapterPlan {
                kind: k,
                shop_url: shop_via_proxy,
                bin_dir: spec.bin_dir.clone(),
                dir: spec.dir.clone(),
            }),
        })
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
