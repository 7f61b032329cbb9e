//! A worker: its engine ([`engine::Engine`], every decision: plans, stand-ins, the reply
//! rules, timeouts, refusals, out-of-step connections, the stage timestamps), what it
//! runs with, and what its actions become ([`outputs`]). The event loop
//! (`evloop/worker_slot.rs`) owns its server sockets and feeds it.

use std::sync::Arc;
use std::time::Duration;

use crate::budget::MemoryBudget;
use crate::counters::Counters;
use crate::health::Health;
use crate::histograms::LatencyUnits;
use crate::stats_units::StatsUnits;
use crossbeam_utils::CachePadded;

pub mod engine;
pub mod outputs;

/// What a worker runs with besides its handles.
#[derive(Debug, Clone, Copy)]
pub struct WorkerSettings {
    pub pipeline: usize,
    /// Connection attempts give up after this long (the default server timeout).
    pub connect_timeout: Duration,
    pub backoff_max: Duration,
    pub max_reply_bytes: usize,
}

/// A worker's handles: the server health it reports to and reads, the budget its reply buffers are charged to, its counters and its statistics
/// unit.
#[derive(Clone)]
pub struct WorkerContext {
    pub health: Arc<Health>,
    pub budget: Arc<MemoryBudget>,
    pub counters: Arc<[CachePadded<Counters>]>,
    pub stats: Arc<StatsUnits>,
    /// Cumulative latency histograms (the metrics endpoint, `stats`).
    pub latencies: Arc<LatencyUnits>,
    pub settings: WorkerSettings,
}
