//! SQL written once for both engines. Today: [`operator`] (alerts, webhook outbox, operator
//! actions, workers; issue #10).

pub mod operator;
