//! The card-polling console's pages and forms. Each asks the API's rule for its action
//! ([`AccountRules::allowed`](super::AccountRules::allowed): reading items needs what `GET /api/priority-items` needs) and reads in the
//! scope it answers; a missing item and an out-of-scope item get the same page.
//!
//! One file per page: [`overview`](overview()), the item lists ([`items`](items()),
//! [`exceptions`]), one item with its actions ([`item`](item()), [`close`], [`retrigger`]); this
//! file holds what they share.

use axum::http::StatusCode;
use axum::response::Response;

use super::Signed;
use crate::store::StoreError;

mod item;
mod items;
mod overview;

pub use item::{Done, ReasonForm, close, item, retrigger};
pub use items::{ItemQuery, exceptions, items};
pub use overview::overview;

/// Items per page.
pub const PAGE: i64 = 50;

/// The answer when the store could not be read: logged, and a 503 page.
fn store_error(signed: &Signed, e: StoreError) -> Response {
    tracing::error!(error = %e, "console read failed");
    signed.error(
        StatusCode::SERVICE_UNAVAILABLE,
        "The database could not be read; try again.",
    )
}

/// The one answer for a missing item and an item outside the account's scope.
fn no_such_item(signed: &Signed) -> Response {
    signed.error(StatusCode::NOT_FOUND, "No such item.")
}
