//! A `chromedriver` process and a headless Chromium session on it ([`Browser`]).
//!
//! The port: chromedriver cannot be asked for port 0 and report it back, so [`Browser::start`]
//! picks a free port (bind `127.0.0.1:0`, read it, release it) and starts chromedriver there; if
//! another process takes the port in between, chromedriver exits or answers as someone else and
//! the next attempt takes another port. Chromium runs headless as root with the flags Debian's
//! build needs there, a fresh empty profile directory and no network beyond what it is sent to.
//!
//! Clean-up: [`Browser::close`] ends the WebDriver session (Chromium quits) and then chromedriver;
//! dropping a [`Browser`] without closing kills chromedriver's whole process group (Chromium
//! included), so a failed test leaves no processes behind.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::json;
use tokio::process::{Child, Command};

/// Where Debian's packages put the binaries.
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// Debian's `chromium-driver`.
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Window size of every screenshot, CSS pixels.
pub const WINDOW: (u32, u32) = (1100, 900);

/// Chromium's flags: headless as root in a container, nothing in the background.
const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
];

/// The binaries to use.
#[derive(Debug, Clone)]
pub struct BrowserPaths {
    /// Chromium.
    pub chromium: PathBuf,
    /// chromedriver.
    pub chromedriver: PathBuf,
}

impl Default for BrowserPaths {
    fn default() -> Self {
        BrowserPaths {
            chromium: CHROMIUM.into(),
            chromedriver: CHROMEDRIVER.into(),
        }
    }
}

/// chromedriver with one Chromium session.
#[derive(Debug)]
pub struct Browser {
    /// The WebDriver session.
    pub client: fantoccini::Client,
    driver: Option<Child>,
    _profile: tempfile::TempDir,
}

/// How many ports [`Browser::start`] tries.
const PORT_ATTEMPTS: usize = 5;

impl Browser {
    /// Starts chromedriver on a free loopback port and opens a headless Chromium session.
    ///
    /// # Errors
    /// A binary is missing, or chromedriver or Chromium do not come up within 30 s per port.
    pub async fn start(paths: &BrowserPaths) -> anyhow::Result<Self> {
        for p in [&paths.chromium, &paths.chromedriver] {
            if !p.exists() {
                bail!(
                    "{} is missing: install Debian's chromium and chromium-driver",
                    p.display()
                );
            }
        }
        let mut last = None;
        for _ in 0..PORT_ATTEMPTS {
            match Self::start_on_free_port(paths).await {
                Ok(b) => return Ok(b),
                Err(e) => {
                    tracing::warn!(error = %e, "chromedriver did not come up; trying another port");
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("chromedriver did not start")))
    }

    async fn start_on_free_port(paths: &BrowserPaths) -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut child = Command::new(&paths.chromedriver)
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own process group: Chromium joins it, and one signal ends them all.
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("spawning {}", paths.chromedriver.display()))?;
        let url = format!("http://127.0.0.1:{port}");
        let ready = wait_ready(&mut child, port).await;
        if let Err(e) = ready {
            kill_group(&child);
            let _ = child.kill().await;
            return Err(e);
        }
        let profile = tempfile::tempdir()?;
        let mut args: Vec<String> = FLAGS.iter().map(|s| (*s).to_owned()).collect();
        args.push(format!("--window-size={},{}", WINDOW.0, WINDOW.1));
        args.push(format!("--user-data-dir={}", profile.path().display()));
        let caps = json!({
            "browserName": "chrome",
            "pageLoadStrategy": "normal",
            "timeouts": {"pageLoad": 20_000, "script": 10_000, "implicit": 0},
            "goog:chromeOptions": {"binary": paths.chromium, "args": args},
        });
        let serde_json::Value::Object(caps) = caps else {
            unreachable!("a JSON object literal")
        };
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = tokio::time::timeout(
            Duration::from_secs(30),
            fantoccini::ClientBuilder::new(connector)
                .capabilities(caps)
                .connect(&url),
        )
        .await;
        match client {
            Ok(Ok(client)) => Ok(Browser {
                client,
                driver: Some(child),
                _profile: profile,
            }),
            other => {
                kill_group(&child);
                let _ = child.kill().await;
                match other {
                    Ok(Err(e)) => bail!("new Chromium session: {e}"),
                    _ => bail!("new Chromium session: no answer within 30 s"),
                }
            }
        }
    }

    /// Ends the session (Chromium quits), then chromedriver.
    pub async fn close(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(10), self.client.clone().close()).await;
        if let Some(mut c) = self.driver.take() {
            kill_group(&c);
            let _ = c.kill().await;
            let _ = c.wait().await;
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(c) = &self.driver {
            kill_group(c);
        }
    }
}

/// Kills chromedriver's process group (chromedriver and the Chromium it started), by its id.
fn kill_group(c: &Child) {
    if let Some(pid) = c.id() {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{pid}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Waits until chromedriver answers `GET /status` as chromedriver on `port`; fails when the
/// process exits first (the port was taken) or after 30 s.
async fn wait_ready(child: &mut Child, port: u16) -> anyhow::Result<()> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait()? {
            bail!("chromedriver exited ({status}) on port {port}");
        }
        if let Ok(r) = http
            .get(format!("http://127.0.0.1:{port}/status"))
            .send()
            .await
            && let Ok(v) = r.json::<serde_json::Value>().await
        {
            if v["value"]["ready"] == true {
                return Ok(());
            }
            if v["value"]["message"]
                .as_str()
                .is_none_or(|m| !m.contains("ChromeDriver"))
            {
                bail!("port {port} answers, but not as our chromedriver");
            }
        }
        if tokio::time::Instant::now() > deadline {
            bail!("chromedriver on port {port}: not ready within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether the binaries exist (tests say why they cannot run instead of failing obscurely).
pub fn installed(paths: &BrowserPaths) -> bool {
    Path::new(&paths.chromium).exists() && Path::new(&paths.chromedriver).exists()
}
