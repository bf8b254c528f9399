//! Test support the services' suites share, so that each helper exists once. A dev-dependency
//! only: no binary of the workspace links it.
//!
//! Layout:
//! - [`pg`]: [`PgSchema`], a fresh PostgreSQL schema on `DATABASE_URL_TEST`, dropped with its
//!   holder; PostgreSQL not answering fails the test loudly.
//! - [`process`]: [`run_in_clean_env`], a binary run with only the variables a case names, and
//!   [`assert_secret_refused`], the check that a refused secret setting never prints its value.

pub mod pg;
pub mod process;

pub use pg::PgSchema;
pub use process::{assert_secret_refused, run_in_clean_env};
