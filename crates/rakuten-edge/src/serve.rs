//! The accept loop both services serve through.
//!
//! Each accepted connection is one task speaking HTTP/1.1 (hyper), over TLS when configured.
//! Bounds, all from [`EdgeConfig`]:
//! - a request head must be complete within `header_timeout` of the connection opening or of the
//!   previous response (hyper's header-read timer restarts when a keep-alive connection goes
//!   idle), so the same bound closes slow heads and idle keep-alive connections; a TLS handshake
//!   gets the same bound;
//! - at most `max_connections` connections are served, long-polls included; one past the cap is
//!   answered `503` with the envelope (`code` 1503, `Retry-After: 1`, `Connection: close`), and
//!   past a further small overflow allowance closed at once;
//! - a request body must arrive in full within `body_timeout` of its head, or the request is
//!   answered `408` with the envelope (`code` 1003, `Connection: close`) and the connection
//!   closes, whatever the handler made of the cut-off body: a client that declares a large body
//!   and sends it slowly (or never) holds a connection for that long at most;
//! - a request target longer than [`MAX_URI_BYTES`] is answered `414`, a header section over
//!   [`MAX_HEADER_BYTES`] or [`MAX_HEADER_COUNT`] lines `431`, both with the envelope (`code`
//!   1004, `Connection: close`) before any route runs; only past hyper's own bounds (a target
//!   over 65,534 bytes, a head over ~408 KiB or [`HYPER_MAX_HEADERS`] lines) does hyper answer
//!   first, with a bare status and no body (D-unknown-query-parameters);
//! - on shutdown the listener closes, every connection finishes its current response and closes,
//!   and whatever is still open after `shutdown_deadline` is dropped.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use rakuten_types::{Envelope, ErrorCode};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use crate::tls::TlsReloader;

/// Connections past the cap that still get their 503 answer; beyond these they are closed
/// unanswered, so a flood cannot make the overflow path itself unbounded.
const OVERFLOW_ANSWERS: usize = 64;

/// Longest request target (path and query), bytes; longer is a `414` with the envelope. Every
/// request a document allows fits: the longest is the gateway's retire, a 128-character worker id
/// and a 1,000-character `reason`, up to 4 bytes a character and 3 once percent-encoded (about
/// 13.6 KiB; D-unknown-query-parameters).
pub const MAX_URI_BYTES: usize = 16 * 1024;

/// Largest header section (each line's name and value plus 4 bytes), bytes; larger is a `431`
/// with the envelope.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;

/// Most header lines; more is a `431` with the envelope.
pub const MAX_HEADER_COUNT: usize = 100;

/// hyper's own header-line bound, above [`MAX_HEADER_COUNT`] so that the envelope answers first
/// (hyper's default, 100, would answer a bare 431 at the 101st line).
pub const HYPER_MAX_HEADERS: usize = 256;

/// The default [`EdgeConfig::body_timeout`]: 30 s, enough for the largest body either service
/// accepts (a bulk import of a few MB) on a slow link.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// How a service's edge is bounded. Each service fills it from its own settings.
#[derive(Debug, Clone)]
pub struct EdgeConfig {
    /// Serve HTTPS with these certificates (reloaded on SIGHUP); `None` = plain HTTP.
    pub tls: Option<Arc<TlsReloader>>,
    /// Longest wait for a complete request head (also the idle keep-alive bound and the TLS
    /// handshake bound).
    pub header_timeout: Duration,
    /// Longest wait for a request's whole body, counted from its head; past it the request is
    /// answered 408 and the connection closed.
    pub body_timeout: Duration,
    /// Most connections served at once, long-polls included.
    pub max_connections: usize,
    /// Longest graceful shutdown; connections still open then are dropped.
    pub shutdown_deadline: Duration,
    /// Once accepting, write the bound address (`127.0.0.1:40123`) to this file, so whoever
    /// started the service on port 0 reads the port back instead of guessing a free one.
    pub addr_file: Option<PathBuf>,
}

