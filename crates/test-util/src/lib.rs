//! Test support the services' suites share, so that each helper exists once. A dev-dependency
//! only: no binary of the workspace links it.
//!
//! Layout:
//! - [`process`]: [`run_in_clean_env`], a binary run with only the variables a case names.

pub mod process;

pub use process::run_in_clean_env;
