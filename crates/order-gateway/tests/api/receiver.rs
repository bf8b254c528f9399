//! A webhook receiver for the alert tests: a real HTTP server on 127.0.0.1:0 that records every
//! request and answers 503 to the first `fail_next` of them. It can also hold requests (accept
//! the connection and not answer until released: a hung receiver) and let a test wait until a
//! condition on what arrived holds.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::Value;

/// One request the receiver saw.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: String,
    /// The status it answered (0 while held).
    pub status: u16,
}

impl Received {
    /// The body, parsed.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

#[derive(Debug)]
struct Inner {
    /// Requests answered.
    received: Mutex<Vec<Received>>,
    /// Every request that arrived, answered or not, in arrival order.
    arrived: Mutex<Vec<Received>>,
    fail_next: AtomicUsize,
    /// While true, requests wait (unanswered) until it turns false.
    held: tokio::sync::watch::Sender<bool>,
    /// Requests waiting on `held` now.
    waiting: AtomicUsize,
    /// Signalled on every arrival and answer.
    changed: tokio::sync::Notify,
}

async fn hook(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: String) -> StatusCode {
    let seen = Received {
        headers,
        body,
        status: 0,
    };
    inner.arrived.lock().unwrap().push(seen.clone());
    let mut held = inner.held.subscribe();
    if *held.borrow() {
        inner.waiting.fetch_add(1, Ordering::SeqCst);
        inner.changed.notify_waiters();
        let _ = held.wait_for(|h| !h).await;
        inner.waiting.fetch_sub(1, Ordering::SeqCst);
    }
    let fail = inner
        .fail_next
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    let status = if fail {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::NO_CONTENT
    };
    inner.received.lock().unwrap().push(Received {
        status: status.as_u16(),
        ..seen
    });
    inner.changed.notify_waiters();
    status
}

/// A running receiver.
#[derive(Debug, Clone)]
pub struct Receiver {
    pub url: String,
    inner: Arc<Inner>,
}

impl Receiver {
    /// Starts a receiver on a port of its own (the listener is bound here and handed on).
    pub async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://127.0.0.1:{}/hook",
            listener.local_addr().unwrap().port()
        );
        let inner = Arc::new(Inner {
            received: Mutex::default(),
            arrived: Mutex::default(),
            fail_next: AtomicUsize::new(0),
            held: tokio::sync::watch::Sender::new(false),
            waiting: AtomicUsize::new(0),
            changed: tokio::sync::Notify::new(),
        });
        let app = Router::new()
            .route("/hook", post(hook))
            .with_state(inner.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver { url, inner }
    }

    /// The next `n` requests are answered 503.
    pub fn fail_next(&self, n: usize) {
        self.inner.fail_next.store(n, Ordering::SeqCst);
    }

    /// From now on requests are accepted and not answered until [`Self::release`]: a receiver
    /// that hangs.
    pub fn hold(&self) {
        self.inner.held.send_replace(true);
    }

    /// Answers the held requests and every later one at once.
    pub fn release(&self) {
        self.inner.held.send_replace(false);
    }

    /// Requests held unanswered now.
    pub fn waiting(&self) -> usize {
        self.inner.waiting.load(Ordering::SeqCst)
    }

    /// Every request answered so far.
    pub fn received(&self) -> Vec<Received> {
        self.inner.received.lock().unwrap().clone()
    }

    /// Every request that arrived so far, held ones included, in arrival order.
    pub fn arrived(&self) -> Vec<Received> {
        self.inner.arrived.lock().unwrap().clone()
    }

    /// The bodies answered 2xx, parsed.
    pub fn delivered(&self) -> Vec<Value> {
        self.received()
            .into_iter()
            .filter(|r| r.status < 300)
            .map(|r| serde_json::from_str(&r.body).unwrap())
            .collect()
    }

    /// Waits until `cond` holds for this receiver (checked on every arrival and answer); panics
    /// naming `what` when it does not within `within`.
    pub async fn wait_until(&self, what: &str, within: Duration, cond: impl Fn(&Receiver) -> bool) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let changed = self.inner.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if cond(self) {
                return;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                panic!(
                    "{what}: not within {within:?}; {} arrived, {} answered, {} held",
                    self.arrived().len(),
                    self.received().len(),
                    self.waiting()
                );
            }
        }
    }
}