impl EdgeConfig {
    /// A configuration from a service's settings, loading the TLS files when given.
    ///
    /// # Errors
    /// The TLS files are unreadable, malformed, or the key does not match the certificate.
    pub fn load(
        tls: Option<crate::TlsFiles>,
        header_timeout: Duration,
        max_connections: usize,
        shutdown_deadline: Duration,
    ) -> Result<Self, crate::tls::TlsError> {
        Ok(EdgeConfig {
            tls: tls.map(TlsReloader::new).transpose()?,
            header_timeout,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_connections,
            shutdown_deadline,
            addr_file: None,
        })
    }

    /// Plain HTTP with the default bounds (10 s head, 30 s body, 2048 connections, 10 s
    /// shutdown): tests.
    pub fn plain() -> Self {
        EdgeConfig {
            tls: None,
            header_timeout: Duration::from_secs(10),
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_connections: 2048,
            shutdown_deadline: Duration::from_secs(10),
            addr_file: None,
        }
    }
}

/// Binds the service's listening socket at `addr`. What stops it is a
/// [`rakuten_cli::SetupError`] naming the address and the variable to change (`vars` are the
/// host's and the port's, D-exit-2-or-3): exit 3 for a port in use (an old process may still hold
/// it; a restart retries, D-exit-2-or-3), exit 2 for an address that is not this machine's or a
/// port below 1024 without the privilege.
///
/// # Errors
/// The socket cannot be bound.
pub async fn bind(
    addr: SocketAddr,
    (host_var, port_var): (&'static str, &'static str),
) -> Result<TcpListener, rakuten_cli::SetupError> {
    TcpListener::bind(addr).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            return rakuten_cli::SetupError::unavailable(
                port_var,
                format!(
                    "cannot listen on {addr} ({port_var}): the port is already in use by another \
                     process; stop it or choose another port ({e})"
                ),
            );
        }
        let (var, why) = match e.kind() {
            std::io::ErrorKind::AddrNotAvailable => (
                host_var,
                "the address is not one of this machine's; choose one of its addresses",
            ),
            std::io::ErrorKind::PermissionDenied => (
                port_var,
                "not permitted (a port below 1024 needs a privilege); choose a port from 1024",
            ),
            _ => (port_var, "the socket cannot be bound"),
        };
        rakuten_cli::SetupError::new(var, format!("cannot listen on {addr} ({var}): {why} ({e})"))
    })
}

/// Logs a warning when `addr` is not loopback and TLS is off: tokens would cross the network in
/// clear text. Returns whether it warned.
pub fn warn_if_plain_public(service: &str, addr: SocketAddr, tls: bool) -> bool {
    let exposed = !tls && !addr.ip().is_loopback();
    if exposed {
        tracing::warn!(
            %addr,
            "{service} listens on a non-loopback address WITHOUT TLS: Bearer tokens and bodies \
             cross the network in clear text; set the TLS certificate and key paths or put a \
             TLS-terminating proxy in front"
        );
    }
    exposed
}

