//! A simulated carrier: configurable latency, random failures and timeouts, unknown cards, plus
//! per-card scripted behaviour and call counters for tests and benchmarks.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use rand::Rng;

use super::{PollRequest, PollResponse, Upstream, UpstreamError};

/// Static configuration of the simulated carrier.
#[derive(Debug, Clone, Default)]
pub struct SimConfig {
    /// Latency added to every call.
    pub latency: Duration,
    /// Probability (0..=1) that a call fails.
    pub failure_rate: f64,
    /// Probability (0..=1) that a call times out.
    pub timeout_rate: f64,
    /// ICCIDs the carrier does not know.
    pub unknown_iccids: HashSet<String>,
}

/// A scripted answer for one card.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimBehavior {
    /// Answer normally.
    Ok,
    /// Answer normally and report the card suspended.
    Suspended,
    /// Answer with an error.
    Fail,
    /// Time out.
    Timeout,
    /// Answer garbage.
    Invalid,
    /// Do not know the card.
    Unknown,
}

/// The simulated carrier.
#[derive(Debug, Default)]
pub struct SimCarrier {
    cfg: SimConfig,
    latency_ms: AtomicU64,
    standing: Mutex<HashMap<String, SimBehavior>>,
    scripted: Mutex<HashMap<String, VecDeque<SimBehavior>>>,
    polls: Mutex<HashMap<(String, String), u32>>,
    resumes: Mutex<HashMap<String, u32>>,
    total_polls: AtomicU64,
    record_calls: std::sync::atomic::AtomicBool,
    calls: Mutex<Vec<PollRequest>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl SimCarrier {
    /// A carrier with this configuration.
    pub fn new(cfg: SimConfig) -> Self {
        let latency_ms = AtomicU64::new(cfg.latency.as_millis() as u64);
        SimCarrier {
            cfg,
            latency_ms,
            ..SimCarrier::default()
        }
    }

    /// Starts keeping every poll request in order (tests; off by default to bound memory).
    pub fn record_calls(&self) {
        self.record_calls.store(true, Ordering::Relaxed);
    }

    /// The poll requests recorded since [`SimCarrier::record_calls`], in call order.
    pub fn calls(&self) -> Vec<PollRequest> {
        lock(&self.calls).clone()
    }

    /// Poll calls recorded for one priority item.
    pub fn calls_for_item(&self, item_id: i64) -> usize {
        lock(&self.calls)
            .iter()
            .filter(|c| c.item_id == Some(item_id))
            .count()
    }

    /// Sets a standing behaviour for a card (until changed).
    pub fn set_behavior(&self, iccid: &str, b: SimBehavior) {
        lock(&self.standing).insert(iccid.to_owned(), b);
    }

    /// Queues one-shot behaviours for a card, used before the standing behaviour.
    pub fn script(&self, iccid: &str, bs: &[SimBehavior]) {
        lock(&self.scripted)
            .entry(iccid.to_owned())
            .or_default()
            .extend(bs.iter().copied());
    }

    /// Changes the latency of every later call.
    pub fn set_latency(&self, d: Duration) {
        self.latency_ms
            .store(d.as_millis() as u64, Ordering::Relaxed);
    }

    /// Poll calls made for this card and task type.
    pub fn poll_calls(&self, iccid: &str, task_type: &str) -> u32 {
        lock(&self.polls)
            .get(&(iccid.to_owned(), task_type.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    /// Poll calls made for this card, all task types.
    pub fn poll_calls_for_card(&self, iccid: &str) -> u32 {
        lock(&self.polls)
            .iter()
            .filter(|((c, _), _)| c == iccid)
            .map(|(_, n)| *n)
            .sum()
    }

    /// All poll calls made.
    pub fn total_poll_calls(&self) -> u64 {
        self.total_polls.load(Ordering::Relaxed)
    }

    /// Resume calls made for this card.
    pub fn resume_calls(&self, iccid: &str) -> u32 {
        lock(&self.resumes).get(iccid).copied().unwrap_or(0)
    }

    fn behavior(&self, iccid: &str) -> SimBehavior {
        if let Some(b) = lock(&self.scripted)
            .get_mut(iccid)
            .and_then(VecDeque::pop_front)
        {
            return b;
        }
        if let Some(b) = lock(&self.standing).get(iccid) {
            return *b;
        }
        if self.cfg.unknown_iccids.contains(iccid) {
            return SimBehavior::Unknown;
        }
        let mut rng = rand::rng();
        if self.cfg.timeout_rate > 0.0 && rng.random_bool(self.cfg.timeout_rate.min(1.0)) {
            return SimBehavior::Timeout;
        }
        if self.cfg.failure_rate > 0.0 && rng.random_bool(self.cfg.failure_rate.min(1.0)) {
            return SimBehavior::Fail;
        }
        SimBehavior::Ok
    }

    async fn delay(&self) {
        let ms = self.latency_ms.load(Ordering::Relaxed);
        if ms > 0 {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
    }
}

#[async_trait]
impl Upstream for SimCarrier {
    async fn poll(&self, req: &PollRequest) -> Result<PollResponse, UpstreamError> {
        *lock(&self.polls)
            .entry((req.iccid.clone(), req.task_type.clone()))
            .or_default() += 1;
        self.total_polls.fetch_add(1, Ordering::Relaxed);
        if self.record_calls.load(Ordering::Relaxed) {
            lock(&self.calls).push(req.clone());
        }
        self.delay().await;
        match self.behavior(&req.iccid) {
            SimBehavior::Ok => Ok(PollResponse {
                summary: format!("{} ok", req.task_type),
                suspended: false,
            }),
            SimBehavior::Suspended => Ok(PollResponse {
                summary: format!("{} ok, card suspended", req.task_type),
                suspended: true,
            }),
            SimBehavior::Fail => Err(UpstreamError::Failed("carrier error 503".into())),
            SimBehavior::Timeout => Err(UpstreamError::Timeout),
            SimBehavior::Invalid => Err(UpstreamError::InvalidResponse),
            SimBehavior::Unknown => Err(UpstreamError::UnknownCard),
        }
    }

    async fn resume(&self, iccid: &str) -> Result<(), UpstreamError> {
        *lock(&self.resumes).entry(iccid.to_owned()).or_default() += 1;
        self.delay().await;
        Ok(())
    }
}
