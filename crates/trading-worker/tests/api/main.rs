//! trading-worker against the real gateway and shop-sim over HTTP (spec §9, worker lines, with crash
//! and fault tests).

mod adapter;
mod crash;
mod env_example;
mod execution;
mod helpers;
mod instance;
mod process;
mod queries;
mod recovery;
mod secret_settings;
mod worker_role;
