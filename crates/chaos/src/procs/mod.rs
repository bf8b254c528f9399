//! The real binaries as child processes: each with its own directory under the run directory,
//! its log file (appended across restarts), 127.0.0.1 ports the processes bind themselves (port 0,
//! read back from the address file each service writes; a restart comes back on the same port,
//! with the same database, journal and evidence directory, as a real restart would, retrying if
//! the port was taken meanwhile), `kill -9` and restart.
//!
//! - `mod.rs`: [`Proc`], one child process (spawn, `kill -9`, restart, its log);
//! - `services.rs`: one type per service process ([`Gateway`], [`Worker`], [`Shop`],
//!   [`SiteAdapter`]): how each is started and found ready;
//! - `cluster.rs`: [`Cluster`], every process of a run, started from a [`ClusterSpec`].
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::process::{Child, Command};

mod cluster;
mod services;

pub use cluster::{Cluster, ClusterSpec, SiteChoice};
pub use services::{Gateway, Shop, SiteAdapter, Worker};

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

pub(crate) async fn wait_http_ok(
    url: &str,
    proc_: &mut Proc,
    within: Duration,
) -> anyhow::Result<bool> {
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
pub(crate) async fn wait_addr_file(
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

pub(crate) fn bin(dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let p = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    if !p.is_file() {
        bail!(
            "{} not found: build it first (cargo build -p order-gateway -p trading-worker -p shop-sim --features trading-worker/failpoints) or pass --build / --bin-dir",
            p.display()
        );
    }
    Ok(p)
}

pub(crate) fn env(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}
