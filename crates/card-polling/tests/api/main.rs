//! The one integration-test binary of card-polling: real HTTP on port 0, a fresh temporary
//! SQLite database per test, a `ManualClock` and the simulated carrier. One test per scenario of
//! spec priority-polling-queue.md; the scheduling scenarios (`scheduler`) run once per hint
//! backend (in-process and the machine's Redis); `soak` checks every invariant after simulated
//! hours.

mod helpers;

mod claims;
mod concurrency;
mod http_input;
mod lifecycle;
mod manual;
mod manual_trigger;
mod merge;
mod observability;
mod ordinary;
mod queries;
mod scheduler;
mod snapshot;
mod soak;
mod triggers;
