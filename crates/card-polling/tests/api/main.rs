//! The one integration-test binary of card-polling: real HTTP on port 0, a fresh database per
//! test, a `ManualClock` and the simulated carrier. One test per scenario of spec
//! priority-polling-queue.md, run on both engines: `sqlite::…` (a temporary SQLite file per test)
//! and `postgres::…` (a fresh schema of `DATABASE_URL_TEST` per test, default
//! `postgres://postgres@127.0.0.1:5432/test`; PostgreSQL not answering fails loudly). The
//! scheduling scenarios (`scheduler`) run once per hint backend (in-process and the machine's
//! Redis); `soak` checks every invariant after simulated hours, on SQLite only (D-soak-test-sqlite-only).

// The scenario files are compiled once per engine module, on purpose (D-tests-run-on-both-engines).
#![allow(clippy::duplicate_mod)]

/// The scenario modules and their helpers, compiled once per engine module (`sqlite.rs`,
/// `postgres.rs`), which names `EngineStore`, `fresh_database` and `engine_store` for them.
macro_rules! scenarios {
    () => {
        // Some helpers serve only the soak, which one engine runs.
        #[allow(dead_code)]
        #[path = "helpers.rs"]
        mod helpers;

        #[path = "access.rs"]
        mod access;
        #[path = "audit.rs"]
        mod audit;
        #[path = "carrier.rs"]
        mod carrier;
        #[path = "claims.rs"]
        mod claims;
        #[path = "concurrency.rs"]
        mod concurrency;
        #[path = "engine.rs"]
        mod engine;
        #[path = "http_input.rs"]
        mod http_input;
        #[path = "lifecycle.rs"]
        mod lifecycle;
        #[path = "manual.rs"]
        mod manual;
        #[path = "manual_trigger.rs"]
        mod manual_trigger;
        #[path = "merge.rs"]
        mod merge;
        #[path = "observability.rs"]
        mod observability;
        #[path = "openapi.rs"]
        mod openapi;
        #[path = "ordinary.rs"]
        mod ordinary;
        #[path = "queries.rs"]
        mod queries;
        #[path = "retention.rs"]
        mod retention;
        #[path = "scheduler.rs"]
        mod scheduler;
        #[path = "snapshot.rs"]
        mod snapshot;
        #[path = "triggers.rs"]
        mod triggers;
    };
}

mod env_example;
mod postgres;
mod readme;
mod secret_settings;
mod sqlite;
mod startup;

/// libfaketime's preload library, or a loud failure. The engine modules name it
/// `crate::libfaketime`.
pub use test_util::libfaketime;

/// A fresh PostgreSQL schema for one test, dropped with it; PostgreSQL not answering fails
/// loudly. The engine modules name it `crate::PgSchema`.
pub use test_util::PgSchema;
