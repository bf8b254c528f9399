//! A webhook receiver for the alert tests: a real HTTP server on 127.0.0.1:0 that records every
//! request and answers 503 to the first `fail_next` of them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

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
    /// The status it answered.
    pub status: u16,
}

#[derive(Debug, Default)]
struct Inner {
    received: Mutex<Vec<Received>>,
    fail_next: AtomicUsize,
}

/// A running receiver.
#[derive(Debug, Clone)]
pub struct Receiver {
    pub url: String,
    inner: Arc<Inner>,
}

async fn hook(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: String) -> StatusCode {
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
        headers,
        body,
        status: status.as_u16(),
    });
    status
}

impl Receiver {
    /// Starts a receiver on a port of its own (the listener is bound here and handed on).
    pub async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://127.0.0.1:{}/hook",
            listener.local_addr().unwrap().port()
        );
        let inner = Arc::new(Inner::default());
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

    /// Every request so far.
    pub fn received(&self) -> Vec<Received> {
        self.inner.received.lock().unwrap().clone()
    }

    /// The bodies answered 2xx, parsed.
    pub fn delivered(&self) -> Vec<Value> {
        self.received()
            .into_iter()
            .filter(|r| r.status < 300)
            .map(|r| serde_json::from_str(&r.body).unwrap())
            .collect()
    }
}
