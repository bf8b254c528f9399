//! One chaos run, start to end: start shop, gateway(s), proxy and worker; let the upstream submit
//! while the injector breaks things and the operator reclaims stale tasks; once every task is
//! settled (terminal, or stale after the operator gave up) and every fault kind was injected, or at
//! the deadline, collect the evidence and run the checks.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use rakuten_types::TaskStatus;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::checks::{self, Evidence};
use crate::faults::{FaultLog, Injector, InjectorParts};
use crate::gateway_api::{self, GatewayApi};
use crate::operator::{self, OperatorLog};
use crate::procs::{Cluster, ClusterSpec};
use crate::proxy::{self, ProxyHandle};
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

/// Runs one chaos run and checks it: the stage is set, the actors play until every task is
/// settled or the deadline, they stop, the worker stops so that its journal is final, and the
/// evidence is gathered and checked.
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
    let (dir, temporary) = run_dir(settings)?;
    announce(settings, &dir);
    let stage = Stage::set(settings, &dir).await?;
    let actors = Actors::spawn(settings, &stage);
    let deadline_hit = actors.watch(settings, &stage, started).await;
    let played = actors.stop(&stage).await?;
    let processes = stage.stop_worker().await;
    let up = lock(&played.up_log);
    let ev = stage.evidence(&up).await?;
    stage.shutdown().await;
    let findings = checks::check(&ev);
    let ops = lock(&played.op_log);
    let report = RunReport {
        seed: settings.seed,
        orders: settings.orders,
        submitted: up.submitted.len(),
        resends: up.resends,
        duration: started.elapsed(),
        deadline_hit,
        shop_orders: ev.shop.len(),
        shop_dropped: ev.shop.iter().filter(|s| s.dropped).count(),
        faults: played.faults,
        proxy: stage.proxy.counts(),
        shop_proxy: stage.shop_proxy.counts(),
        reclaims: ops.total(),
        reclaim_refused: ops.refused,
        worker_starts: processes.worker_starts,
        worker_kills: processes.worker_kills,
        gateway_starts: processes.gateway_starts,
        gateway_kills: processes.gateway_kills,
        findings,
        dir: dir.clone(),
        command: settings.command_line(),
    };
    if temporary && report.ok() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(report)
}

/// The run directory and whether it is temporary. A temporary one is removed only after a
/// clean run: a violation or a harness error leaves every database and log for the post-mortem.
fn run_dir(settings: &Settings) -> anyhow::Result<(PathBuf, bool)> {
    Ok(match &settings.data_dir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            (d.clone(), false)
        }
        None => {
            let t = tempfile::Builder::new().prefix("chaos-run-").tempdir()?;
            (t.keep(), true)
        }
    })
}

/// The run's first line on stderr: what is run, and where its files are.
fn announce(settings: &Settings, dir: &Path) {
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
}

/// The system under test as the harness wires it: the processes, the proxy in front of the
/// gateway(s) and the one in front of the shop, and the harness's own client of the gateway.
struct Stage {
    cluster: Arc<tokio::sync::Mutex<Cluster>>,
    proxy: ProxyHandle,
    shop_proxy: ProxyHandle,
    api: GatewayApi,
    shop_url: String,
    submission_log: PathBuf,
    journal: PathBuf,
    shutdown: CancellationToken,
}

/// How often the processes were started and killed, counted when the worker stops.
struct ProcessCounts {
    worker_starts: u32,
    worker_kills: u32,
    gateway_starts: u32,
    gateway_kills: u32,
}

impl Stage {
    /// Starts the shop and the gateway(s), the proxies in front of them, then the worker.
    async fn set(settings: &Settings, dir: &Path) -> anyhow::Result<Stage> {
        let spec = ClusterSpec {
            bin_dir: bin_dir(settings)?,
            dir: dir.to_path_buf(),
            gateways: settings.gateways,
            gateway_db_url: settings.gateway_db_url.clone(),
            lease_ttl_seconds: settings.lease_ttl_seconds,
            site: settings.site,
        };
        let shutdown = CancellationToken::new();
        // The proxies' listeners are bound first (port 0) and handed on; the worker is told
        // their ports, the gateways and the shop behind them come up on ports of their own
        // choosing.
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
        Ok(Stage {
            cluster,
            proxy,
            shop_proxy,
            api,
            shop_url,
            submission_log,
            journal,
            shutdown,
        })
    }

    /// `kill -9` the worker, so that its journal is final, and counts the processes' starts
    /// and kills.
    async fn stop_worker(&self) -> ProcessCounts {
        let mut c = self.cluster.lock().await;
        let worker_starts = c.worker.proc_.starts;
        let worker_kills = c.worker.proc_.kills;
        c.worker.kill9().await;
        ProcessCounts {
            worker_starts,
            worker_kills,
            gateway_starts: c.gateways.iter().map(|g| g.proc_.starts).sum(),
            gateway_kills: c.gateways.iter().map(|g| g.proc_.kills).sum(),
        }
    }

