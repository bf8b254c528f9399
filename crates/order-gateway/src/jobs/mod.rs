//! Background jobs, each with `run_once()` plus a thin `run(shutdown)`.
//!
//! - [`sweeper`]: lease expiry → `stale` (§5), then alert logging.
//! - [`alert_hooks`]: alerts raised from inside a store transition (poison rows, clock jumps).
//! - [`alerts`]: the alerts of §4.7, computed from the clock for `/health` and logged when raised.
//! - [`query_sweeper`]: account queries (§11): TTL → `expired`, lapsed lease → redelivery or
//!   `failed`, retention purge.

pub mod alert_hooks;
pub mod alerts;
pub mod query_sweeper;
pub mod sweeper;
