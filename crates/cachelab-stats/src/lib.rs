//! Online statistics for measurements, with no I/O and no allocation on the record path
//! (beyond an HDR histogram growing to a new maximum).
//!
//! - [`Welford`]: count, mean and M2 of Welford's online algorithm, mergeable across
//!   workers with Chan et al.'s pairwise formula.
//! - [`BucketHistogram`]: fixed-width buckets (100 µs in the middleware) with an overflow
//!   bucket, the histogram the harness plots.
//! - [`LatencyHistogram`]: an HDR histogram in microseconds for exact-enough percentiles
//!   (three significant digits: values under 2.048 ms are recorded to the microsecond).

mod buckets;
mod hdr;
mod welford;

pub use buckets::BucketHistogram;
pub use hdr::{HdrError, LatencyHistogram, Percentiles};
pub use welford::Welford;