/// Serves `router` on `listener` until `shutdown` completes, then drains within the deadline.
///
/// # Errors
/// The TLS configuration cannot be built. Accept errors (e.g. out of file descriptors) are
/// logged and retried, never returned.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    config: EdgeConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let acceptor = match &config.tls {
        Some(reloader) => Some(TlsAcceptor::from(
            reloader.server_config().map_err(std::io::Error::other)?,
        )),
        None => None,
    };
    let permits = Arc::new(Semaphore::new(config.max_connections));
    let overflow = Arc::new(Semaphore::new(OVERFLOW_ANSWERS));
    let at_cap = AtomicBool::new(false);
    let graceful = CancellationToken::new();
    let hard = CancellationToken::new();
    let tracker = TaskTracker::new();
    if let Some(reloader) = config.tls.clone() {
        tokio::spawn(reload_on_sighup(reloader, graceful.clone()));
    }
    if let Some(path) = &config.addr_file {
        write_addr_file(path, listener.local_addr()?)?;
    }
    tokio::pin!(shutdown);
    loop {
        let tcp = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    // Per-connection failures (reset before accept) are normal; anything else
                    // (EMFILE) is waited out rather than spun on.
                    if !is_connection_error(&e) {
                        tracing::error!(error = %e, "accept failed; retrying in 100 ms");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    continue;
                }
            },
        };
        let (permit, overloaded) = match permits.clone().try_acquire_owned() {
            Ok(p) => {
                at_cap.store(false, Ordering::Relaxed);
                (p, false)
            }
            Err(_) => {
                if !at_cap.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        max = config.max_connections,
                        "connection cap reached: answering 503 to new connections"
                    );
                }
                match overflow.clone().try_acquire_owned() {
                    Ok(p) => (p, true),
                    Err(_) => continue,
                }
            }
        };
        let _ = tcp.set_nodelay(true);
        let body_timeout = config.body_timeout;
        let service = hyper::service::service_fn({
            let router = router.clone();
            move |req: Request<Incoming>| {
                let router = router.clone();
                async move {
                    if overloaded {
                        return Ok(too_many_connections());
                    }
                    if let Some(refused) = head_too_large(&req) {
                        return Ok(refused);
                    }
                    let timed_out = Arc::new(AtomicBool::new(false));
                    let deadline = tokio::time::Instant::now() + body_timeout;
                    let req = req.map(|body| {
                        Body::new(DeadlineBody::new(body, deadline, timed_out.clone()))
                    });
                    let response = router.oneshot(req).await;
                    if timed_out.load(Ordering::Relaxed) {
                        return Ok(body_too_slow(body_timeout));
                    }
                    response
                }
            }
        });
        let (acceptor, graceful, hard) = (acceptor.clone(), graceful.clone(), hard.clone());
        let timeout = config.header_timeout;
        tracker.spawn(async move {
            let _permit = permit;
            let work = async {
                match acceptor {
                    None => connection(tcp, service, timeout, !overloaded, &graceful).await,
                    Some(acceptor) => {
                        if let Ok(Ok(tls)) =
                            tokio::time::timeout(timeout, acceptor.accept(tcp)).await
                        {
                            connection(tls, service, timeout, !overloaded, &graceful).await;
                        }
                    }
                }
            };
            tokio::select! {
                () = work => {}
                () = hard.cancelled() => {}
            }
        });
    }
    drop(listener);
    graceful.cancel();
    tracker.close();
    if tokio::time::timeout(config.shutdown_deadline, tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            open = tracker.len(),
            deadline = ?config.shutdown_deadline,
            "shutdown deadline passed: dropping the connections still open"
        );
        hard.cancel();
        tracker.wait().await;
    }
    Ok(())
}

/// One HTTP/1.1 connection until it closes, or until `graceful` asks it to finish its current
/// response and close.
async fn connection<IO, S>(
    io: IO,
    service: S,
    header_timeout: Duration,
    keep_alive: bool,
    graceful: &CancellationToken,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::Service<Request<Incoming>, Response = Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .max_headers(HYPER_MAX_HEADERS)
        .keep_alive(keep_alive);
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        () = graceful.cancelled() => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

/// Checks an address file setting at start: its folder must exist and the path must not be a
/// folder. The file is written only once the socket is bound, so a bad path found then left the
/// service listening with no file written, and a script waiting for it waited forever.
///
/// # Errors
/// Why, for the setting's one-line refusal (exit 2).
pub fn check_addr_file(path: &Path) -> Result<(), String> {
    if path.as_os_str().is_empty() {
        return Err("must not be empty".into());
    }
    if path.is_dir() {
        return Err(format!("{} is a folder, not a file", path.display()));
    }
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !folder.is_dir() {
        return Err(format!(
            "the folder {} does not exist (it is not created)",
            folder.display()
        ));
    }
    Ok(())
}

/// Writes `addr` and a newline to `path` atomically (a temporary file renamed over it), so a
/// reader polling for the file never sees it half written.
///
/// # Errors
/// The file cannot be written.
pub fn write_addr_file(path: &Path, addr: SocketAddr) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, format!("{addr}\n"))?;
    std::fs::rename(&tmp, path)
}

