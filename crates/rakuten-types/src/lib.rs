//! Wire and domain types shared by every service of this workspace. No I/O lives here.
//!
//! Layout, one file per concept:
//! - [`timestamp`]: the one canonical time form (fixed-width UTC text, millisecond precision).
//! - [`clock`]: the injected [`Clock`] trait, the system clock and a manual clock for tests.
//! - [`envelope`]: the response envelope `{success, msg, data, code}` (spec order-gateway.md §8).
//! - [`codes`]: the stable numeric error codes and their HTTP statuses (§8, §11.4).
//! - [`ids`]: parsed identifiers (task, query, worker ids): bounded length, no control characters.
//! - [`task_status`]: the order task state machine (§3, §5).
//! - [`intent`]: the order intent's rules, shared by the gateway (submit) and the worker (§4.2).
//! - [`order_state`]: the order-state vocabulary mirrored from the worker (§3).
//! - [`order`]: request and response bodies of the order task endpoints (§4.2–§4.6, §5).
//! - [`query`]: the account read-only query channel: status machine and bodies (§11).
//! - [`alert`]: alert records, webhook notices and audited operator actions.
//! - [`text`]: free text a person types for another to read (an operator's reason).
//! - [`secret`]: [`Secret`] (redacted, compared in constant time) and the one Bearer token rule.
//! - [`whole`]: whole numbers read as JSON Schema's `integer` reads them (`11.0` is 11).
//! - [`schema`]: the rules of [`ids`] and [`text`] as OpenAPI schemas, built from the same
//!   predicates.
//! - [`body_rules`]: the rules that tie one body field to another, as `oneOf` branches.

pub mod alert;
pub mod body_rules;
pub mod clock;
pub mod codes;
pub mod envelope;
pub mod ids;
pub mod intent;
pub mod order;
pub mod order_state;
pub mod query;
pub mod schema;
pub mod secret;
pub mod task_status;
pub mod text;
pub mod timestamp;
pub mod whole;

pub use clock::{Clock, ManualClock, SystemClock};
pub use codes::ErrorCode;
pub use envelope::Envelope;
pub use ids::{IdError, QueryId, TaskId, WorkerId};
pub use order_state::OrderState;
pub use secret::{MAX_TOKEN_CHARS, MIN_TOKEN_CHARS, Secret};
pub use task_status::{Outcome, TaskEvent, TaskStatus};
pub use timestamp::Timestamp;

/// The only site traded (§10 "交易范围"). Requests naming any other site are refused with 422.
pub const SITE_RAKUTEN: &str = "rakuten";
