//! trading-worker against the real gateway and shop-sim over HTTP (spec §9, worker lines, and the
//! issue's crash and fault tests).

mod adapter;
mod crash;
mod execution;
mod helpers;
mod instance;
mod queries;
mod recovery;