    /// The evidence of the checks: what the upstream submitted, the shop's submission log, every
    /// task the gateway lists with its reports, the acknowledgements the proxy delivered and
    /// those the worker journal holds.
    async fn evidence(&self, up: &UpstreamLog) -> anyhow::Result<Evidence> {
        let mut gateway = std::collections::BTreeMap::new();
        for t in self
            .api
            .tasks_all(None)
            .await
            .context("list tasks for the checks")?
        {
            let id = t.task_id.as_str().to_owned();
            if let Some(d) = self.api.task_if_known(&t.task_id).await? {
                gateway.insert(id, d);
            }
        }
        Ok(Evidence {
            submitted: up.submitted.clone(),
            resend_created: up.resend_created.clone(),
            submit_failed: up.failed.clone(),
            items: up.items.clone(),
            shop: checks::read_shop_log(&self.submission_log)?,
            gateway,
            proxy_acks: self.proxy.acks(),
            journal_acks: checks::read_journal_acks(&self.journal).await?,
        })
    }

    /// Stops every process and the proxies.
    async fn shutdown(&self) {
        self.cluster.lock().await.shutdown().await;
        self.shutdown.cancel();
    }
}

/// What acts on the stage while the run lasts: the upstream submitting orders, the operator
/// reclaiming stale tasks, and the fault injectors.
struct Actors {
    upstream: JoinHandle<()>,
    up_log: Arc<Mutex<UpstreamLog>>,
    operator: JoinHandle<()>,
    op_log: Arc<Mutex<OperatorLog>>,
    op_stop: CancellationToken,
    injectors: Vec<JoinHandle<(Injector, anyhow::Result<()>)>>,
    soft_stop: CancellationToken,
    hard_stop: CancellationToken,
}

/// What the actors leave once stopped: every fault injected, and the upstream's and the
/// operator's logs.
struct Played {
    faults: FaultLog,
    up_log: Arc<Mutex<UpstreamLog>>,
    op_log: Arc<Mutex<OperatorLog>>,
}

impl Actors {
    /// Starts the upstream, the operator and `--injectors` injectors, each seeded from the run's
    /// seed.
    fn spawn(settings: &Settings, stage: &Stage) -> Actors {
        let up_log = Arc::new(Mutex::new(UpstreamLog::default()));
        let upstream = tokio::spawn(upstream::run(
            stage.api.clone(),
            settings.seed,
            settings.orders,
            settings.submit_rate,
            up_log.clone(),
        ));
        let op_log = Arc::new(Mutex::new(OperatorLog::default()));
        let op_stop = CancellationToken::new();
        let operator = tokio::spawn(operator::run(
            stage.api.clone(),
            settings.max_reclaims,
            op_log.clone(),
            op_stop.clone(),
        ));
        let soft_stop = CancellationToken::new();
        let hard_stop = CancellationToken::new();
        let mut injectors = Vec::new();
        for i in 0..settings.injectors {
            let mut injector = Injector::new(InjectorParts {
                seed: settings.seed.wrapping_add(u64::from(i) * 1_000_003),
                kinds: settings.fault_kinds(),
                cluster: stage.cluster.clone(),
                proxy: stage.proxy.clone(),
                shop_proxy: stage.shop_proxy.clone(),
                shop_url: stage.shop_url.clone(),
                ttl: settings.lease_ttl(),
                interval: settings.fault_interval_seconds,
                verbose: settings.verbose,
            });
            let (soft, hard) = (soft_stop.clone(), hard_stop.clone());
            injectors.push(tokio::spawn(async move {
                let r = injector.run(soft, hard).await;
                (injector, r)
            }));
        }
        Actors {
            upstream,
            up_log,
            operator,
            op_log,
            op_stop,
            injectors,
            soft_stop,
            hard_stop,
        }
    }

    /// Watches the gateway's task list every 500 ms, with a progress line every 10 s, until
    /// every task is settled and every injector is done, or the deadline. Faults stop at 60 % of
    /// the deadline at the latest, so that the rest can settle. Returns whether the deadline
    /// ended the run.
    async fn watch(&self, settings: &Settings, stage: &Stage, started: Instant) -> bool {
        let deadline = started + settings.deadline();
        let fault_limit = started + settings.deadline().mul_f64(0.6);
        let mut last_print = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let now = Instant::now();
            if now >= fault_limit {
                self.hard_stop.cancel();
            }
            let p = progress(
                &stage.api,
                settings.orders as usize,
                self.upstream.is_finished(),
                &lock(&self.op_log),
                settings.max_reclaims,
            )
            .await;
            if let Some(p) = &p {
                if p.settled {
                    self.soft_stop.cancel();
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
                        lock(&self.op_log).total(),
                        stage.proxy.counts().requests
                    );
                }
                if p.settled && self.injectors.iter().all(|t| t.is_finished()) {
                    return false;
                }
            }
            if now >= deadline {
                return true;
            }
        }
    }

    /// Stops the injectors (each leaves the system fault-free and every process running), the
    /// operator and the upstream, and clears the proxies.
    async fn stop(self, stage: &Stage) -> anyhow::Result<Played> {
        self.hard_stop.cancel();
        let mut faults = FaultLog::default();
        for t in self.injectors {
            let (injector, r) = t.await.context("injector panicked")?;
            r.context("fault injector")?;
            faults.merge(injector.log);
        }
        self.op_stop.cancel();
        let _ = self.operator.await;
        self.upstream.abort();
        stage.proxy.clear();
        stage.shop_proxy.clear();
        Ok(Played {
            faults,
            up_log: self.up_log,
            op_log: self.op_log,
        })
    }
}
