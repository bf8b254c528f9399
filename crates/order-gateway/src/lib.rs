//! order-gateway: the durable, leased, at-most-once order task queue and order-state mirror
//! (spec order-gateway.md §3–§5, §7–§9), and the account read-only query channel (§11).
//!
//! Layout, one file per concept:
//! - `main.rs`: thin binary, `order-gateway serve` and `order-gateway ops …`.
//! - [`ops`]: the operator's CLI (`tasks`, `show`, `reclaim`, `resolve`, `cancel`, `alerts`,
//!   `workers`, `retire`) over [`gateway_client`]; tables in
//!   [`ops::render`].
//! - [`roles`]: roles, named tokens and the credential table (who may call what).
//! - [`settings`]: typed settings (`RAKUTEN_*`, `.env`), validated once; the alert delivery and
//!   HTTP edge groups in `settings/alerts.rs` and `settings/edge.rs`.
//! - [`app`]: [`app::Application::build`] and `run_until_stopped` (graceful shutdown).
//! - [`state`]: [`state::AppState`], what every handler and console page shares (outside
//!   [`http`], so the console and the router do not import each other).
//! - [`http`]: the router; [`http::error`] (the one error type, `ApiResult`), [`http::auth`]
//!   (Bearer), [`http::extract`] (envelope rejections), [`http::checks`] (field checks several
//!   route groups share), [`http::page`] (list page bounds), [`http::openapi`]
//!   (`/openapi.json`), [`http::routes`] (`orders`, `queries`, `operator`, `health`, `probes`:
//!   `/livez`, `/readyz`, `/metrics`). The access log is `rakuten_edge::access_log`, shared with
//!   card-polling.
//! - [`telemetry`]: the Prometheus metrics (in-process counters and histograms, scrape-time
//!   counts through [`store::observe`]).
//! - [`store`]: the [`store::OrderStore`] trait (`store/mod.rs`), its error (`store/error.rs`) and
//!   the types it takes and answers (`store/types/`); ONE SQL
//!   implementation for both databases in `store/sql/`, one file per concept (`tasks/`,
//!   `reads.rs`, `queries.rs`, `paging.rs`, `grants.rs`, the operator's files, `observe.rs`,
//!   `store.rs`, row decoders in `rows.rs` / `query_row.rs`; see its module doc), compiled once
//!   per engine; the few engine differences in `store/dialect.rs`. Engines: [`store::sqlite`], the
//!   default (group-commit writer of the shared [`sqlite_writer`] crate, read pool; schema in
//!   `migrations/sqlite`), and [`store::postgres`] for several instances on one queue
//!   (`RAKUTEN_GATEWAY_DB_URL`; schema in `migrations/postgres`, `LISTEN/NOTIFY` wake-ups);
//!   [`app::Backend`] picks one.
//! - [`lease`]: in-process wake-up of long-polls ([`lease::notify`], which also counts their
//!   lease attempts by cause), the long-poll ([`lease::long_poll`]) and the hand-off's step
//!   timestamps for the benchmark ([`lease::probe`]).
//! - [`jobs`]: the lease-expiry sweeper ([`jobs::sweeper`]), alerts ([`jobs::alerts`]: `/health`'s
//!   alerts and the alert records job), alert delivery from the outbox ([`jobs::webhooks`]) and
//!   the account-query sweeper ([`jobs::query_sweeper`]).
//! - [`store::operator`]: the operator's-loop store trait (alerts, outbox, operator actions,
//!   workers, lease history), its types one file per concept; implemented once in
//!   `store/sql/operator.rs` over `store/sql/{alerts,alert_causes,outbox,actions,reclaim,workers}.rs`;
//!   routes in [`http::routes::operator`].
//! - [`console`]: the operator console at `/console`: server-rendered pages over the store, one
//!   file per page in `console/pages/`, audited actions with a reason in `console/actions.rs`;
//!   the signed session, the frame, sign-in/out and CSRF refusals are the shared
//!   `web_console::signed`, told about operators in `console/mod.rs`.
//! - [`query_queue`]: the account read-only query channel (§11): the side-by-side comparison of
//!   the two channels' semantics, submit validation, result size limit, query long-poll. Its
//!   storage is [`store::QueryStore`] (table `account_queries`), its routes
//!   [`http::routes::queries`].
//!
//! The task state machine itself is `rakuten_types::TaskStatus::transition`; the one-active
//! invariant is the partial unique index `one_active_task`.

pub mod app;
pub mod console;
pub mod http;
pub mod jobs;
pub mod lease;
pub mod ops;
pub mod query_queue;
pub mod roles;
pub mod settings;
pub mod state;
pub mod store;
pub mod telemetry;

pub use app::Application;
pub use settings::{LeaseScope, Settings};
