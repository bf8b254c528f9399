//! Background jobs, each with `run_once()` plus a thin `run(shutdown)`.
//!
//! - [`sweeper`]: lease expiry → `stale` (§5).
//! - [`alert_hooks`]: alerts raised from inside a store transition (poison rows, clock jumps).
//! - [`alerts`]: the alerts of §4.7 computed for `/health`, and the alert job: alert records,
//!   raised and cleared, with the evidence query of a stale task (issue #10).
//! - [`webhooks`]: delivery of alert events from the durable outbox, signed, retried (issue #10).
//! - [`query_sweeper`]: account queries (§11): TTL → `expired`, lapsed lease → redelivery or
//!   `failed`, retention purge.

pub mod alert_hooks;
pub mod alerts;
pub mod query_sweeper;
pub mod sweeper;
pub mod webhooks;
