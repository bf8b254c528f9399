//! order-gateway: the durable, leased, at-most-once order task queue and order-state mirror
//! (spec order-gateway.md §3–§5, §7–§9).
//!
//! Layout, one file per concept:
//! - `main.rs`: thin binary, `order-gateway serve`.
//! - [`settings`]: typed settings (`RAKUTEN_*`, `.env`), validated once.
//! - [`app`]: [`app::Application::build`] and `run_until_stopped` (graceful shutdown).
//! - [`http`]: router and shared state; [`http::error`] (the one error type), [`http::auth`]
//!   (Bearer), [`http::extract`] (envelope rejections), [`http::openapi`] (`/openapi.json`),
//!   [`http::routes`] (`orders`, `health`).
//! - [`store`]: the [`store::OrderStore`] trait and its error; [`store::sqlite`] is the SQLite
//!   driver (group-commit writer, read pool); schema in `migrations/sqlite`.
//! - [`lease`]: in-process wake-up of long-polls ([`lease::notify`]) and the long-poll
//!   ([`lease::long_poll`]).
//! - [`jobs`]: the lease-expiry sweeper ([`jobs::sweeper`]) and alerts ([`jobs::alerts`]).
//!
//! The task state machine itself is `rakuten_types::TaskStatus::transition`; the one-active
//! invariant is the partial unique index `one_active_task`.

pub mod app;
pub mod http;
pub mod jobs;
pub mod lease;
pub mod settings;
pub mod store;

pub use app::Application;
pub use settings::{LeaseScope, Settings};
