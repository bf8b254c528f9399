//! One chaos run, start to end: start shop, gateway(s), proxy and worker; let the upstream submit
//! while the injector breaks things and the operator reclaims stale tasks; once every task is
//! settled (terminal, or stale after the operator gave up) and every fault kind was injected, or at
//! the deadline, collect the evidence and run the checks.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use rakuten_types::TaskStatus;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::checks::{self, Evidence};
use crate::faults::{FaultLog, Injector, InjectorParts};
use crate::gateway_api::{self, GatewayApi};
use crate::operator::{self, OperatorLog};
use crate::procs::{Cluster, ClusterSpec};
use crate::proxy;
use crate::report::RunReport;
use crate::settings::Settings;
use crate::upstream::{self, UpstreamLog};

/// The directory holding the service binaries: `--bin-dir`, else this executable's directory
/// (for a test binary in `target/debug/deps`, its parent).
///
/// # Errors
/// The current executable's path is unknown.
pub fn bin_dir(settings: &Settings) -> anyhow::Result<PathBuf> {
    if let Some(d) = &settings.bin_dir {
        return Ok(d.clone());
    }
    let exe = std::env::current_exe()?;
    let mut dir = exe
        .parent()
        .context("executable has no directory")?
        .to_path_buf();
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.pop();
    }
    Ok(dir)
}

/// `cargo build -p order-gateway -p shop-sim -p site-adapter`, then `cargo build -p trading-worker --features
/// failpoints` (debug), with the `cargo` that runs us when there is one. Two invocations: with
/// several `-p`, `--features trading-worker/failpoints` names a feature of a *dependency* of the
/// selected packages and is silently ignored, which left the worker without its failpoints (and
/// overwrote the test build's worker binary with one lacking them).
///
/// # Errors
/// A build fails.
pub fn build_services() -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    for args in [
        &[
            "build",
            "-p",
            "order-gateway",
            "-p",
            "shop-sim",
            "-p",
            "site-adapter",
        ][..],
        // The worker's crash injection exists only with this feature (never in a release).
        &["build", "-p", "trading-worker", "--features", "failpoints"][..],
    ] {
        let status = std::process::Command::new(&cargo)
            .args(args)
            .status()
            .context("run cargo build")?;
        if !status.success() {
            bail!("cargo {} failed: {status}", args.join(" "));
        }
    }
    Ok(())
}

