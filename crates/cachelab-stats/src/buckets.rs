//! A fixed-width histogram with an overflow bucket.

use serde::{Deserialize, Serialize};

/// Counts of values in buckets `[i w, (i + 1) w)` for `i < max_buckets`, plus one
/// overflow bucket for everything at or above `max_buckets * w`. The counts grow to the
/// largest bucket used, so a histogram of sub-millisecond latencies stays tiny; recording
/// allocates only when a new largest bucket is reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketHistogram {
    pub width_us: u64,
    pub max_buckets: usize,
    pub counts: Vec<u64>,
    pub overflow: u64,
}

impl BucketHistogram {
    pub fn new(width_us: u64, max_buckets: usize) -> Self {
        assert!(width_us > 0 && max_buckets > 0);
        BucketHistogram {
            width_us,
            max_buckets,
            counts: Vec::new(),
            overflow: 0,
        }
    }

    pub fn record(&mut self, value_us: u64) {
        self.add(value_us / self.width_us, 1);
    }

    fn add(&mut self, index: u64, count: u64) {
        let Ok(index) = usize::try_from(index) else {
            self.overflow += count;
            return;
        };
        if index >= self.max_buckets {
            self.overflow += count;
            return;
        }
        if index >= self.counts.len() {
            self.counts.resize(index + 1, 0);
        }
        self.counts[index] += count;
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum::<u64>() + self.overflow
    }

    /// The counts up to the last non-empty bucket (what the stats file stores).
    pub fn trimmed(&self) -> &[u64] {
        let end = self
            .counts
            .iter()
            .rposition(|c| *c > 0)
            .map_or(0, |i| i + 1);
        &self.counts[..end]
    }

    /// Adds another histogram of the same width; a shorter or trimmed one is fine.
    pub fn merge(&mut self, other: &BucketHistogram) {
        assert_eq!(self.width_us, other.width_us, "bucket widths differ");
        for (i, count) in other.counts.iter().enumerate() {
            if *count > 0 {
                self.add(i as u64, *count);
            }
        }
        self.overflow += other.overflow;
    }

    pub fn reset(&mut self) {
        self.counts.iter_mut().for_each(|c| *c = 0);
        self.overflow = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_land_in_100_microsecond_buckets() {
        let mut h = BucketHistogram::new(100, 10);
        for v in [0, 99, 100, 250, 999] {
            h.record(v);
        }
        assert_eq!(h.trimmed(), &[2, 1, 1, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(h.overflow, 0);
    }

    #[test]
    fn values_beyond_the_last_bucket_overflow() {
        let mut h = BucketHistogram::new(100, 10);
        h.record(1000);
        h.record(5_000_000);
        assert_eq!(h.overflow, 2);
        assert_eq!(h.trimmed(), &[] as &[u64]);
        assert_eq!(h.total(), 2);
    }

    #[test]
    fn merge_adds_counts_and_reset_clears_them() {
        let mut a = BucketHistogram::new(100, 3);
        let mut b = BucketHistogram::new(100, 5);
        a.record(50);
        b.record(50);
        b.record(450);
        a.merge(&b);
        assert_eq!(a.counts, vec![2]);
        assert_eq!(a.overflow, 1);
        a.reset();
        assert_eq!(a.total(), 0);
    }
}
