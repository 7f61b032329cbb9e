//! An HDR latency histogram in microseconds.

use base64::Engine;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use thiserror::Error;

const SIGNIFICANT_DIGITS: u8 = 3;

#[derive(Debug, Error)]
pub enum HdrError {
    #[error("cannot create histogram: {0}")]
    Creation(#[from] hdrhistogram::CreationError),
    #[error("cannot merge histograms: {0}")]
    Merge(#[from] hdrhistogram::AdditionError),
    #[error("cannot encode histogram: {0}")]
    Encode(#[from] hdrhistogram::serialization::V2DeflateSerializeError),
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

/// Microsecond latencies with three significant digits. It starts small and grows to
/// cover the largest value seen, so a worker that only sees sub-millisecond latencies
/// keeps a few kilobytes.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    inner: Histogram<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        let mut inner = Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits is valid");
        inner.auto(true);
        LatencyHistogram { inner }
    }
}

impl LatencyHistogram {
    pub fn record(&mut self, value_us: u64) {
        // Auto-resize makes recording infallible for any u64 we can produce.
        let _ = self.inner.record(value_us.max(1));
    }

    pub fn len(&self) -> u64 {
        self.inner.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    pub fn merge(&mut self, other: &LatencyHistogram) -> Result<(), HdrError> {
        self.inner.add(&other.inner)?;
        Ok(())
    }

    pub fn reset(&mut self) {
        self.inner.reset();
    }

    /// The value at quantile `q` in [0, 1] (0 for an empty histogram).
    pub fn quantile(&self, q: f64) -> u64 {
        if self.inner.is_empty() {
            0
        } else {
            self.inner.value_at_quantile(q)
        }
    }

    /// How many recorded values are at or above `value_us` (to the histogram's precision:
    /// values within the same 3-significant-digit bucket count as equal).
    pub fn count_at_or_above(&self, value_us: u64) -> u64 {
        if self.inner.is_empty() || value_us > self.inner.max() {
            0
        } else {
            self.inner.count_between(value_us, self.inner.max())
        }
    }

    pub fn percentiles(&self) -> Percentiles {
        Percentiles {
            p50: self.quantile(0.5),
            p90: self.quantile(0.9),
            p99: self.quantile(0.99),
            p999: self.quantile(0.999),
            max: if self.is_empty() { 0 } else { self.inner.max() },
        }
    }

    /// The standard compressed HDR encoding (V2 + deflate) in base64, the form HdrHistogram
    /// log files use, so any HDR implementation (e.g. Python's `hdrh`) can read and merge it.
    pub fn encode_base64(&self) -> Result<String, HdrError> {
        let mut bytes = Vec::new();
        V2DeflateSerializer::new().serialize(&self.inner, &mut bytes)?;
        Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    /// Decodes [`Self::encode_base64`]'s output (used by tests and tools that merge runs).
    pub fn decode_base64(text: &str) -> Option<LatencyHistogram> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .ok()?;
        let mut inner: Histogram<u64> = hdrhistogram::serialization::Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .ok()?;
        inner.auto(true);
        Some(LatencyHistogram { inner })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_millisecond_values_are_exact_to_the_microsecond() {
        let mut h = LatencyHistogram::default();
        for v in 1..=1000 {
            h.record(v);
        }
        let p = h.percentiles();
        assert_eq!((p.p50, p.p90, p.p99, p.max), (500, 900, 990, 1000));
    }

    #[test]
    fn large_values_grow_the_histogram_within_three_digits() {
        let mut h = LatencyHistogram::default();
        h.record(10);
        h.record(30_000_000);
        let max = h.percentiles().max;
        assert!((max as f64 - 30e6).abs() / 30e6 < 1e-3, "{max}");
    }

    #[test]
    fn encoding_round_trips_and_merges() {
        let mut a = LatencyHistogram::default();
        let mut b = LatencyHistogram::default();
        (1..=100).for_each(|v| a.record(v));
        (101..=200).for_each(|v| b.record(v));
        let decoded = LatencyHistogram::decode_base64(&a.encode_base64().unwrap()).unwrap();
        assert_eq!(decoded.percentiles(), a.percentiles());
        a.merge(&b).unwrap();
        assert_eq!(a.len(), 200);
        assert_eq!(a.percentiles().p50, 100);
    }

    #[test]
    fn count_at_or_above_counts_the_tail() {
        let mut h = LatencyHistogram::default();
        (1..=1000).for_each(|v| h.record(v));
        h.record(200_000);
        assert_eq!(h.count_at_or_above(991), 11);
        assert_eq!(h.count_at_or_above(100_000), 1);
        assert_eq!(h.count_at_or_above(300_000), 0);
        assert_eq!(LatencyHistogram::default().count_at_or_above(1), 0);
    }

    #[test]
    fn empty_histogram_reports_zeros() {
        assert_eq!(
            LatencyHistogram::default().percentiles(),
            Percentiles::default()
        );
    }
}
