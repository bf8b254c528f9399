//! Background jobs, each with `run_once()` plus a thin `run(shutdown)`.
//!
//! - [`sweeper`]: lease expiry → `stale` (§5), then alert logging.
//! - [`alerts`]: the alerts of §4.7, computed from the clock for `/health` and logged when raised.
//! - [`query_sweeper`]: account queries (§11): TTL → `expired`, lapsed lease → redelivery or
//!   `failed`, retention purge.

pub mod alerts;
pub mod query_sweeper;
pub mod sweeper;
