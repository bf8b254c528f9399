//! Browser tests' harness (feature `webdriver`): Debian's `chromedriver` driving headless
//! `chromium`, through WebDriver ([`fantoccini`]).
//!
//! - chromedriver's port: a free port is picked (bind `127.0.0.1:0`, release), chromedriver is
//!   started on it, and if it exits (another process took the port in between) the next port is
//!   tried; no test fails because a port was taken.
//! - every wait is bounded ([`WAIT`], [`START`] for the browser's start), and at most two
//!   browsers run at once per test binary;
//! - chromedriver runs in its own process group, which [`Browser`]'s `Drop` kills (Chromium
//!   included), and each browser has a fresh profile directory, removed afterwards;
//! - [`Browser::screenshot`] saves `target/console-screenshots/<name>.png`.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use tokio::process::{Child, Command};

/// The longest any single browser wait may take.
pub const WAIT: Duration = Duration::from_secs(30);
/// The longest a browser may take to start (a loaded 2-core machine is slow).
pub const START: Duration = Duration::from_secs(120);

/// At most two browsers at once per test binary: more only slow each other down on a shared
/// machine until their waits run out.
static SLOTS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

/// Chromium's flags: headless as root in a container, no traffic of its own.
pub const CHROMIUM_ARGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1360,1000",
];

/// A chromedriver with one browser session.
pub struct Browser {
    /// The WebDriver session.
    pub client: Client,
    driver: Child,
    _slot: tokio::sync::SemaphorePermit<'static>,
    _profile: tempfile::TempDir,
}

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Browser")
    }
}

async fn bounded<T, E: std::fmt::Debug>(
    what: &str,
    fut: impl std::future::Future<Output = Result<T, E>>,
) -> T {
    match tokio::time::timeout(WAIT, fut).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => panic!("{what}: {e:?}"),
        Err(_) => panic!("{what}: no answer within {WAIT:?}"),
    }
}

/// Starts chromedriver on a free port (bind-and-retry) and waits until it listens.
async fn start_driver() -> (Child, u16) {
    for _ in 0..20 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut child = Command::new("/usr/bin/chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .expect("/usr/bin/chromedriver (apt-get install chromium-driver)");
        let deadline = tokio::time::Instant::now() + START;
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                break; // the port was taken: try another
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                // Ours, not another process's: ours is still running a moment later.
                tokio::time::sleep(Duration::from_millis(100)).await;
                if matches!(child.try_wait(), Ok(None)) {
                    return (child, port);
                }
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "chromedriver did not listen within {START:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    panic!("chromedriver could not bind a port in 20 tries");
}

impl Browser {
    /// Starts chromedriver and a headless Chromium with a fresh profile.
    pub async fn start() -> Browser {
        let slot = SLOTS
            .acquire()
            .await
            .expect("the semaphore is never closed");
        let profile = tempfile::tempdir().expect("profile dir");
        let (driver, port) = start_driver().await;
        let mut args: Vec<String> = CHROMIUM_ARGS.iter().map(|s| (*s).to_owned()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        let caps = json!({
            "goog:chromeOptions": { "binary": "/usr/bin/chromium", "args": args },
            "timeouts": { "pageLoad": WAIT.as_millis() as u64, "script": 10_000, "implicit": 0 },
        });
        let caps = match caps {
            serde_json::Value::Object(m) => m,
            _ => unreachable!(),
        };
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = match tokio::time::timeout(
            START,
            ClientBuilder::new(connector)
                .capabilities(caps)
                .connect(&format!("http://127.0.0.1:{port}")),
        )
        .await
        {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => panic!("starting Chromium: {e:?}"),
            Err(_) => panic!("starting Chromium: no session within {START:?}"),
        };
        Browser {
            client,
            driver,
            _slot: slot,
            _profile: profile,
        }
    }

    /// Opens a URL and waits for the page.
    pub async fn goto(&self, url: &str) {
        bounded(&format!("opening {url}"), self.client.goto(url)).await;
    }

    /// The element `css` selects, waiting for it (bounded).
    pub async fn find(&self, css: &str) -> fantoccini::elements::Element {
        bounded(
            &format!("finding {css}"),
            self.client
                .wait()
                .at_most(WAIT)
                .for_element(Locator::Css(css)),
        )
        .await
    }

    /// Whether the page has an element `css` selects now (no waiting).
    pub async fn has(&self, css: &str) -> bool {
        bounded(
            &format!("looking for {css}"),
            self.client.find_all(Locator::Css(css)),
        )
        .await
        .into_iter()
        .next()
        .is_some()
    }

    /// Types `text` into the field `css` selects.
    pub async fn fill(&self, css: &str, text: &str) {
        let el = self.find(css).await;
        bounded(&format!("typing into {css}"), el.send_keys(text)).await;
    }

    /// Clicks the element `css` selects.
    pub async fn click(&self, css: &str) {
        let el = self.find(css).await;
        bounded(&format!("clicking {css}"), el.click()).await;
    }

    /// Accepts the confirmation dialog the console's script opens, then waits for the next page.
    pub async fn confirm(&self) {
        bounded("accepting the confirmation", async {
            loop {
                match self.client.accept_alert().await {
                    Ok(()) => return Ok::<(), ()>(()),
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        })
        .await;
    }

    /// The page's visible text.
    pub async fn text(&self) -> String {
        let body = self.find("body").await;
        bounded("reading the page text", body.text()).await
    }

    /// The current URL.
    pub async fn url(&self) -> String {
        bounded("reading the URL", self.client.current_url())
            .await
            .to_string()
    }

    /// Runs a script and returns its value.
    pub async fn eval(&self, script: &str) -> serde_json::Value {
        bounded("running a script", self.client.execute(script, vec![])).await
    }

    /// Every URL the page loaded (document, styles, scripts, images, fetches), from the
    /// Resource Timing API, plus every `href`/`src`/`action` in the document.
    pub async fn requested_urls(&self) -> Vec<String> {
        let v = self
            .eval(
                "return [location.href]\
                   .concat(performance.getEntriesByType('resource').map(e => e.name))\
                   .concat(Array.from(document.querySelectorAll('[href],[src],[action]'))\
                     .map(e => e.href || e.src || e.action));",
            )
            .await;
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Saves a screenshot as `target/console-screenshots/<name>.png`; returns its path.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = bounded("taking a screenshot", self.client.screenshot()).await;
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("writing the screenshot");
        path
    }

    /// Ends the session (Chromium exits) and stops chromedriver.
    pub async fn close(mut self) {
        let client = self.client.clone();
        let _ = tokio::time::timeout(WAIT, client.close()).await;
        let _ = self.driver.kill().await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // chromedriver's process group holds Chromium too: end them all, also after a panic.
        if let Some(pid) = self.driver.id() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// `target/console-screenshots` of the workspace (or of `CARGO_TARGET_DIR`).
pub fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("console-screenshots")
}
