//! The simulated shop's adapters against the conformance kit, and the worker through the
//! browser adapter. Browser tests need Debian's `chromium` and `chromium-driver` (`.ci/run`
//! installs them); they fail, never skip, when those are missing.

mod browser;
mod env_example;
