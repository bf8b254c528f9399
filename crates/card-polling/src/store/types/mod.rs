//! The request, response and view types the store's capabilities take and answer, one file per
//! capability's subject; re-exported from [`crate::store`].

pub mod import;
pub mod items;
pub mod package;
pub mod retention;
pub mod schedule;
