//! The fault kinds and the injector: one fault at a time, kinds and moments drawn from the seeded
//! RNG, every enabled kind at least once (in a seeded order) before kinds are drawn at random.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::procs::Cluster;
use crate::proxy::ProxyHandle;

/// One kind of fault.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum, serde::Serialize,
)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// `kill -9` of the worker at a random moment, restarted (same id, journal, evidence dir)
    /// after a random pause of up to 1.5 lease TTLs.
    WorkerKill,
    /// The worker restarted with `RAKUTEN_WORKER_FAILPOINT` at a random step boundary
    /// (before/after submit, before/after a report); it aborts there and is restarted normally.
    WorkerFailpoint,
    /// `kill -9` of a gateway, restarted on the same port and database after up to 2 s.
    GatewayKill,
    /// `kill -9` of a gateway the instant after the proxy delivered a report acknowledgement to
    /// the worker (that report must survive), restarted after up to 1 s.
    GatewayKillAfterAck,
    /// The worker process is paused (`SIGSTOP`) for 0.5–2 lease TTLs and resumed (`SIGCONT`),
    /// like a long GC pause or a suspended laptop: its lease lapses, the operator reclaims the
    /// task, and the resumed old execution must be fenced.
    WorkerPause,
    /// The proxy drops worker↔gateway requests for a few seconds: half before forwarding, half
    /// after the gateway answered (the answer never reaches the worker).
    ProxyDrop,
    /// The proxy delays every request and answer for a few seconds.
    ProxyDelay,
    /// The proxy black-holes everything (requests held, never forwarded, then cut) for up to a
    /// lease TTL + 2 s.
    ProxyBlackhole,
    /// The shop turns slow (every page takes 40 % of a lease TTL) while the proxy swallows the
    /// worker's renewals: the lease expires during a slow site step, the task turns stale, and
    /// the operator reclaims it.
    LeaseExpiry,
    /// The shop creates the next order and then breaks the connection (`drop_after_order`).
    ShopDropAfterOrder,
    /// For 1–4 s, the worker↔shop proxy drops 10–40 % of shop exchanges: half before the shop,
    /// half after it acted (cart changed, order placed, payment made — answer lost).
    ShopAnswerDrop,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 11] = [
        FaultKind::WorkerKill,
        FaultKind::WorkerFailpoint,
        FaultKind::WorkerPause,
        FaultKind::GatewayKill,
        FaultKind::GatewayKillAfterAck,
        FaultKind::ProxyDrop,
        FaultKind::ProxyDelay,
        FaultKind::ProxyBlackhole,
        FaultKind::LeaseExpiry,
        FaultKind::ShopDropAfterOrder,
        FaultKind::ShopAnswerDrop,
    ];

    /// The snake-case name printed in the summary.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::WorkerKill => "worker_kill",
            FaultKind::WorkerFailpoint => "worker_failpoint",
            FaultKind::GatewayKill => "gateway_kill",
            FaultKind::GatewayKillAfterAck => "gateway_kill_after_ack",
            FaultKind::WorkerPause => "worker_pause",
            FaultKind::ProxyDrop => "proxy_drop",
            FaultKind::ProxyDelay => "proxy_delay",
            FaultKind::ProxyBlackhole => "proxy_blackhole",
            FaultKind::LeaseExpiry => "lease_expiry",
            FaultKind::ShopDropAfterOrder => "shop_drop_after_order",
            FaultKind::ShopAnswerDrop => "shop_answer_drop",
        }
    }
}

/// The failpoints a [`FaultKind::WorkerFailpoint`] picks from (`RAKUTEN_WORKER_FAILPOINT`).
pub const FAILPOINTS: [&str; 7] = [
    "before_submit",
    "after_submit",
    "before_report:in_cart",
    "before_report:ordered",
    "after_report:ordered",
    "before_report:paid",
    "after_report:paid",
];

/// What the injector did, for the summary.
#[derive(Debug, Default, Clone)]
pub struct FaultLog {
    /// Faults injected, by kind.
    pub by_kind: BTreeMap<FaultKind, u32>,
    /// One line per fault, in order: `+12.3s worker_kill pause=1.2s`.
    pub lines: Vec<String>,
    /// Failpoint restarts whose worker actually aborted at the failpoint.
    pub failpoints_hit: u32,
    /// Shop drop-after-order faults that actually broke a submission.
    pub shop_drops_hit: u32,
}

