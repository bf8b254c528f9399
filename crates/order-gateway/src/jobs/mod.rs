//! Background jobs, each with `run_once()` plus a thin `run(shutdown)`.
//!
//! - [`sweeper`]: lease expiry → `stale` (§5), then alert logging.
//! - [`alerts`]: the alerts of §4.7, computed from the clock for `/health` and logged when raised.

pub mod alerts;
pub mod sweeper;
