//! Shards of the ordinary polling queues: a card's shard is a stable hash of its ICCID modulo
//! the configured shard count, stored on its `poll_schedule` rows (selected with the index
//! `(task_type, shard, next_poll_at)`). The queued ordinary entries of one shard are its "shard
//! queue" (counted by [`crate::executor::pool::ExecutorPool::shard_depth`]).

use std::time::Duration;

use rakuten_types::Timestamp;

/// FNV-1a, 64 bit: stable across processes and versions (unlike `std`'s hasher).
pub fn stable_hash(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The shard of a card (`0..shards`).
pub fn shard_of(iccid: &str, shards: u32) -> u32 {
    (stable_hash(iccid) % u64::from(shards.max(1))) as u32
}

/// A new card's first ordinary poll: spread over one interval from `now` by the ICCID's hash,
/// so a bulk import does not make every card due in the same second.
pub fn first_poll_at(iccid: &str, interval: Duration, now: Timestamp) -> Timestamp {
    let secs = interval.as_secs().max(1);
    now.plus(Duration::from_secs((stable_hash(iccid) >> 17) % secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_stable_and_in_range() {
        assert_eq!(
            shard_of("89000000000000000001", 16),
            shard_of("89000000000000000001", 16)
        );
        let mut seen = [0u32; 16];
        for i in 0..16_000 {
            seen[shard_of(&format!("89{i:018}"), 16) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 700), "{seen:?}");
        assert_eq!(shard_of("x", 0), 0);
    }
}