impl FaultLog {
    /// Adds another injector's log (timelines interleaved by time).
    pub fn merge(&mut self, other: FaultLog) {
        for (k, n) in other.by_kind {
            *self.by_kind.entry(k).or_default() += n;
        }
        self.lines.extend(other.lines);
        let t = |l: &String| -> f64 {
            l.trim_start_matches('+')
                .split('s')
                .next()
                .and_then(|x| x.trim().parse().ok())
                .unwrap_or(0.0)
        };
        self.lines.sort_by(|a, b| t(a).total_cmp(&t(b)));
        self.failpoints_hit += other.failpoints_hit;
        self.shop_drops_hit += other.shop_drops_hit;
    }
}

/// The fault injector.
pub struct Injector {
    rng: StdRng,
    kinds: Vec<FaultKind>,
    pending_first: Vec<FaultKind>,
    cluster: Arc<Mutex<Cluster>>,
    proxy: ProxyHandle,
    shop_proxy: ProxyHandle,
    shop_url: String,
    http: reqwest::Client,
    ttl: Duration,
    interval: f64,
    verbose: bool,
    started: tokio::time::Instant,
    /// What was injected.
    pub log: FaultLog,
}

impl std::fmt::Debug for Injector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Injector")
            .field("kinds", &self.kinds)
            .finish_non_exhaustive()
    }
}

/// Everything the injector needs.
#[derive(Debug)]
pub struct InjectorParts {
    /// Seed of this injector's RNG.
    pub seed: u64,
    /// Enabled kinds.
    pub kinds: Vec<FaultKind>,
    /// The processes.
    pub cluster: Arc<Mutex<Cluster>>,
    /// The worker↔gateway proxy.
    pub proxy: ProxyHandle,
    /// The worker↔shop proxy.
    pub shop_proxy: ProxyHandle,
    /// The shop's base URL (for `/admin/faults`).
    pub shop_url: String,
    /// The gateway lease TTL.
    pub ttl: Duration,
    /// Mean pause between faults, seconds.
    pub interval: f64,
    /// Print each fault.
    pub verbose: bool,
}

impl Injector {
    /// A new injector.
    pub fn new(p: InjectorParts) -> Self {
        let mut rng = StdRng::seed_from_u64(p.seed);
        let mut pending_first = p.kinds.clone();
        pending_first.shuffle(&mut rng);
        // Popped from the end.
        pending_first.reverse();
        Injector {
            rng,
            kinds: p.kinds,
            pending_first,
            cluster: p.cluster,
            proxy: p.proxy,
            shop_proxy: p.shop_proxy,
            shop_url: p.shop_url,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .unwrap_or_default(),
            ttl: p.ttl,
            interval: p.interval,
            verbose: p.verbose,
            started: tokio::time::Instant::now(),
            log: FaultLog::default(),
        }
    }

    /// Whether every enabled kind was injected at least once.
    pub fn all_kinds_done(&self) -> bool {
        self.pending_first.is_empty()
    }

