//! The worker↔gateway TCP proxy. It understands just enough HTTP/1.1 (request and response
//! framing: `Content-Length`, chunked, read-to-close) to handle one exchange at a time per
//! connection, which lets it
//!
//! - inject faults at the exchange level: drop a request before forwarding it, drop the answer
//!   after the gateway produced it (the gateway committed, the worker never hears), delay both
//!   directions, black-hole everything or only lease renewals for a while;
//! - record every report acknowledgement it delivered to the worker (`POST
//!   /api/orders/{id}/report` answered 200 with `success: true`), which the final check compares
//!   with the gateway's state mirror: an acknowledged report must never be lost.
//!
//! Several upstreams (gateway instances) are used round-robin per connection. The same proxy,
//! with one upstream, sits between worker and shop (`shop_answer_drop`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Largest message head accepted, bytes.
const MAX_HEAD: usize = 64 * 1024;
/// Largest message body accepted, bytes.
const MAX_BODY: usize = 16 * 1024 * 1024;

/// A report acknowledgement the proxy delivered to the worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedAck {
    /// The task.
    pub task_id: String,
    /// The reported order state.
    pub state: String,
    /// The site order id the report carried.
    pub site_order_id: Option<String>,
}

/// Counters of what the proxy did.
#[derive(Debug, Default)]
pub struct ProxyStats {
    /// Client connections accepted.
    pub connections: AtomicU64,
    /// Exchanges seen (requests read from the worker).
    pub requests: AtomicU64,
    /// Requests dropped before reaching the gateway.
    pub dropped_before: AtomicU64,
    /// Answers dropped after the gateway produced them.
    pub dropped_after: AtomicU64,
    /// Messages delayed.
    pub delayed: AtomicU64,
    /// Exchanges swallowed by a black hole.
    pub blackholed: AtomicU64,
    /// Report acknowledgements delivered.
    pub acks: AtomicU64,
}

/// A snapshot of [`ProxyStats`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ProxyCounts {
    /// See [`ProxyStats::connections`].
    pub connections: u64,
    /// See [`ProxyStats::requests`].
    pub requests: u64,
    /// See [`ProxyStats::dropped_before`].
    pub dropped_before: u64,
    /// See [`ProxyStats::dropped_after`].
    pub dropped_after: u64,
    /// See [`ProxyStats::delayed`].
    pub delayed: u64,
    /// See [`ProxyStats::blackholed`].
    pub blackholed: u64,
    /// See [`ProxyStats::acks`].
    pub acks: u64,
}

#[derive(Debug, Default)]
struct Ctl {
    drop_rate: f64,
    delay: Duration,
    blackhole_until: Option<Instant>,
    renew_blackhole_until: Option<Instant>,
}

#[derive(Debug)]
struct Shared {
    upstreams: Vec<SocketAddr>,
    next: AtomicUsize,
    ctl: Mutex<Ctl>,
    rng: Mutex<StdRng>,
    acks: Mutex<Vec<ObservedAck>>,
    ack_delivered: tokio::sync::Notify,
    stats: ProxyStats,
}

/// Control and observation handle of a running proxy.
#[derive(Debug, Clone)]
pub struct ProxyHandle(Arc<Shared>);

impl ProxyHandle {
    /// Drops each exchange with probability `rate` (half before forwarding, half after).
    pub fn set_drop_rate(&self, rate: f64) {
        self.ctl().drop_rate = rate.clamp(0.0, 1.0);
    }

    /// Delays every forwarded message by `d`.
    pub fn set_delay(&self, d: Duration) {
        self.ctl().delay = d;
    }

    /// Swallows every exchange for `d` from now.
    pub fn blackhole_all(&self, d: Duration) {
        self.ctl().blackhole_until = Some(Instant::now() + d);
    }

    /// Swallows lease renewals (`POST …/renew`) for `d` from now.
    pub fn blackhole_renewals(&self, d: Duration) {
        self.ctl().renew_blackhole_until = Some(Instant::now() + d);
    }

