//! Every worker's statistics unit, side by side: a worker locks its own for every
//! request (uncontended), the statistics writer each once per window.

use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use crossbeam_utils::CachePadded;

use crate::metrics::WorkerStats;

/// Every worker's statistics unit; each is locked by its worker for every request
/// (uncontended) and by the statistics writer once per window.
pub struct StatsUnits(Box<[CachePadded<Mutex<WorkerStats>>]>);

impl StatsUnits {
    pub fn new(workers: usize, servers: usize, now: Instant) -> Self {
        StatsUnits(
            (0..workers)
                .map(|_| CachePadded::new(Mutex::new(WorkerStats::new(servers, now))))
                .collect(),
        )
    }

    pub fn lock(&self, worker: usize) -> MutexGuard<'_, WorkerStats> {
        self.0[worker]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
