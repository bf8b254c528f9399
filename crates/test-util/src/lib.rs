//! Test support the services' suites share, so that each helper exists once. A dev-dependency
//! only: no binary of the workspace links it.
//!
//! Layout:
//! - [`lane`] / [`postgres_lane`] (from `test-lanes`): the attribute that puts a test needing a
//!   service, a browser, libfaketime or a long run in its lane, ignored unless
//!   `RAKUTEN_TEST_LANES` turns the lane on.
//! - [`wait`]: [`wait_until`] / [`wait_for`] / [`wait_until_blocking`], a bounded wait on a
//!   condition that fails naming what it awaited (never a fixed sleep); [`poll_within`] for a
//!   caller that cleans up before failing.
//! - [`pg`]: [`PgSchema`], a fresh PostgreSQL schema on `DATABASE_URL_TEST`, dropped with its
//!   holder; PostgreSQL not answering fails the test loudly.
//! - [`process`]: running the workspace's binaries: [`run_in_clean_env`] (only the variables a
//!   case names), [`assert_secret_refused`] (a refused secret setting never prints its value),
//!   [`assert_setup_refused`] (a start-up refused for the configuration or the environment: exit
//!   2, one line), [`assert_setup_unavailable`] (the same for what a restart may fix: exit 3),
//!   [`assert_read_only_database_refused`] (a read-only SQLite file named as such),
//!   [`run_unprivileged`] (as `nobody` under root, for read-only files), [`libfaketime`] (the
//!   preload library that runs a binary under a stepped clock), [`wait_for_addr_file`] (a
//!   service started on port 0 is listening: its address), [`wait_for_exit`] (a process
//!   stopped, bounded).

pub mod pg;
pub mod process;
pub mod wait;

pub use pg::PgSchema;
pub use process::{
    assert_foreign_migration_refused, assert_output_refused, assert_read_only_database_refused,
    assert_secret_refused, assert_setup_refused, assert_setup_unavailable, libfaketime,
    run_in_clean_env, run_unprivileged, wait_for_addr_file, wait_for_exit,
};
pub use test_lanes::{lane, postgres_lane};
pub use wait::{poll_within, wait_for, wait_until, wait_until_blocking};
