//! The gateway's one integration-test binary: real HTTP on 127.0.0.1:0, fresh temp databases,
//! `ManualClock` for expiry and alerts. Modules follow the spec's §9 checklist;
//! `conformance` runs one storage suite against both drivers and `multi_instance` runs several
//! gateways on one PostgreSQL schema. PostgreSQL: `DATABASE_URL_TEST` (default
//! `postgres://postgres@127.0.0.1:5432/test`), a fresh schema per test; it must be running.

mod access;
mod alert_crash;
mod alert_delivery;
mod bad_input;
mod binary;
mod bounded;
mod clock_alerts;
mod conformance;
mod console;
mod crash;
mod edge;
mod env_example;
mod expiry;
mod faketime;
mod handoff;
mod health;
mod helpers;
mod invariants;
mod late_report;
mod lease;
mod logs;
mod metrics;
mod migrations;
mod multi_instance;
mod not_after;
mod openapi;
mod operator;
mod ops_cli;
mod ops_cli_operator;
mod probes;
mod queries;
mod receiver;
mod removed_receiver;
mod report;
mod roles;
mod runbook;
mod secret_settings;
mod soak;
mod startup;
mod store;
mod submit;
mod verbatim;
mod whole_numbers;
mod worker_binding;
mod workers;