    /// Turns every fault off.
    pub fn clear(&self) {
        *self.ctl() = Ctl::default();
    }

    /// Every report acknowledgement delivered so far.
    pub fn acks(&self) -> Vec<ObservedAck> {
        self.0
            .acks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Waits until the next report acknowledgement has been delivered to the worker; `false`
    /// when none came within `within`.
    pub async fn next_ack(&self, within: Duration) -> bool {
        tokio::time::timeout(within, self.0.ack_delivered.notified())
            .await
            .is_ok()
    }

    /// The counters.
    pub fn counts(&self) -> ProxyCounts {
        let s = &self.0.stats;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ProxyCounts {
            connections: l(&s.connections),
            requests: l(&s.requests),
            dropped_before: l(&s.dropped_before),
            dropped_after: l(&s.dropped_after),
            delayed: l(&s.delayed),
            blackholed: l(&s.blackholed),
            acks: l(&s.acks),
        }
    }

    fn ctl(&self) -> std::sync::MutexGuard<'_, Ctl> {
        self.0
            .ctl
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A listener for a proxy on a free 127.0.0.1 port, bound now so its port can be handed out
/// before [`start`] knows the upstreams.
///
/// # Errors
/// No port can be bound.
pub async fn bind() -> std::io::Result<TcpListener> {
    TcpListener::bind("127.0.0.1:0").await
}

/// Runs a proxy on `listener` in front of `upstreams` until `shutdown`.
///
/// # Errors
/// The listener's address cannot be read.
pub async fn start(
    listener: TcpListener,
    upstreams: Vec<SocketAddr>,
    seed: u64,
    shutdown: CancellationToken,
) -> std::io::Result<(ProxyHandle, SocketAddr)> {
    let addr = listener.local_addr()?;
    let shared = Arc::new(Shared {
        upstreams,
        next: AtomicUsize::new(0),
        ctl: Mutex::new(Ctl::default()),
        rng: Mutex::new(StdRng::seed_from_u64(seed)),
        acks: Mutex::new(Vec::new()),
        ack_delivered: tokio::sync::Notify::new(),
        stats: ProxyStats::default(),
    });
    let sh = shared.clone();
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                () = shutdown.cancelled() => return,
            };
            let Ok((client, _)) = accepted else {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            };
            sh.stats.connections.fetch_add(1, Ordering::Relaxed);
            let sh2 = sh.clone();
            let stop = shutdown.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = serve_connection(sh2, client) => {}
                    () = stop.cancelled() => {}
                }
            });
        }
    });
    Ok((ProxyHandle(shared), addr))
}

/// What to do with one exchange, decided under the control lock.
struct Plan {
    delay: Duration,
    drop_before: bool,
    drop_after: bool,
}

impl Shared {
    fn plan(&self) -> Plan {
        let ctl = self
            .ctl
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (rate, delay) = (ctl.drop_rate, ctl.delay);
        drop(ctl);
        let mut rng = self
            .rng
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let drop_before = rate > 0.0 && rng.random_bool(rate / 2.0);
        let drop_after = !drop_before && rate > 0.0 && rng.random_bool(rate / 2.0);
        Plan {
            delay,
            drop_before,
            drop_after,
        }
    }

    /// The end of the black hole that applies to this request now, if any.
    fn blackhole(&self, is_renew: bool) -> Option<Instant> {
        let ctl = self
            .ctl
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        let all = ctl.blackhole_until.filter(|u| *u > now);
        let renew = ctl.renew_blackhole_until.filter(|u| *u > now && is_renew);
        all.max(renew)
    }

    async fn connect_upstream(&self) -> Option<TcpStream> {
        let n = self.upstreams.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for i in 0..n {
            let a = self.upstreams[(start + i) % n];
            if let Ok(s) = TcpStream::connect(a).await {
                let _ = s.set_nodelay(true);
                return Some(s);
            }
        }
        None
    }
}

