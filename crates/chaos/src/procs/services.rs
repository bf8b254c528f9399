//! One type per service process of a run: the gateway (restarted on the port it first bound),
//! the worker (restarted with or without a failpoint), the shop and the site adapter (never
//! killed: they stand for the outside world).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::bail;

use super::{Proc, bin, env, wait_addr_file, wait_http_ok};

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
    /// The failpoint it was last started with, if any.
    pub(super) failpoint: Option<String>,
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
    pub(super) async fn start(
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
