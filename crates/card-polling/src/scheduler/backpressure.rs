//! Back-pressure (spec "分片队列积压"): a shard queue deeper than the threshold makes the
//! scheduler skip that shard's ordinary batch for the cycle. It applies to ordinary batches
//! only: priority hints, the recovery read and manual triggers are never held back by it.

/// Whether a shard queue holding `depth` ordinary entries is too deep for another batch.
pub const fn skip_ordinary_batch(depth: usize, threshold: usize) -> bool {
    depth > threshold
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_depth_above_the_threshold_skips() {
        assert!(!skip_ordinary_batch(10, 10));
        assert!(skip_ordinary_batch(11, 10));
    }
}
