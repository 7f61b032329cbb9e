//! Wiring: the shared state, the accept loop, the workers, the statistics writer, and the
//! graceful shutdown.
//!
//! [`run`] takes its listener and its shutdown signal from the caller, so tests bind
//! `127.0.0.1:0` and stop the server when they like.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tracing::{error, info, warn};

use crate::budget::MemoryBudget;
use crate::client::ClientConn;
use crate::config::Config;
use crate::connection;
use crate::counters::Counters;
use crate::health::{self, Health};
use crate::job::Job;
use crate::log_limit::LogLimit;
use crate::metrics::WorkerStats;
use crate::queue::RequestQueue;
use crate::routing::RoundRobin;
use crate::stats_file::{RunSummary, StatsWriter};
use crate::worker::Worker;

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
}

/// State shared by the net layer, the workers and the statistics writer.
pub struct Shared {
    pub config: Config,
    pub health: Arc<Health>,
    pub budget: Arc<MemoryBudget>,
    /// Bad-request and similar warnings for the whole proxy.
    pub log_limit: LogLimit,
    pub queue: RequestQueue<Job>,
    pub rr: RoundRobin,
    pub counters: Box<[CachePadded<Counters>]>,
    pub net: NetCounters,
    pub started: Instant,
    worker_stats: Box<[CachePadded<Mutex<WorkerStats>>]>,
}

impl Shared {
    pub fn new(config: Config) -> Self {
        let now = Instant::now();
        let servers = config.servers.len();
        Shared {
            health: Arc::new(Health::new(&config.servers, config.failure_limit)),
            budget: Arc::new(MemoryBudget::new(config.memory_budget)),
            log_limit: LogLimit::new(config.log_lines_per_second),
            queue: RequestQueue::new(config.workers),
            rr: RoundRobin::new(servers),
            counters: (0..config.workers)
                .map(|_| CachePadded::default())
                .collect(),
            net: NetCounters::default(),
            started: now,
            worker_stats: (0..config.workers)
                .map(|_| CachePadded::new(Mutex::new(WorkerStats::new(servers, now))))
                .collect(),
            config,
        }
    }

    /// The statistics unit of one worker; contended only at window boundaries.
    pub fn lock_worker_stats(&self, worker: usize) -> MutexGuard<'_, WorkerStats> {
        self.worker_stats[worker]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[derive(Debug, Error)]
pub enum ServerError {
    #[error("cannot create the stats file: {0}")]
    StatsFile(std::io::Error),
    #[error("cannot listen for metrics on {0}: {1}")]
    Metrics(std::net::SocketAddr, std::io::Error),
}

/// Serves until `shutdown` resolves, then stops accepting, answers every request already
/// received (within the drain timeout), writes the last statistics window and returns
/// the run's summary.
pub async fn run(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> Result<RunSummary, ServerError> {
    let shared = Arc::new(Shared::new(config));
    let stats = StatsWriter::create(Arc::clone(&shared), shared.config.stats_file.as_deref())
        .map_err(ServerError::StatsFile)?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let (stats_stop_tx, stats_stop_rx) = watch::channel(false);
    let stats_task = tokio::spawn(stats.run(stats_stop_rx));

    let metrics = match shared.config.metrics_addr {
        Some(addr) => {
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|e| ServerError::Metrics(addr, e))?;
            info!(addr = %listener.local_addr().map_err(|e| ServerError::Metrics(addr, e))?,
                  "serving Prometheus metrics");
            Some(tokio::spawn(crate::metrics_http::serve(
                listener,
                Arc::clone(&shared),
            )))
        }
        None => None,
    };
    let mut probes = JoinSet::new();
    for server in 0..shared.config.servers.len() {
        probes.spawn(health::probe(
            Arc::clone(&shared.health),
            server,
            shared.config.server_timeout,
            shared.config.backoff_max,
            stop_rx.clone(),
        ));
    }
    let mut workers = JoinSet::new();
    for id in 0..shared.config.workers {
        workers.spawn(Worker::new(id, Arc::clone(&shared)).run());
    }
    info!(
        listen = %shared.config.listen, workers = shared.config.workers,
        servers = ?shared.config.servers, sharded = shared.config.sharded,
        "cachelab-proxy started"
    );

    let mut connections = JoinSet::new();
    accept_loop(&listener, &shared, &stop_rx, &mut connections, shutdown).await;
    drop(listener);

    info!("shutting down: no new connections; answering requests already received");
    let _ = stop_tx.send(true);
    let drain_timeout = shared.config.drain_timeout;
    let drained = tokio::time::timeout(drain_timeout, async {
        while connections.join_next().await.is_some() {}
        shared.queue.close();
        while workers.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        warn!(
            queued = shared.queue.len(),
            timeout_s = drain_timeout.as_secs_f64(),
            "drain timeout: closing with requests unanswered"
        );
        connections.abort_all();
        shared.queue.close();
        workers.abort_all();
    }
    if let Some(metrics) = metrics {
        metrics.abort();
    }
    probes.abort_all();
    let _ = stats_stop_tx.send(true);
    let summary = match stats_task.await {
        Ok(summary) => summary,
        Err(e) => panic!("statistics writer failed: {e}"),
    };
    info!("stopped");
    Ok(summary)
}

/// Answers a connection past the limit and closes it (bounded in time).
async fn refuse(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream
            .write_all(b"ERROR Too many open connections\r\n")
            .await;
        let _ = stream.shutdown().await;
    })
    .await;
}

async fn accept_loop(
    listener: &TcpListener,
    shared: &Arc<Shared>,
    stop_rx: &watch::Receiver<bool>,
    connections: &mut JoinSet<()>,
    shutdown: impl Future<Output = ()>,
) {
    let limit = Arc::new(Semaphore::new(shared.config.max_connections));
    let mut next_id = 0u64;
    let mut backoff = Duration::from_millis(5);
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => return,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(pair) => {
                backoff = Duration::from_millis(5);
                pair
            }
            Err(e) => {
                // Typically out of file descriptors: wait and retry rather than spin.
                error!(error = %e, "accept failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&limit).try_acquire_owned() else {
            // memcached's answer past its connection limit; the client learns why instead
            // of waiting in the backlog forever.
            let refused = shared
                .net
                .rejected_connections
                .fetch_add(1, Ordering::Relaxed);
            if refused.is_multiple_of(1000) {
                warn!(%peer, limit = shared.config.max_connections, refused = refused + 1,
                      "too many open connections: refusing");
            }
            tokio::spawn(refuse(stream));
            continue;
        };
        let _ = stream.set_nodelay(true);
        next_id += 1;
        shared.net.total_connections.fetch_add(1, Ordering::Relaxed);
        shared.net.curr_connections.fetch_add(1, Ordering::Relaxed);
        let (read_half, write_half) = stream.into_split();
        let conn = Arc::new(ClientConn::new(
            next_id,
            peer,
            write_half,
            Arc::clone(&shared.budget),
        ));
        let shared = Arc::clone(shared);
        let stop = stop_rx.clone();
        connections.spawn(async move {
            connection::serve(conn, read_half, shared, stop).await;
            drop(permit);
        });
    }
}
