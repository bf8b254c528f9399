//! The main job, end to end in one process (`cargo run -p demo`): the simulated shop, the order
//! gateway (SQLite in a fresh `data/demo-<timestamp>/` directory) and the trading worker (sim site)
//! start on 127.0.0.1 random ports; a sample intent is submitted to the gateway; every state the
//! worker reports is printed as the gateway shows it; after the task ends, the shop ships the
//! order and the worker's post-payment monitor reports that too; then the run prints the final
//! status and the evidence files, shuts everything down and exits 0 — or 1 when the order did not
//! reach a correct terminal state. No `.env` and no set-up needed.
//!
//! `--browser`: the same order through the browser adapter (`crates/site-adapter`: headless
//! Chromium over WebDriver behind the site adapter protocol, `RAKUTEN_SITE=adapter`); the run then
//! lists the screenshots each step left in the evidence directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rakuten_types::order::SubmitOrder;
use rakuten_types::{SITE_RAKUTEN, SystemClock, TaskId, Timestamp};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trading_worker::settings::{Secret, SiteKind};

/// The demo's gateway token (the gateway listens on 127.0.0.1 only, for this run only).
const TOKEN: &str = "demo-token-not-a-secret-0123456789";
/// How long the order may take before the demo gives up.
const ORDER_TIMEOUT: Duration = Duration::from_secs(20);
/// The same through a browser: each step loads pages and takes a screenshot.
const BROWSER_ORDER_TIMEOUT: Duration = Duration::from_secs(90);

/// The demo's command line; `--help` and `--version` answer without running.
#[derive(Debug, clap::Parser)]
#[command(
    name = "demo",
    version,
    about = "The main job end to end: shop-sim, order-gateway and trading-worker in one process; \
             one sample order walked to paid and shipped, evidence under data/demo-<timestamp>/"
)]
struct Cli {
    /// Run the order through the browser adapter (headless Chromium over WebDriver, a
    /// screenshot per step) instead of the plain HTTP seam.
    #[arg(long)]
    browser: bool,
}

fn main() {
    let Cli { browser } = rakuten_cli::start("warn", &[]);
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("demo failed: {e}");
            std::process::exit(2);
        }
    };
    match rt.block_on(run(browser)) {
        Ok(true) => std::process::exit(0),
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("demo failed: {e:#}");
            std::process::exit(2);
        }
    }
}