    /// Injects faults until `hard` is cancelled, or until `soft` is cancelled and every enabled
    /// kind was injected at least once (checked between faults; a fault in progress is completed
    /// and undone first). Leaves the system fault-free and every process running.
    ///
    /// # Errors
    /// A process could not be restarted.
    pub async fn run(
        &mut self,
        soft: CancellationToken,
        hard: CancellationToken,
    ) -> anyhow::Result<()> {
        while !self.kinds.is_empty() {
            if soft.is_cancelled() && self.all_kinds_done() {
                break;
            }
            let pause = self.interval * self.rng.random_range(0.5..1.5);
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs_f64(pause)) => {}
                () = hard.cancelled() => break,
            }
            let kind = match self.pending_first.pop() {
                Some(k) => k,
                None => self.kinds[self.rng.random_range(0..self.kinds.len())],
            };
            self.inject(kind).await?;
        }
        self.proxy.clear();
        self.shop_proxy.clear();
        self.cluster.lock().await.ensure_running().await?;
        Ok(())
    }

    fn note(&mut self, kind: FaultKind, what: String) {
        *self.log.by_kind.entry(kind).or_default() += 1;
        let line = format!(
            "+{:>7.1}s {:<22} {what}",
            self.started.elapsed().as_secs_f64(),
            kind.name()
        );
        if self.verbose {
            eprintln!("chaos: {line}");
        }
        self.log.lines.push(line);
    }

    async fn shop_faults(&self, body: serde_json::Value) {
        let url = format!("{}/admin/faults", self.shop_url);
        for _ in 0..20 {
            match self.http.post(&url).json(&body).send().await {
                Ok(r) if r.status().is_success() => return,
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
        tracing::warn!(%body, "could not set shop faults");
    }

    async fn shop_dropped_count(&self) -> Option<usize> {
        let url = format!("{}/admin/submissions", self.shop_url);
        let v: serde_json::Value = self.http.get(&url).send().await.ok()?.json().await.ok()?;
        Some(
            v.as_array()?
                .iter()
                .filter(|s| s["dropped"].as_bool() == Some(true))
                .count(),
        )
    }

    /// Injects one fault of `kind` and undoes it.
    ///
    /// # Errors
    /// A process could not be restarted.
    pub async fn inject(&mut self, kind: FaultKind) -> anyhow::Result<()> {
        match kind {
            FaultKind::WorkerKill => self.kill_worker(kind).await,
            FaultKind::WorkerFailpoint => self.worker_failpoint(kind).await,
            FaultKind::GatewayKill => self.kill_gateway(kind).await,
            FaultKind::GatewayKillAfterAck => self.kill_gateway_after_ack(kind).await,
            FaultKind::WorkerPause => self.pause_worker(kind).await,
            FaultKind::ProxyDrop => self.drop_gateway_messages(kind).await,
            FaultKind::ShopAnswerDrop => self.drop_shop_answers(kind).await,
            FaultKind::ProxyDelay => self.delay_gateway_messages(kind).await,
            FaultKind::ProxyBlackhole => self.blackhole_gateway(kind).await,
            FaultKind::LeaseExpiry => self.expire_lease(kind).await,
            FaultKind::ShopDropAfterOrder => self.shop_drop_after_order(kind).await,
        }
    }

    /// `kill -9` the worker, restart it after up to 1.5 lease terms.
    async fn kill_worker(&mut self, kind: FaultKind) -> anyhow::Result<()> {
        let ttl = self.ttl.as_secs_f64();
        let pause = self.rng.random_range(0.0..1.5 * ttl);
        self.note(kind, format!("kill -9 worker, restart after {pause:.1}s"));
        let mut c = self.cluster.lock().await;
        c.worker.kill9().await;
        drop(c);
        tokio::time::sleep(Duration::from_secs_f64(pause)).await;
        self.cluster.lock().await.worker.start(None).await?;
        Ok(())
    }

    /// Restart the worker armed with a random failpoint, wait (bounded) for it to fire, then restart it unarmed.
    async fn worker_failpoint(&mut self, kind: FaultKind) -> anyhow::Result<()> {
        let ttl = self.ttl.as_secs_f64();
        let fp = FAILPOINTS[self.rng.random_range(0..FAILPOINTS.len())];
        self.note(kind, format!("restart worker with failpoint {fp}"));
        let mut c = self.cluster.lock().await;
        c.worker.kill9().await;
        c.worker.start(Some(fp)).await?;
        drop(c);
        // Wait (bounded) for the abort; the failpoint only fires when a task reaches it.
        let mut hit = false;
        for _ in 0..(ttl * 6.0 * 10.0) as u32 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if self.cluster.lock().await.worker.exited() {
                hit = true;
                break;
            }
        }
        if hit {
            self.log.failpoints_hit += 1;
        }
        let mut c = self.cluster.lock().await;
        c.worker.kill9().await;
        c.worker.start(None).await?;
        Ok(())
    }

    /// `kill -9` a random gateway, restart it after up to 2 s.
    async fn kill_gateway(&mut self, kind: FaultKind) -> anyhow::Result<()> {
        let pause = self.rng.random_range(0.0..2.0);
        let mut c = self.cluster.lock().await;
        let i = self.rng.random_range(0..c.gateways.len());
        drop(c);
        self.note(
            kind,
            format!("kill -9 gateway #{i}, restart after {pause:.1}s"),
        );
        c = self.cluster.lock().await;
        c.gateways[i].kill9().await;
        drop(c);
        tokio::time::sleep(Duration::from_secs_f64(pause)).await;
        self.cluster.lock().await.gateways[i].start().await?;
        Ok(())
    }

    /// `kill -9` a random gateway right after the proxy delivered a report acknowledgement, restart it after up to 1 s.
    async fn kill_gateway_after_ack(&mut self, kind: FaultKind) -> anyhow::Result<()> {
        let pause = self.rng.random_range(0.0..1.0);
        let i = self
            .rng
            .random_range(0..self.cluster.lock().await.gateways.len());
        let acked = self.proxy.next_ack(self.ttl.mul_f64(3.0)).await;
        let mut c = self.cluster.lock().await;
        c.gateways[i].kill9().await;
        drop(c);
        self.note(
            kind,
            format!(
                "kill -9 gateway #{i} {}, restart after {pause:.1}s",
                if acked {
                    "right after an ack"
                } else {
                    "(no ack came)"
                }
            ),
        );
        tokio::time::sleep(Duration::from_secs_f64(pause)).await;
        self.cluster.lock().await.gateways[i].start().await?;
        Ok(())
    }

    /// `SIGSTOP` the worker for 0.5 to 2 lease terms, then `SIGCONT`.
    async fn pause_worker(&mut self, kind: FaultKind) -> anyhow::Result<()> {
        let ttl = self.ttl.as_secs_f64();
        let secs = self.rng.random_range(0.5 * ttl..2.0 * ttl);
        self.note(kind, format!("SIGSTOP worker for {secs:.1}s, then SIGCONT"));
        let paused = self.cluster.lock().await.worker.proc_.signal("STOP").await;
        if paused.is_ok() {
            tokio::time::sleep(Duration::from_secs_f64(secs)).await;
            // Another injector may have killed and restarted it meanwhile.
            let _ = self.cluster.lock().await.worker.proc_.signal("CONT").await;
        }
        Ok(())
    }

    /// Drop a share of the worker–gateway messages for a few seconds.
    async fn drop_gateway_messages(&mut self, kind: FaultKind) -> anyhow::Result<()> {
        let rate = self.rng.random_range(0.1..0.5);
        let secs = self.rng.random_range(1.0..4.0);
        self.note(kind, format!("drop rate {rate:.2} for {secs:.1}s"));
        self.proxy.set_drop_rate(rate);
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
        self.proxy.set_drop_rate(0.0);
        Ok(())
    }

    /// Drop a share of the worker–shop messages for a few seconds.
    async fn drop_shop_answers(&mut self, kind: FaultKind) -> anyhow::Result<()> {
        let rate = self.rng.random_range(0.1..0.4);
        let secs = self.rng.random_range(1.0..4.0);
        self.note(kind, format!("shop drop rate {rate:.2} for {secs:.1}s"));
        self.shop_proxy.set_drop_rate(rate);
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
        self.shop_proxy.set_drop_rate(0.0);
        Ok(())
    }

    /// Delay every worker–gateway message for a few seconds.
    async fn delay_gateway_messages(&mut self, kind: FaultKind) -> anyhow::Result<()> {
        let ms = self.rng.random_range(50..800);
        let secs = self.rng.random_range(1.0..4.0);
        self.note(kind, format!("delay {ms}ms per message for {secs:.1}s"));
        self.proxy.set_delay(Duration::from_millis(ms));
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
        self.proxy.set_delay(Duration::ZERO);
        Ok(())
    }

    /// Black-hole the worker–gateway link for up to a lease term and 2 s.
    async fn blackhole_gateway(&mut self, kind: FaultKind) -> anyhow::Result<()> {
        let ttl = self.ttl.as_secs_f64();
        let secs = self.rng.random_range(0.5..ttl + 2.0);
        self.note(kind, format!("black-hole for {secs:.1}s"));
        let d = Duration::from_secs_f64(secs);
        self.proxy.blackhole_all(d);
        tokio::time::sleep(d).await;
        Ok(())
    }

    /// Slow the shop and swallow lease renewals past a lease term, so that a lease expires under a working worker.
    async fn expire_lease(&mut self, kind: FaultKind) -> anyhow::Result<()> {
        let ttl = self.ttl.as_secs_f64();
        let slow_ms = (ttl * 400.0) as u64;
        let secs = ttl + 2.0 + self.rng.random_range(0.0..2.0);
        self.note(
            kind,
            format!("shop slow {slow_ms}ms/page, renewals swallowed for {secs:.1}s"),
        );
        self.shop_faults(serde_json::json!({"slow_ms": slow_ms}))
            .await;
        let d = Duration::from_secs_f64(secs);
        self.proxy.blackhole_renewals(d);
        tokio::time::sleep(d).await;
        self.shop_faults(serde_json::json!({"slow_ms": 0})).await;
        Ok(())
    }

    /// Have the shop break the connection after the next order it creates, waiting (bounded) for one.
    async fn shop_drop_after_order(&mut self, kind: FaultKind) -> anyhow::Result<()> {
        let ttl = self.ttl.as_secs_f64();
        let before = self.shop_dropped_count().await.unwrap_or(0);
        self.note(
            kind,
            "shop breaks the connection after the next order".into(),
        );
        self.shop_faults(serde_json::json!({"drop_after_order": true}))
            .await;
        // Until one submission was broken, bounded (the queue may be empty).
        let until = tokio::time::Instant::now() + Duration::from_secs_f64(4.0 * ttl);
        while tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if self.shop_dropped_count().await.unwrap_or(0) > before {
                self.log.shop_drops_hit += 1;
                break;
            }
        }
        self.shop_faults(serde_json::json!({"drop_after_order": false}))
            .await;
        Ok(())
    }
}
