//! Cumulative latency histograms for the metrics endpoint and `stats`: per operation
//! type, the response time (arrival to reply sent, as in the stats file); per server, the
//! exchange time (message handed to the kernel to that server's answer parsed).
//!
//! Each worker records into its own unit (a mutex only the scrape ever contends for),
//! and a scrape sums the units. Buckets are fixed (Prometheus wants cumulative counts
//! per upper bound), from 50 µs to 10 s, dense around the 1 ms targets of the
//! experiments.

use std::sync::{Mutex, MutexGuard};

use crossbeam_utils::CachePadded;

use crate::metrics::OpKind;

/// Upper bounds of the buckets, in microseconds; one more bucket counts the rest (+Inf).
pub const BOUNDS_US: [u64; 22] = [
    50, 100, 200, 300, 400, 500, 750, 1_000, 1_500, 2_000, 3_000, 5_000, 7_500, 10_000, 20_000,
    50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 10_000_000,
];

/// One histogram: counts per bucket (not cumulative), their sum and count.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    pub buckets: [u64; BOUNDS_US.len() + 1],
    pub sum_us: u64,
    pub count: u64,
}

impl Histogram {
    pub fn record(&mut self, us: u64) {
        let bucket = BOUNDS_US.partition_point(|&bound| bound < us);
        self.buckets[bucket] += 1;
        self.sum_us += us;
        self.count += 1;
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            *mine += theirs;
        }
        self.sum_us += other.sum_us;
        self.count += other.count;
    }

    /// (upper bound in seconds, count in that bucket alone) per bucket, `+Inf` last:
    /// what `prometheus-client` takes (it writes the cumulative counts Prometheus wants).
    pub fn buckets_seconds(&self) -> Vec<(f64, u64)> {
        self.buckets
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let bound = BOUNDS_US.get(i).map_or(f64::INFINITY, |b| *b as f64 / 1e6);
                (bound, *n)
            })
            .collect()
    }

    /// Mean in microseconds (0 when empty).
    pub fn mean_us(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_us as f64 / self.count as f64
        }
    }
}

/// What one worker has recorded since the start.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latencies {
    pub ops: [Histogram; 4],
    /// By server id; grown when a server is first answered.
    pub servers: Vec<Histogram>,
}

impl Latencies {
    pub fn record_response(&mut self, op: OpKind, us: u64) {
        self.ops[op as usize].record(us);
    }

    pub fn record_server(&mut self, server: usize, us: u64) {
        if self.servers.len() <= server {
            self.servers.resize(server + 1, Histogram::default());
        }
        self.servers[server].record(us);
    }

    pub fn merge(&mut self, other: &Latencies) {
        for (mine, theirs) in self.ops.iter_mut().zip(&other.ops) {
            mine.merge(theirs);
        }
        if self.servers.len() < other.servers.len() {
            self.servers
                .resize(other.servers.len(), Histogram::default());
        }
        for (mine, theirs) in self.servers.iter_mut().zip(&other.servers) {
            mine.merge(theirs);
        }
    }
}

/// Every worker's latencies.
pub struct LatencyUnits(Box<[CachePadded<Mutex<Latencies>>]>);

impl LatencyUnits {
    pub fn new(workers: usize) -> Self {
        LatencyUnits((0..workers).map(|_| CachePadded::default()).collect())
    }

    pub fn lock(&self, worker: usize) -> MutexGuard<'_, Latencies> {
        self.0[worker].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The sum over every worker (each locked briefly in turn).
    pub fn total(&self) -> Latencies {
        let mut total = Latencies::default();
        for unit in self.0.iter() {
            total.merge(&unit.lock().unwrap_or_else(|p| p.into_inner()));
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_on_a_bound_counts_in_that_bucket_and_the_rest_in_inf() {
        let mut h = Histogram::default();
        h.record(50);
        h.record(51);
        h.record(20_000_000);
        let c = h.buckets_seconds();
        assert_eq!(c[0], (0.00005, 1));
        assert_eq!(c[1], (0.0001, 1));
        assert_eq!(*c.last().unwrap(), (f64::INFINITY, 1));
        assert_eq!(c.iter().map(|b| b.1).sum::<u64>(), h.count);
        assert_eq!((h.count, h.sum_us), (3, 20_000_101));
    }

    #[test]
    fn units_merge_per_op_and_per_server() {
        let units = LatencyUnits::new(2);
        units.lock(0).record_response(OpKind::Get, 120);
        units.lock(1).record_response(OpKind::Get, 80);
        units.lock(1).record_server(3, 70);
        let total = units.total();
        assert_eq!(total.ops[OpKind::Get as usize].count, 2);
        assert_eq!(total.ops[OpKind::Get as usize].mean_us(), 100.0);
        assert_eq!(total.servers.len(), 4);
        assert_eq!(total.servers[3].count, 1);
    }
}