fn run_dir() -> anyhow::Result<PathBuf> {
    let stamp: String = Timestamp::now_utc()
        .to_rfc3339()
        .chars()
        .filter(|c| c.is_ascii_digit())
        .take(17)
        .collect();
    let dir = PathBuf::from("data").join(format!("demo-{stamp}"));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

async fn run(browser: bool) -> anyhow::Result<bool> {
    let started = Instant::now();
    let dir = run_dir()?;
    println!("== demo run directory: {}", dir.display());

    // 1. The simulated shop.
    let shop = shop_sim::spawn(shop_sim::ShopConfig {
        submission_log: Some(dir.join("shop-submissions.jsonl")),
        ..shop_sim::ShopConfig::default()
    })
    .await
    .context("starting shop-sim")?;
    println!("== shop-sim        {}", shop.base_url);

    // 2. The gateway.
    let mut gs = order_gateway::Settings::for_tests(dir.join("gateway.db"), TOKEN);
    gs.lease_max_wait_seconds = 5.0;
    let gw = order_gateway::Application::build(gs, Arc::new(SystemClock))
        .await
        .context("starting the gateway")?;
    let gw_url = format!("http://127.0.0.1:{}", gw.port());
    let gw_stop = CancellationToken::new();
    let t = gw_stop.clone();
    let gw_task = tokio::spawn(gw.run_until_stopped(async move { t.cancelled().await }));
    println!(
        "== order-gateway   {gw_url}  (SQLite {})",
        dir.join("gateway.db").display()
    );

    // 2b. With --browser: the browser adapter on loopback, working the shop in Chromium.
    let adapter = if browser {
        let a = site_adapter::serve::spawn(
            site_adapter::serve::Kind::Browser,
            &shop.base_url,
            "sim-session",
            Duration::from_secs(30),
        )
        .await
        .context("starting the browser adapter (needs Debian's chromium and chromium-driver)")?;
        println!(
            "== site-adapter    {}  (headless Chromium over WebDriver)",
            a.url
        );
        Some(a)
    } else {
        None
    };

    // 3. The worker (outbound only).
    let evidence_dir = dir.join("evidence");
    let (site, site_adapter_url, scraper_base_url) = match &adapter {
        Some(a) => (SiteKind::Adapter, a.url.clone(), shop.base_url.clone()),
        None => (SiteKind::Sim, String::new(), String::new()),
    };
    let settings = trading_worker::Settings {
        gateway_url: gw_url.clone(),
        worker_id: Some("demo-worker".into()),
        db_path: dir.join("trading.db"),
        evidence_dir: evidence_dir.clone(),
        api_token: Secret::new(TOKEN),
        site,
        site_base_url: shop.base_url.clone(),
        site_adapter_url,
        scraper_base_url,
        lease_wait_seconds: 2,
        renew_interval_seconds: 5.0,
        monitor_interval_seconds: 0.5,
        retry_max_seconds: 1.0,
        http_timeout_seconds: if browser { 60.0 } else { 10.0 },
        ..trading_worker::Settings::default()
    };
    let worker_stop = CancellationToken::new();
    let worker = trading_worker::Worker::build(
        settings.validate()?,
        Arc::new(SystemClock),
        worker_stop.clone(),
    )
    .await
    .context("starting the worker")?;
    let worker_task = tokio::spawn(worker.clone().run());
    println!(
        "== trading-worker  demo-worker (site: {}, journal {})",
        if browser { "adapter" } else { "sim" },
        dir.join("trading.db").display()
    );

    // 4. Submit a sample intent, as the upstream would.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()?;
    let task_id = format!(
        "demo-{}",
        dir.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("run")
            .trim_start_matches("demo-")
    );
    let intent = json!({
        "item_url": "https://item.rakuten.co.jp/simshop/sample-shirt/",
        "quantity": 1,
        "variant_id": "blue-m",
        "max_total_yen": 10000
    });
    let gateway = gateway_client::Client::builder(&gw_url, TOKEN).build()?;
    let ack = gateway
        .submit(&SubmitOrder {
            task_id: Some(TaskId::parse(&task_id)?),
            site: SITE_RAKUTEN.to_owned(),
            intent: intent.clone().into(),
            not_after: None,
        })
        .await?;
    println!(
        "\n>> POST /api/orders {intent}\n<< {}",
        serde_json::to_value(&ack)?
    );

    // 5. Follow the task on the gateway.
    let mut seen = 0usize;
    let mut last_status = String::new();
    let timeout = if browser {
        BROWSER_ORDER_TIMEOUT
    } else {
        ORDER_TIMEOUT
    };
    let deadline = Instant::now() + timeout;
    let detail = loop {
        let d = task(&gateway, &task_id).await?;
        seen = print_new(&d, seen, started);
        let status = d["status"].as_str().unwrap_or("").to_owned();
        if status != last_status {
            println!(
                "   [{:>5.2}s] task status: {status}",
                started.elapsed().as_secs_f64()
            );
            last_status = status.clone();
        }
        if matches!(status.as_str(), "succeeded" | "failed" | "needs_human") {
            break d;
        }
        if Instant::now() > deadline {
            println!("!! the order did not finish within {} s", timeout.as_secs());
            break d;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    };

    // 6. Post-payment monitoring: the shop ships the order; the worker reports it after terminal.
    let mut shipped = false;
    if detail["status"] == "succeeded"
        && let Some(n) = shop.submissions().first().map(|s| s.order_number.clone())
    {
        println!("\n>> the shop ships order {n}; the worker's monitor should report it");
        http.post(format!("{}/admin/orders/{n}/status", shop.base_url))
            .json(&json!({"status": "shipped"}))
            .send()
            .await?;
        let until = Instant::now() + Duration::from_secs(if browser { 20 } else { 5 });
        while Instant::now() < until {
            let d = task(&gateway, &task_id).await?;
            seen = print_new(&d, seen, started);
            if d["latest_state"] == "shipped" {
                shipped = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    // 7. Summary.
    let final_task = task(&gateway, &task_id).await?;
    let submissions = shop.submissions().len();
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".to_owned(),
        other => other.to_string(),
    };
    println!(
        "\n== final task: status {}, latest state {}, lease count {}, outcome {}",
        text(&final_task["status"]),
        text(&final_task["latest_state"]),
        text(&final_task["lease_count"]),
        text(&final_task["outcome"])
    );
    println!("== shop order submissions: {submissions}");
    println!("== evidence: {}", evidence_dir.join(&task_id).display());
    for f in list_files(&evidence_dir.join(&task_id)) {
        println!("   {f}");
    }

    let screenshots: Vec<PathBuf> = list_paths(&evidence_dir.join(&task_id), "png");
    if browser {
        println!("== screenshots (one per step, next to its .html and .meta.json):");
        for p in &screenshots {
            println!("   {}", p.display());
        }
    }

    if let Ok(id) = rakuten_types::TaskId::parse(&task_id)
        && let Ok(events) = worker.ctx().journal.events(&id).await
    {
        println!(
            "== the worker's local journal (the authority, §6.1): {} state transitions",
            events.len()
        );
        for e in events {
            println!(
                "   {:<20} {:>16} -> {:<16} {}",
                e.step,
                e.from_state.unwrap_or_default(),
                e.to_state,
                e.evidence_ref.unwrap_or_default()
            );
        }
    }

    // 8. Shut down: worker, then gateway, then shop.
    worker_stop.cancel();
    let _ = worker_task.await;
    if let Some(a) = adapter {
        a.stop().await;
    }
    // The journal checkpointed into trading.db: a copy of the run directory is complete.
    worker.close().await;
    // The worker's instance lock (`trading.db.lock`, D-worker-journal-lock) is released with the worker.
    // A real worker leaves the file in place: deleting a lock file that another process may have
    // just opened would let two processes hold "the" lock. This run directory is the demo's
    // own, so nobody else can be waiting on it, and the file would only be litter
    // (D-demo-removes-lock-files).
    let lock = trading_worker::instance_lock::lock_path(&dir.join("trading.db"));
    drop(worker);
    if let Err(e) = std::fs::remove_file(&lock) {
        println!("(note: could not remove {}: {e})", lock.display());
    }
    gw_stop.cancel();
    let _ = gw_task.await;
    // Likewise the gateway's one-writer lock on its database file (D-one-process-per-sqlite-file).
    let gw_lock = dir.join("gateway.db.lock");
    if let Err(e) = std::fs::remove_file(&gw_lock) {
        println!("(note: could not remove {}: {e})", gw_lock.display());
    }
    shop.stop().await;
    println!(
        "== stopped cleanly after {:.1}s; everything of this run is in {}",
        started.elapsed().as_secs_f64(),
        dir.display()
    );

    let ok = final_task["status"] == "succeeded"
        && matches!(
            final_task["latest_state"].as_str(),
            Some("paid" | "shipped")
        )
        && submissions == 1
        && (!browser || screenshots.len() >= 4);
    if !ok {
        println!("!! the order did not reach a correct terminal state");
    } else if !shipped {
        println!("(note: the shipping report did not arrive within 5 s)");
    }
    Ok(ok)
}

/// The task as the gateway shows it, as JSON (the shape `GET /api/orders/{id}` answers).
async fn task(gateway: &gateway_client::Client, task_id: &str) -> anyhow::Result<Value> {
    let d = gateway
        .task(&TaskId::parse(task_id)?)
        .await
        .with_context(|| format!("GET /api/orders/{task_id}"))?;
    Ok(serde_json::to_value(d)?)
}

/// Prints history rows from `seen` on; returns the new count.
fn print_new(d: &Value, seen: usize, started: Instant) -> usize {
    let hist = d["history"].as_array().cloned().unwrap_or_default();
    for r in hist.iter().skip(seen) {
        let mut line = format!(
            "   [{:>5.2}s] state: {:<16} evidence: {}",
            started.elapsed().as_secs_f64(),
            r["state"].as_str().unwrap_or("?"),
            r["evidence_ref"].as_str().unwrap_or("-"),
        );
        if let Some(y) = r["payable_yen"].as_i64() {
            line.push_str(&format!("  payable: {y} yen"));
        }
        if let Some(n) = r["site_order_id"].as_str() {
            line.push_str(&format!("  order: {n}"));
        }
        if let Some(c) = r["error_code"].as_i64() {
            line.push_str(&format!("  code: {c}"));
        }
        println!("{line}");
        if let Some(t) = r["detail"].as_str() {
            println!("             {t}");
        }
    }
    hist.len().max(seen)
}

/// The files in `dir` ending in `.{ext}`, sorted.
fn list_paths(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == ext))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn list_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| {
                    let len = e.metadata().map(|m| m.len()).unwrap_or(0);
                    format!("{:<40} {len:>7} bytes", e.file_name().to_string_lossy())
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}
