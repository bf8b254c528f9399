//! Background maintenance jobs; each exposes `run_once(now)` and a thin `run(shutdown)`.

pub mod expiry;
pub mod retention;
pub mod schedule_config;
