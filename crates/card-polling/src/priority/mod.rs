//! The priority polling queue (spec priority-polling-queue.md).
//!
//! - [`item_status`]: the item state machine (one `transition()`).
//! - [`trigger`]: the stable trigger enum and the renewal-vs-purchase rule.
//! - [`manual`]: manual enqueue, close and retrigger (permission, reason, task-type range).
//!
//! Execution is [`crate::executor`]; hints after commit are [`crate::hints`].
//!
//! Enqueue-and-merge lives in the store (it must share the business fact's transaction); expiry
//! is the maintenance job [`crate::jobs::expiry`].

pub mod item_status;
pub mod manual;
pub mod trigger;

use std::time::Duration;

pub use item_status::ItemStatus;
pub use trigger::TriggerType;

/// Fixed maximum attempts of a priority item (spec: a constant, never a setting).
pub const MAX_ATTEMPTS: i64 = 3;

/// Claim lease: longer than the upstream call timeout, 90 s as the spec fixes.
pub const CLAIM_LEASE: Duration = Duration::from_secs(90);

/// Validity period of an item, counted from max(enqueue time, feature go-live). See D-priority-validity-24h.
pub const VALIDITY: Duration = Duration::from_secs(24 * 3600);

/// Upper bound of one upstream call; must stay below [`CLAIM_LEASE`].
pub const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest accepted operator reason, in characters.
pub const MAX_REASON_CHARS: usize = 500;