fn lock<T: Clone>(m: &Arc<Mutex<T>>) -> T {
    m.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

/// How far the run is, from the gateway's task list.
#[derive(Debug, Default)]
struct Progress {
    listed: usize,
    terminal: usize,
    stale: usize,
    active: usize,
    settled: bool,
}

async fn progress(
    api: &GatewayApi,
    expected: usize,
    upstream_done: bool,
    reclaims: &OperatorLog,
    max_reclaims: u32,
) -> Option<Progress> {
    let tasks = api.tasks_all(None).await.ok()?;
    let mut p = Progress {
        listed: tasks.len(),
        ..Progress::default()
    };
    let mut unsettled = 0;
    for t in &tasks {
        match t.status {
            s if s.is_terminal() => p.terminal += 1,
            TaskStatus::Stale => {
                p.stale += 1;
                let n = reclaims
                    .reclaims
                    .get(t.task_id.as_str())
                    .copied()
                    .unwrap_or(0);
                if n < max_reclaims {
                    unsettled += 1;
                }
            }
            _ => {
                p.active += 1;
                unsettled += 1;
            }
        }
    }
    p.settled = upstream_done && unsettled == 0 && p.listed >= expected;
    Some(p)
}

/// Runs one chaos run and checks it.
///
/// # Errors
/// The harness itself failed (a binary missing, a process that does not start); violations of
/// the system under test are not errors, they are in the report.
pub async fn run(settings: &Settings) -> anyhow::Result<RunReport> {
    settings.validate()?;
    if settings.build {
        build_services()?;
    }
    let started = Instant::now();
    let deadline = started + settings.deadline();
    // A temporary run directory is removed only after a clean run: a violation or a harness
    // error leaves every database and log for the post-mortem.
    let (dir, temporary) = match &settings.data_dir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            (d.clone(), false)
        }
        None => {
            let t = tempfile::Builder::new().prefix("chaos-run-").tempdir()?;
            (t.keep(), true)
        }
    };
    let spec = ClusterSpec {
        bin_dir: bin_dir(settings)?,
        dir: dir.clone(),
        gateways: settings.gateways,
        gateway_db_url: settings.gateway_db_url.clone(),
        lease_ttl_seconds: settings.lease_ttl_seconds,
        site: settings.site,
    };
    eprintln!(
        "chaos: seed {} · {} orders · site {} · faults {} · lease TTL {}s · run dir {}",
        settings.seed,
        settings.orders,
        settings.site.name(),
        settings
            .fault_kinds()
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", "),
        settings.lease_ttl_seconds,
        dir.display()
    );

    let shutdown = CancellationToken::new();
    // The proxies' listeners are bound first (port 0) and handed on; the worker is told their
    // ports, the gateways and the shop behind them come up on ports of their own choosing.
    let proxy_listener = proxy::bind().await.context("bind the proxy")?;
    let shop_proxy_listener = proxy::bind().await.context("bind the shop proxy")?;
    let proxy_port = proxy_listener.local_addr()?.port();
    let shop_proxy_port = shop_proxy_listener.local_addr()?.port();
    let cluster = Cluster::start(&spec, proxy_port, shop_proxy_port).await?;
    let gw_addrs = cluster.gateways.iter().map(|g| g.addr).collect();
    let (proxy, _) = proxy::start(
        proxy_listener,
        gw_addrs,
        settings.seed ^ 0x9e37_79b9,
        shutdown.clone(),
    )
    .await
    .context("start the proxy")?;
    let (shop_proxy, _) = proxy::start(
        shop_proxy_listener,
        vec![cluster.shop.addr],
        settings.seed ^ 0x51_0e,
        shutdown.clone(),
    )
    .await
    .context("start the shop proxy")?;
    let api = gateway_api::connect(&cluster.gateway_urls())?;
    let shop_url = cluster.shop.url();
    let submission_log = cluster.shop.submission_log.clone();
    let journal = cluster.worker.db_path.clone();
    let cluster = Arc::new(tokio::sync::Mutex::new(cluster));
    cluster.lock().await.start_worker().await?;

    // Upstream.
    let up_log = Arc::new(Mutex::new(UpstreamLog::default()));
    let upstream = tokio::spawn(upstream::run(
        api.clone(),
        settings.seed,
        settings.orders,
        settings.submit_rate,
        up_log.clone(),
    ));
    // Operator.
    let op_log = Arc::new(Mutex::new(OperatorLog::default()));
    let op_stop = CancellationToken::new();
    let operator = tokio::spawn(operator::run(
        api.clone(),
        settings.max_reclaims,
        op_log.clone(),
        op_stop.clone(),
    ));
    // Injector.
    let soft_stop = CancellationToken::new();
    let hard_stop = CancellationToken::new();
    let mut injector_tasks = Vec::new();
    for i in 0..settings.injectors {
        let mut injector = Injector::new(InjectorParts {
            seed: settings.seed.wrapping_add(u64::from(i) * 1_000_003),
            kinds: settings.fault_kinds(),
            cluster: cluster.clone(),
            proxy: proxy.clone(),
            shop_proxy: shop_proxy.clone(),
            shop_url: shop_url.clone(),
            ttl: settings.lease_ttl(),
            interval: settings.fault_interval_seconds,
            verbose: settings.verbose,
        });
        let (soft, hard) = (soft_stop.clone(), hard_stop.clone());
        injector_tasks.push(tokio::spawn(async move {
            let r = injector.run(soft, hard).await;
            (injector, r)
        }));
    }
    // Faults stop at 60 % of the deadline at the latest, so that the rest can settle.
    let fault_limit = started + settings.deadline().mul_f64(0.6);

    let mut last_print = Instant::now();
    let mut deadline_hit = false;
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = Instant::now();
        if now >= fault_limit {
            hard_stop.cancel();
        }
        let p = progress(
            &api,
            settings.orders as usize,
            upstream.is_finished(),
            &lock(&op_log),
            settings.max_reclaims,
        )
        .await;
        if let Some(p) = &p {
            if p.settled {
                soft_stop.cancel();
            }
            if now.duration_since(last_print) >= Duration::from_secs(10) {
                last_print = now;
                eprintln!(
                    "chaos: +{:.0}s tasks {} · terminal {} · stale {} · active/queued {} · reclaims {} · proxied {}",
                    started.elapsed().as_secs_f64(),
                    p.listed,
                    p.terminal,
                    p.stale,
                    p.active,
                    lock(&op_log).total(),
                    proxy.counts().requests
                );
            }
            if p.settled && injector_tasks.iter().all(|t| t.is_finished()) {
                break;
            }
        }
        if now >= deadline {
            deadline_hit = true;
            break;
        }
    }
    hard_stop.cancel();
    let mut fault_log = FaultLog::default();
    for t in injector_tasks {
        let (injector, r) = t.await.context("injector panicked")?;
        r.context("fault injector")?;
        fault_log.merge(injector.log);
    }
    op_stop.cancel();
    let _ = operator.await;
    upstream.abort();
    proxy.clear();
    shop_proxy.clear();

    // Evidence. The worker stops first so that its journal is final.
    let mut c = cluster.lock().await;
    let worker_starts = c.worker.proc_.starts;
    let worker_kills = c.worker.proc_.kills;
    c.worker.kill9().await;
    let gateway_starts = c.gateways.iter().map(|g| g.proc_.starts).sum();
    let gateway_kills = c.gateways.iter().map(|g| g.proc_.kills).sum();
    drop(c);
    let up = lock(&up_log);
    let mut gateway = std::collections::BTreeMap::new();
    for t in api
        .tasks_all(None)
        .await
        .context("list tasks for the checks")?
    {
        let id = t.task_id.as_str().to_owned();
        if let Some(d) = api.task_if_known(&t.task_id).await? {
            gateway.insert(id, d);
        }
    }
    let ev = Evidence {
        submitted: up.submitted.clone(),
        resend_created: up.resend_created.clone(),
        submit_failed: up.failed.clone(),
        items: up.items.clone(),
        shop: checks::read_shop_log(&submission_log)?,
        gateway,
        proxy_acks: proxy.acks(),
        journal_acks: checks::read_journal_acks(&journal).await?,
    };
    cluster.lock().await.shutdown().await;
    shutdown.cancel();
    let findings = checks::check(&ev);
    let ops = lock(&op_log);
    let report = RunReport {
        seed: settings.seed,
        orders: settings.orders,
        submitted: up.submitted.len(),
        resends: up.resends,
        duration: started.elapsed(),
        deadline_hit,
        shop_orders: ev.shop.len(),
        shop_dropped: ev.shop.iter().filter(|s| s.dropped).count(),
        faults: fault_log,
        proxy: proxy.counts(),
        shop_proxy: shop_proxy.counts(),
        reclaims: ops.total(),
        reclaim_refused: ops.refused,
        worker_starts,
        worker_kills,
        gateway_starts,
        gateway_kills,
        findings,
        dir: dir.clone(),
        command: settings.command_line(),
    };
    if temporary && report.ok() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(report)
}
