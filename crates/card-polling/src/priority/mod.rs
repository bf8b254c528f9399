//! The priority polling queue (spec priority-polling-queue.md).
//!
//! - [`item_status`]: the item state machine (one `transition()`).
//! - [`trigger`]: the stable trigger enum and the renewal-vs-purchase rule.
//! - [`manual`]: manual enqueue, close and retrigger (permission, reason, task-type range).
//!
//! Execution is [`crate::executor`]; hints after commit are [`crate::hints`].
//!
//! Enqueue-and-merge lives in the store (it must share the business fact's transaction); expiry
//! is the maintenance job [`crate::jobs::expiry`].

pub mod item_status;
pub mod manual;
pub mod trigger;

use std::time::Duration;

pub use item_status::ItemStatus;
pub use trigger::TriggerType;

/// Fixed maximum attempts of a priority item (spec: a constant, never a setting).
pub const MAX_ATTEMPTS: i64 = 3;

/// Claim lease: longer than the upstream call timeout, 90 s as the spec fixes.
pub const CLAIM_LEASE: Duration = Duration::from_secs(90);

/// Validity period of an item, counted from max(enqueue time, feature go-live). See D-priority-validity-24h.
pub const VALIDITY: Duration = Duration::from_secs(24 * 3600);

/// Upper bound of one upstream call; must stay below [`CLAIM_LEASE`].
pub const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest accepted operator reason, in characters.
pub const MAX_REASON_CHARS: usize = 500;

/// A priority item id written canonically (in a path): ASCII digits only, no sign, no leading zero, within
/// 1..=`i64::MAX` (D-item-ids-and-list-filters: `+1`, `01` and ` 1` are not `1`); `None` otherwise.
pub fn canonical_id(s: &str) -> Option<i64> {
    let digits = s.as_bytes();
    if digits.first().is_none_or(|d| *d == b'0') || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::canonical_id;

    #[test]
    fn only_canonical_decimal_ids_parse() {
        assert_eq!(canonical_id("1"), Some(1));
        assert_eq!(canonical_id("42"), Some(42));
        assert_eq!(canonical_id("9223372036854775807"), Some(i64::MAX));
        for bad in [
            "",
            "0",
            "00",
            "01",
            "+1",
            "-1",
            " 1",
            "1 ",
            "1.0",
            "1e3",
            "0x1",
            "١",
            "9223372036854775808",
        ] {
            assert_eq!(canonical_id(bad), None, "{bad:?}");
        }
    }
}
