//! The gateway's one integration-test binary: real HTTP on 127.0.0.1:0, fresh temp databases,
//! `ManualClock` for expiry and alerts. Modules follow the spec's §9 checklist and issue #2.

mod bad_input;
mod crash;
mod expiry;
mod health;
mod helpers;
mod invariants;
mod lease;
mod queries;
mod report;
mod soak;
mod store;
mod submit;
