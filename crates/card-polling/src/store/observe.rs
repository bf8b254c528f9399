//! What `/metrics` and `/readyz` read from the database (issue #10 items 7 and 8); the reads
//! themselves are written once for both engines in `store/sql/observe.rs`.

/// Item statuses counted at scrape time.
pub const OPEN_ITEM_STATUSES: [&str; 2] = ["pending", "running"];
