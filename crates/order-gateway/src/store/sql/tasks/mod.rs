//! The order task transitions (§4.2–§5), one file per transition family: [`submit`] (insert or
//! find), [`lease`] (a worker's lease attempt, the poison rows it sets aside), [`reclaim`] (the
//! operator's grant of a stale task), [`report`] (renew and report, both checked against the
//! lease's holder with [`holder`](crate::store::sql::holder)), [`sweep`] (the sweeper's lapse, deadline and clamp); [`grant`] is the grant a
//! lease and a reclaim both set, [`row`] loads and locks the task row and touches the heartbeat.
//!
//! Each transition runs inside one transaction of its own (PostgreSQL) or one SAVEPOINT of a group
//! commit (SQLite, the [`sqlite_writer`] crate); each decides with
//! [`TaskStatus::transition`](rakuten_types::TaskStatus::transition) and repeats the guard in SQL
//! (`UPDATE … WHERE status IN (…) AND lease_owner = $n … RETURNING`), so a lost race, also one
//! against another gateway instance, is a typed error, never a silent no-op.
//!
//! Concurrency between PostgreSQL instances (READ COMMITTED), through the dialect:
//! - rows a transition reads before it writes are locked (`FOR UPDATE`), so renew, report,
//!   reclaim and the sweeper serialize per task;
//! - a claim picks the oldest queued task `FOR UPDATE SKIP LOCKED`, so two instances never pick
//!   the same row, and the partial unique index `one_active_task` refuses the second of two
//!   different rows (unique violation → [`LeaseAttempt::GateBusy`](crate::store::LeaseAttempt));
//! - the sweeper takes only rows nobody holds (`SKIP LOCKED`), so when every instance sweeps at
//!   once each lapsed lease turns `stale` exactly once, reported by the instance that did it.
//!
//! SQLite runs submit, lease, renew and report on its writer's own thread instead
//! (`store/sqlite_sync.rs`, D-gateway-hot-path-on-writer-thread), with the same guards; its copy of
//! those functions here is unused.
//!
//! Imports run one way: the transitions use [`grant`] and [`row`], never each other; this file
//! only names what the engine's store calls.

#![allow(
    dead_code,
    unused_imports,
    reason = "compiled for both engines; SQLite's hot transitions are in store/sqlite_sync.rs"
)]

// Each file is loaded once per engine, like the module that holds them (see `sql/mod.rs`).
#[allow(clippy::duplicate_mod)]
mod grant;
#[allow(clippy::duplicate_mod)]
mod lease;
#[allow(clippy::duplicate_mod)]
mod reclaim;
#[allow(clippy::duplicate_mod)]
mod report;
#[allow(clippy::duplicate_mod)]
mod row;
#[allow(clippy::duplicate_mod)]
mod submit;
#[allow(clippy::duplicate_mod)]
mod sweep;

pub(crate) use lease::task_lease;
pub(crate) use reclaim::task_reclaim;
pub(crate) use report::{task_renew, task_report};
pub(crate) use submit::task_insert;
pub(crate) use sweep::{task_clamp_leases, task_expire_past_not_after, task_mark_stale_expired};
