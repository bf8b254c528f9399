//! gateway-client: the one typed HTTP client of the order gateway (spec order-gateway.md §4, §5,
//! §8, §11). The trading worker, the chaos harness, the demo and
//! `order-gateway ops` all talk to the gateway through it; upstream Rust callers can too.
//!
//! Layout:
//! - [`client`]: [`Client`] and its [`Builder`] (base URLs, Bearer token, timeouts, the default
//!   [`Retry`]), and the one place that sends a request and decodes the envelope
//!   `{success,msg,data,code}`.
//! - [`error`]: [`Error`]: lease lost (6002), refused (any other 4xx, with status, code, msg),
//!   transient (unreachable, timeout, 5xx, unreadable 2xx) or shutting down.
//! - [`retry`]: [`Retry`] policies, the jittered exponential [`backoff`], and [`run_turns`]
//!   (a long-poll loop that backs off after failures).
//! - [`orders`]: order task calls by role: upstream (submit, read, list), worker (lease
//!   long-poll, renew, report), operator (reclaim).
//! - [`operator`]: operator calls: alerts, resolve, cancel, workers, retire.
//! - [`queries`]: account-query calls (§11): upstream (submit, read), worker (lease, result).
//!
//! Only transient failures are retried, and only as far as the call's policy allows: the worker's
//! report and query result until acknowledged (both idempotent on the gateway), renew a few
//! times, everything else by the client's default (none unless the builder sets one).

pub mod client;
pub mod error;
pub mod operator;
pub mod orders;
pub mod queries;
pub mod retry;

pub use client::{Builder, Client};
pub use error::Error;
pub use operator::AlertQuery;
pub use orders::TaskQuery;
pub use retry::{Retry, backoff, run_turns};
