//! Read-only views of the whole proxy for the `stats` command, the metrics endpoint and
//! the statistics writer, and the net layer's counters they read. Nothing is written
//! through an [`Observed`]; each part writes its own counters.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use crossbeam_utils::CachePadded;

use crate::budget::MemoryBudget;
use crate::counters::Counters;
use crate::endpoint::Endpoint;
use crate::health::Health;
use crate::histograms::LatencyUnits;
use crate::queue::QueueLength;
use crate::routing::plan::Pool;

/// Counters kept by the net layer.
#[derive(Debug, Default)]
pub struct NetCounters {
    pub curr_connections: AtomicU64,
    pub total_connections: AtomicU64,
    /// Requests decoded (forwarded or answered locally), not counting rejected ones.
    pub arrivals: AtomicU64,
    pub bad_requests: AtomicU64,
    /// Connections refused because --max-connections were open.
    pub rejected_connections: AtomicU64,
    /// TLS handshakes with clients that failed or timed out (memcached's
    /// `ssl_handshake_errors`).
    pub tls_handshake_errors: AtomicU64,
    /// Times a client got nothing more dispatched until it read or its requests were
    /// answered (`--max-inflight`, `--max-pending-bytes`; see `admission`).
    pub client_pauses: AtomicU64,
}

/// The pool behind one listener, replaced whole by a reload. Requests take the pool
/// current when they are decoded and keep it until they are answered.
pub struct PoolSlot {
    generation: AtomicU64,
    pool: RwLock<Arc<Pool>>,
}

impl PoolSlot {
    pub fn new(pool: Pool) -> Self {
        PoolSlot {
            generation: AtomicU64::new(0),
            pool: RwLock::new(Arc::new(pool)),
        }
    }

    /// Bumped by every reload; a connection compares it with the generation of the
    /// pool it holds (one load, no lock, per read from the client).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub fn current(&self) -> Arc<Pool> {
        Arc::clone(&self.pool.read().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn replace(&self, pool: Pool) {
        *self.pool.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(pool);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
}

/// A read-only view of the whole proxy, for the `stats` command, the metrics endpoint
/// and the statistics writer: nothing here is written through it.
pub struct Observed {
    pub counters: Arc<[CachePadded<Counters>]>,
    pub latencies: Arc<LatencyUnits>,
    pub net: Arc<NetCounters>,
    pub health: Arc<Health>,
    pub budget: Arc<MemoryBudget>,
    /// Each event loop's FCFS queue.
    pub queues: Arc<[Arc<QueueLength>]>,
    /// Per listener, its address and pool.
    pub listeners: Vec<(Endpoint, Arc<PoolSlot>)>,
    pub started: Instant,
    /// Workers per event loop.
    pub workers: usize,
    /// Event loops (`--loops`), each with `workers` workers and its own queue.
    pub loops: usize,
    pub pipeline: usize,
    /// `--share-connections`.
    pub share_connections: bool,
    /// `--merge-gets`.
    pub merge_gets: bool,
    pub sharded: bool,
}

impl Observed {
    /// Requests waiting in every loop's queue.
    pub fn queue_len(&self) -> usize {
        self.queues.iter().map(|q| q.get()).sum()
    }
}
