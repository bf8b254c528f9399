//! What the store's traits take and answer, one file per subject; re-exported from
//! [`crate::store`].

pub mod health;
pub mod page;
pub mod task;
