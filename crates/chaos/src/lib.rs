//! A fault-injection harness for the order gateway, the trading worker and the simulated shop,
//! the proof of at-most-once (docs/RELIABILITY.md): it runs the real binaries as child
//! processes, lets an upstream submit hundreds of orders, injects faults at random (seeded), lets
//! an operator reclaim stale tasks, and at the end checks at-most-once from the shop's own log,
//! the gateway's API and the worker journal. `chaos --orders 300 --seed 7` prints a summary table
//! and exits 1 on any violation.
//!
//! Layout:
//! - [`settings`]: the command line ([`Settings`]).
//! - [`procs`]: the child processes (gateway(s), worker, shop, and with `--site …-adapter` a
//!   `site-adapter` between worker and shop): start, `kill -9`, restart.
//! - [`proxy`]: the HTTP-aware TCP proxy between worker and gateway (drop, delay, black-hole;
//!   records the report acknowledgements it delivered); a second instance sits between worker and
//!   shop.
//! - [`faults`]: the fault kinds and the injector.
//! - [`upstream`]: the order submitter.
//! - [`operator`]: reclaims stale tasks, as a human would.
//! - [`gateway_api`]: the harness's HTTP client of the gateway (retries through restarts).
//! - [`checks`]: the end-of-run checks.
//! - [`report`]: the summary table.
//! - [`run`](mod@run): one run, start to end.
//!
//! Storage-agnostic by design: the gateway is only read over HTTP, its database is chosen by
//! `--gateway-db-url` (passed as `RAKUTEN_GATEWAY_DB_URL`), and `--gateways N` starts several
//! instances behind the proxy (round-robin per connection) on the PostgreSQL backend.

pub mod checks;
pub mod faults;
pub mod gateway_api;
pub mod operator;
pub mod procs;
pub mod proxy;
pub mod report;
pub mod run;
pub mod settings;
pub mod upstream;

pub use faults::FaultKind;
pub use report::RunReport;
pub use run::run;
pub use settings::{Settings, SiteChoice};
