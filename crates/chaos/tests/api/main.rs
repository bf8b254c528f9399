//! The chaos crate's one integration-test binary: a short fault-injection run against the real
//! binaries (built here if missing), and the checks' own behaviour on hand-made evidence.

mod checks;
mod env_example;
mod short_run;
