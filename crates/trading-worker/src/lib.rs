//! The local trading worker (spec order-gateway.md §6, §6.1, §7, §10, §11.1): pulls order tasks
//! from the gateway (outbound only, no listening port), drives the site through a seam, keeps a
//! local journal and evidence, and reports every state.
//!
//! Layout, one file per concept:
//! - [`settings`]: `RAKUTEN_*` settings (clap + env + `.env`), validated once.
//! - [`gateway_client`]: lease / renew / report with retries (backoff + jitter).
//! - [`account_lock`]: one async mutex per site account (§11.1), taken by every site action.
//! - [`site`]: the [`site::Site`] trait; [`site::rakuten`] (unverified steps → 5003) and
//!   [`site::sim`] (the simulated shop over HTTP).
//! - [`scraper`]: the item's `purchase` block from the scraper's `POST /api/item_detail`.
//! - [`intent`]: the order intent's shape.
//! - [`instance_lock`]: one process per journal (`{db}.lock`, OS lock, D-worker-journal-lock).
//! - [`journal`]: local SQLite, one file per table the worker reasons about: `orders.rs`,
//!   `intents.rs` (write-ahead), `step.rs` (one step's transaction: order row, evidence index,
//!   state event, intents, report), `outbox.rs`.
//! - [`evidence`]: `{task_id}/NN-step.html|.meta.json`, fsynced (§6.1); `.png` only when the
//!   site seam took a screenshot (neither seam does yet).
//! - [`ctx`]: the shared context ([`ctx::WorkerCtx`]: settings, clients, journal, evidence,
//!   site seam, account locks) and the outbox flush; every loop and step imports it, it imports
//!   none of them.
//! - [`execute`]: the steps of one task, one file per step of §6: `execute/cart.rs`,
//!   `confirm.rs` (with the amount guard), `submit.rs`, `pay.rs`, `recovery.rs` (the recovery
//!   hand-off), over `record.rs` (evidence → journal → report, and a task's ending) and
//!   `safe_step.rs` (retries).
//! - [`verify`]: the recovery check on the site's order list (§5).
//! - [`order_loop`]: the serial loop of §6 (`run_once`, `run`).
//! - [`query_loop`]: the account-query loop of §11 (`run_once`, `run`): its own lease polling,
//!   reads under the account lock within the query timeout, exactly one result per lease.
//! - [`monitor`]: post-payment monitoring (`run_once`, `run`).
//! - [`failpoint`]: TEST-ONLY crash injection (`RAKUTEN_WORKER_FAILPOINT`).
//! - [`worker`]: assembly, on top: builds the context from settings and runs the loops.
//!
//! Imports go one way: `worker` → loops (`order_loop`, `query_loop`, `monitor`) → `execute` /
//! `verify` → `ctx` → the clients and stores. The account-query loop shares
//! [`ctx::WorkerCtx`] (site seam, account locks) with the order loop and uses
//! `Site::list_orders` / `Site::order_detail`.

pub mod account_lock;
pub mod ctx;
pub mod evidence;
pub mod execute;
pub mod failpoint;
pub mod gateway_client;
pub mod instance_lock;
pub mod intent;
pub mod journal;
pub mod monitor;
pub mod order_loop;
pub mod query_loop;
pub mod scraper;
pub mod settings;
pub mod site;
pub mod verify;
pub mod worker;

pub use settings::Settings;
pub use worker::Worker;
