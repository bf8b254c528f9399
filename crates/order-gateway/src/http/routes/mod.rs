//! Route groups, one module each.

pub mod health;
pub mod operator;
pub mod orders;
pub mod probes;
pub mod queries;