/// A request body that must end by `deadline`: past it the next poll fails (the handler sees a
/// body error) and `timed_out` tells the connection to answer 408 instead of the handler's reply.
struct DeadlineBody<B> {
    inner: B,
    deadline: tokio::time::Instant,
    /// Armed on the first poll that has to wait, so a body read at once costs no timer.
    sleep: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    timed_out: Arc<AtomicBool>,
}

impl<B> DeadlineBody<B> {
    fn new(inner: B, deadline: tokio::time::Instant, timed_out: Arc<AtomicBool>) -> Self {
        DeadlineBody {
            inner,
            deadline,
            sleep: None,
            timed_out,
        }
    }
}

/// The error a [`DeadlineBody`] ends with once its deadline has passed.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive in time")]
struct BodyTimedOut;

impl<B> hyper::body::Body for DeadlineBody<B>
where
    B: hyper::body::Body + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = B::Data;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        use std::task::Poll;
        let this = &mut *self;
        if let Poll::Ready(frame) = std::pin::Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|r| r.map_err(Into::into)));
        }
        let deadline = this.deadline;
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                this.timed_out.store(true, Ordering::Relaxed);
                Poll::Ready(Some(Err(Box::new(BodyTimedOut))))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// The answer to a request whose body did not arrive within `limit`.
fn body_too_slow(limit: Duration) -> Response<Body> {
    let body = Envelope::<()>::error(
        ErrorCode::Validation,
        format!(
            "the request body did not arrive within {} s of its head",
            limit.as_secs_f64()
        ),
    );
    let mut response = Response::new(Body::from(
        serde_json::to_vec(&body).unwrap_or_else(|_| b"{}".to_vec()),
    ));
    *response.status_mut() = StatusCode::REQUEST_TIMEOUT;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// The `414` / `431` envelope for a request head over the edge's bounds, or `None`.
fn head_too_large<B>(req: &Request<B>) -> Option<Response<Body>> {
    let target = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    let (status, msg) = if target > MAX_URI_BYTES {
        (
            StatusCode::URI_TOO_LONG,
            format!("the request target is {target} bytes; at most {MAX_URI_BYTES} are read"),
        )
    } else {
        let lines = req.headers().len();
        let bytes: usize = req
            .headers()
            .iter()
            .map(|(n, v)| n.as_str().len() + v.len() + 4)
            .sum();
        if lines > MAX_HEADER_COUNT {
            (
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                format!("{lines} header lines; at most {MAX_HEADER_COUNT} are read"),
            )
        } else if bytes > MAX_HEADER_BYTES {
            (
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                format!("the header section is {bytes} bytes; at most {MAX_HEADER_BYTES} are read"),
            )
        } else {
            return None;
        }
    };
    let body = Envelope::<()>::error(ErrorCode::PayloadTooLarge, msg);
    let mut response = Response::new(Body::from(
        serde_json::to_vec(&body).unwrap_or_else(|_| b"{}".to_vec()),
    ));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    Some(response)
}

/// The answer on a connection past the cap.
fn too_many_connections() -> Response<Body> {
    let body = Envelope::<()>::error(
        ErrorCode::Unavailable,
        "too many open connections; retry later",
    );
    let mut response = Response::new(Body::from(
        serde_json::to_vec(&body).unwrap_or_else(|_| b"{}".to_vec()),
    ));
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

async fn reload_on_sighup(reloader: Arc<TlsReloader>, stop: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP: TLS certificates reload only on restart");
            return;
        };
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                got = hup.recv() => if got.is_none() { return },
            }
            match reloader.reload() {
                Ok(()) => tracing::info!("SIGHUP: TLS certificate reloaded"),
                Err(e) => {
                    tracing::error!(error = %e, "SIGHUP: TLS reload failed; keeping the old certificate")
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (reloader, stop);
    }
}

fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}
