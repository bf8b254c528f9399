//! rakuten-edge: the public HTTP edge that order-gateway and card-polling share, so
//! both services bound their connections the same way and neither keeps its own copy.
//!
//! Layout:
//! - [`serve`]: [`serve::bind`], the listening socket whose failure names the host or port
//!   variable (exit 2); [`serve::serve`], the accept loop over an already bound listener: HTTP/1.1 through
//!   hyper-util, optional TLS, a header-read timeout that also closes idle keep-alive connections,
//!   a cap on open connections (503 envelope past it), graceful shutdown with a hard deadline.
//! - [`tls`]: rustls server configuration from PEM files, reloaded on SIGHUP without dropping
//!   connections (one crypto provider, aws-lc-rs, for the whole workspace).
//! - [`access_log`]: every service's access log: one line per request (method, route, status,
//!   latency, path parameters, the task, query and worker it is about), no headers.
//! - [`body`]: reading a JSON request body: coding, size (a 413 states the limit in bytes),
//!   media type, with one wording both services answer.
//! - [`json`]: strict JSON parsing: a duplicate key at any depth is an error.
//! - [`openapi`]: the statuses the edge can answer (401/403/413/422/503), added to a document.
//! - [`query_guard`]: unknown query parameters refused, the allowed ones read from the document.
//! - `testing` (feature `test-util`): a throw-away CA and certificates for the suites.

pub mod access_log;
pub mod body;
pub mod json;
pub mod openapi;
pub mod query_guard;
pub mod serve;
#[cfg(feature = "test-util")]
pub mod testing;
pub mod tls;

pub use serve::{EdgeConfig, bind, check_addr_file, serve, warn_if_plain_public, write_addr_file};
pub use tls::{TlsFiles, TlsReloader};
