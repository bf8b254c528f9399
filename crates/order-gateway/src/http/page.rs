//! The bounds of every list page: its `limit`/`offset` ([`page_bounds`], default
//! [`DEFAULT_LIMIT`], at most [`MAX_LIMIT`]) and its byte bound (D-list-pages-bounded): besides its `limit` of items, a
//! page's `items` hold at most [`MAX_PAGE_ITEMS_BYTES`] of JSON. A page that would pass it ends
//! before the item that crosses it (it always holds at least one), and its `limit` then says how
//! many it holds, so a client that continues at `offset + limit` — as it must already for a
//! clamped `limit` — misses nothing. What the lists hold is bounded per item too (a task's intent
//! is summarized), so the bound is a backstop, met only by items near their largest.

use rakuten_types::order::{MAX_PAGE_ITEMS_BYTES, Page};
use serde::Serialize;

use super::error::ApiError;

/// Default page size of every list route.
pub const DEFAULT_LIMIT: i64 = 50;
/// Largest page size; larger requests are clamped.
pub const MAX_LIMIT: i64 = 200;

/// The `limit`/`offset` of every list route, checked once: `limit` defaults to
/// [`DEFAULT_LIMIT`] and is clamped to
/// [`MAX_LIMIT`]; `offset` defaults to 0.
///
/// # Errors
/// 422 (1003) for a `limit` below 1 or a negative `offset`.
pub fn page_bounds(limit: Option<i64>, offset: Option<i64>) -> Result<(i64, i64), ApiError> {
    let limit = limit.unwrap_or(DEFAULT_LIMIT);
    // Plain words, as card-polling's `limit` (D-query-refusal-wording); larger pages are clamped.
    if limit < 1 {
        return Err(ApiError::Validation(format!(
            "limit must be a whole number of 1 or more (a page holds at most {MAX_LIMIT}; \
             more is read as {MAX_LIMIT})"
        )));
    }
    let offset = offset.unwrap_or(0);
    if offset < 0 {
        return Err(ApiError::Validation("offset must not be negative".into()));
    }
    Ok((limit.min(MAX_LIMIT), offset))
}

/// `page`, cut to [`MAX_PAGE_ITEMS_BYTES`] of items.
pub fn within_byte_bound<T: Serialize>(page: Page<T>) -> Page<T> {
    within(page, MAX_PAGE_ITEMS_BYTES)
}

fn within<T: Serialize>(mut page: Page<T>, max_bytes: usize) -> Page<T> {
    // `[`, `]` and a comma between items.
    let mut bytes = 2;
    let mut keep = 0;
    for (i, item) in page.items.iter().enumerate() {
        let n = serde_json::to_vec(item).map_or(0, |v| v.len()) + usize::from(i > 0);
        if i > 0 && bytes + n > max_bytes {
            break;
        }
        bytes += n;
        keep = i + 1;
    }
    if keep < page.items.len() {
        page.items.truncate(keep);
        page.limit = i64::try_from(keep).unwrap_or(page.limit);
    }
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(items: Vec<String>) -> Page<String> {
        Page {
            total: 10,
            limit: i64::try_from(items.len()).unwrap(),
            offset: 0,
            items,
        }
    }

    #[test]
    fn a_page_ends_before_the_item_that_passes_the_bound_and_says_so_in_its_limit() {
        // Each item is 12 bytes of JSON ("xxxxxxxxxx" with quotes), 13 with its comma.
        let items = vec!["x".repeat(10); 5];
        let p = within(page(items.clone()), 2 + 12 + 13 * 2);
        assert_eq!((p.items.len(), p.limit), (3, 3));
        assert_eq!(serde_json::to_vec(&p.items).unwrap().len(), 2 + 12 + 13 * 2);
        let whole = within(page(items.clone()), 1000);
        assert_eq!((whole.items.len(), whole.limit), (5, 5));
        // One item larger than the bound still makes a page.
        let one = within(page(items), 5);
        assert_eq!((one.items.len(), one.limit), (1, 1));
    }
}