/// One parsed HTTP/1.1 message: its raw bytes (forwarded untouched) and what the proxy looks at.
struct Message {
    raw: Vec<u8>,
    start_line: String,
    body: Vec<u8>,
}

/// A buffered reader over one side of a connection.
struct Side {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Side {
    fn new(stream: TcpStream) -> Self {
        Side {
            stream,
            buf: Vec::new(),
        }
    }

    /// Reads more bytes; `false` at end of stream.
    async fn fill(&mut self) -> std::io::Result<bool> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk).await?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n > 0)
    }

    async fn take_exact(&mut self, n: usize, raw: &mut Vec<u8>) -> std::io::Result<Vec<u8>> {
        while self.buf.len() < n {
            if !self.fill().await? {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
        let out: Vec<u8> = self.buf.drain(..n).collect();
        raw.extend_from_slice(&out);
        Ok(out)
    }

    async fn take_line(&mut self, raw: &mut Vec<u8>) -> std::io::Result<String> {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line: Vec<u8> = self.buf.drain(..i + 2).collect();
                raw.extend_from_slice(&line);
                return Ok(String::from_utf8_lossy(&line[..i]).into_owned());
            }
            if self.buf.len() > MAX_HEAD {
                return Err(std::io::Error::other("line too long"));
            }
            if !self.fill().await? {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
    }

    /// Reads one message; `None` on a clean end of stream before it. `is_response_to_head`
    /// is not needed: the worker sends no HEAD requests.
    async fn read_message(&mut self, response: bool) -> std::io::Result<Option<Message>> {
        let end = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if self.buf.len() > MAX_HEAD {
                return Err(std::io::Error::other("head too large"));
            }
            if !self.fill().await? {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        };
        let mut raw: Vec<u8> = self.buf.drain(..end).collect();
        let head = String::from_utf8_lossy(&raw).into_owned();
        let mut lines = head.split("\r\n");
        let start_line = lines.next().unwrap_or_default().to_owned();
        let mut content_length: Option<usize> = None;
        let mut chunked = false;
        for l in lines {
            if let Some((k, v)) = l.split_once(':') {
                let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
                if k == "content-length" {
                    content_length = v.parse().ok();
                } else if k == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked") {
                    chunked = true;
                }
            }
        }
        let status: u16 = if response {
            start_line
                .split_whitespace()
                .nth(1)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0)
        } else {
            0
        };
        let no_body = response && ((100..200).contains(&status) || status == 204 || status == 304);
        let body = if no_body {
            Vec::new()
        } else if chunked {
            let mut body = Vec::new();
            loop {
                let line = self.take_line(&mut raw).await?;
                let size_s = line.split(';').next().unwrap_or("").trim();
                let size = usize::from_str_radix(size_s, 16)
                    .map_err(|_| std::io::Error::other("bad chunk size"))?;
                if size == 0 {
                    // Trailers until the empty line.
                    while !self.take_line(&mut raw).await?.is_empty() {}
                    break;
                }
                if body.len() + size > MAX_BODY {
                    return Err(std::io::Error::other("body too large"));
                }
                body.extend(self.take_exact(size, &mut raw).await?);
                self.take_line(&mut raw).await?;
            }
            body
        } else if let Some(n) = content_length {
            if n > MAX_BODY {
                return Err(std::io::Error::other("body too large"));
            }
            self.take_exact(n, &mut raw).await?
        } else if response {
            // No framing: the body runs to the end of the connection.
            while self.fill().await? {
                if self.buf.len() > MAX_BODY {
                    return Err(std::io::Error::other("body too large"));
                }
            }
            let b: Vec<u8> = std::mem::take(&mut self.buf);
            raw.extend_from_slice(&b);
            b
        } else {
            Vec::new()
        };
        Ok(Some(Message {
            raw,
            start_line,
            body,
        }))
    }
}

/// `Some(task_id)` when the request line is `POST /api/orders/{id}/report`.
fn report_task(start_line: &str) -> Option<String> {
    let mut parts = start_line.split_whitespace();
    if parts.next()? != "POST" {
        return None;
    }
    let path = parts.next()?.split('?').next()?;
    let rest = path.strip_prefix("/api/orders/")?;
    let id = rest.strip_suffix("/report")?;
    (!id.is_empty() && !id.contains('/')).then(|| id.to_owned())
}

fn is_renew(start_line: &str) -> bool {
    let mut parts = start_line.split_whitespace();
    parts.next() == Some("POST")
        && parts
            .next()
            .and_then(|p| p.split('?').next())
            .is_some_and(|p| p.starts_with("/api/orders/") && p.ends_with("/renew"))
}

fn ack_of(task_id: String, req: &Message, resp: &Message) -> Option<ObservedAck> {
    let status: u16 = resp.start_line.split_whitespace().nth(1)?.parse().ok()?;
    if status != 200 {
        return None;
    }
    let r: serde_json::Value = serde_json::from_slice(&resp.body).ok()?;
    if r["success"].as_bool() != Some(true) {
        return None;
    }
    let q: serde_json::Value = serde_json::from_slice(&req.body).ok()?;
    Some(ObservedAck {
        task_id,
        state: q["state"].as_str()?.to_owned(),
        site_order_id: q["site_order_id"].as_str().map(str::to_owned),
    })
}

async fn serve_connection(sh: Arc<Shared>, client: TcpStream) {
    let _ = client.set_nodelay(true);
    let mut client = Side::new(client);
    let mut upstream: Option<Side> = None;
    loop {
        let req = match client.read_message(false).await {
            Ok(Some(m)) => m,
            _ => return,
        };
        sh.stats.requests.fetch_add(1, Ordering::Relaxed);
        let renew = is_renew(&req.start_line);
        if let Some(until) = sh.blackhole(renew) {
            sh.stats.blackholed.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep_until(until).await;
            return;
        }
        let plan = sh.plan();
        if plan.drop_before {
            sh.stats.dropped_before.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if !plan.delay.is_zero() {
            sh.stats.delayed.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(plan.delay).await;
        }
        if upstream.is_none() {
            match sh.connect_upstream().await {
                Some(s) => upstream = Some(Side::new(s)),
                None => return,
            }
        }
        let Some(up) = upstream.as_mut() else { return };
        if up.stream.write_all(&req.raw).await.is_err() {
            return;
        }
        let resp = match up.read_message(true).await {
            Ok(Some(m)) => m,
            _ => return,
        };
        // A black hole that began while the gateway worked swallows its answer too.
        if let Some(until) = sh.blackhole(renew) {
            sh.stats.blackholed.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep_until(until).await;
            return;
        }
        if plan.drop_after {
            sh.stats.dropped_after.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if !plan.delay.is_zero() {
            tokio::time::sleep(plan.delay).await;
        }
        if client.stream.write_all(&resp.raw).await.is_err() {
            return;
        }
        if let Some(task_id) = report_task(&req.start_line)
            && let Some(ack) = ack_of(task_id, &req, &resp)
        {
            sh.stats.acks.fetch_add(1, Ordering::Relaxed);
            sh.acks
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(ack);
            sh.ack_delivered.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_and_renew_request_lines_are_recognised() {
        assert_eq!(
            report_task("POST /api/orders/chaos-1/report HTTP/1.1").as_deref(),
            Some("chaos-1")
        );
        assert_eq!(
            report_task("POST /api/orders/chaos-1/report?x=1 HTTP/1.1").as_deref(),
            Some("chaos-1")
        );
        assert!(report_task("GET /api/orders/chaos-1/report HTTP/1.1").is_none());
        assert!(report_task("POST /api/orders/a/b/report HTTP/1.1").is_none());
        assert!(is_renew("POST /api/orders/chaos-1/renew HTTP/1.1"));
        assert!(!is_renew("POST /api/orders/chaos-1/report HTTP/1.1"));
    }
}
