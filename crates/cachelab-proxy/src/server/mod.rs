//! Wiring: each task's handles, the workers, the statistics writer, and the graceful
//! shutdown; the event loop ([`crate::evloop`]) and live reload ([`crate::reload`])
//! hang off it.
//!
//! Each task gets the handles it uses and nothing else: a connection task a
//! [`NetContext`] and its listener's [`PoolSlot`], a worker a [`WorkerContext`], the
//! statistics writer, `stats` and the metrics a read-only [`Observed`].
//!
//! [`run`] takes its listeners, its shutdown signal and its reload requests from the
//! caller, so tests bind `127.0.0.1:0`, reload and stop the server when they like.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_utils::CachePadded;
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tracing::info;

use crate::budget::MemoryBudget;
use crate::client::session::NetContext;
use crate::config::Config;
use crate::counters::Counters;
use crate::endpoint::{Endpoint, Listener};
use crate::health::{self, Health};
use crate::histograms::LatencyUnits;
use crate::observed::{NetCounters, Observed, PoolSlot};
use crate::pool_build::{build_pool, PoolError};
use crate::queue::QueueLength;
use crate::stats_file::{RunSummary, StatsWriter};
use crate::stats_units::StatsUnits;
use crate::tls::{ListenerTls, TlsError};
use crate::worker::{WorkerContext, WorkerSettings};

/// The proxy's parts, wired once at start.
mod loops;

use loops::{serve_loop, Reloading};

pub struct Parts {
    pub net: Arc<NetContext>,
    pub worker: WorkerContext,
    pub observed: Arc<Observed>,
    pub stats: Arc<StatsUnits>,
}

impl Parts {
    pub fn new(config: &Config) -> Result<Parts, ServerError> {
        let now = Instant::now();
        let health = Arc::new(Health::new(&[], config.failure_limit));
        let listeners = config
            .listeners
            .iter()
            .map(|l| {
                Ok((
                    l.listen.clone(),
                    Arc::new(PoolSlot::new(build_pool(&l.pool, &health)?)),
                ))
            })
            .collect::<Result<Vec<_>, ServerError>>()?;
        // One queue per event loop, and every loop's workers numbered in one range.
        let queues: Arc<[Arc<QueueLength>]> = (0..config.loops)
            .map(|_| Arc::new(QueueLength::default()))
            .collect();
        let workers = config.workers * config.loops;
        let budget = Arc::new(MemoryBudget::new(config.memory_budget));
        let counters: Arc<[CachePadded<Counters>]> =
            (0..workers).map(|_| CachePadded::default()).collect();
        let net = Arc::new(NetCounters::default());
        let stats = Arc::new(StatsUnits::new(workers, config.loops, health.len(), now));
        let latencies = Arc::new(LatencyUnits::new(workers));
        let observed = Arc::new(Observed {
            counters: Arc::clone(&counters),
            latencies: Arc::clone(&latencies),
            net: Arc::clone(&net),
            health: Arc::clone(&health),
            budget: Arc::clone(&budget),
            queues: Arc::clone(&queues),
            listeners,
            started: now,
            workers: config.workers,
            loops: config.loops,
            pipeline: config.pipeline,
            share_connections: config.share_connections,
            merge_gets: config.merge_gets,
            sharded: config.sharded,
        });
        Ok(Parts {
            net: Arc::new(NetContext::new(config, Arc::clone(&observed))),
            worker: WorkerContext {
                health,
                budget,
                counters,
                stats: Arc::clone(&stats),
                latencies,
                settings: WorkerSettings {
                    pipeline: config.pipeline,
                    connect_timeout: config.server_timeout,
                    backoff_max: config.backoff_max,
                    max_reply_bytes: config.max_reply_bytes,
                },
            },
            observed,
            stats,
        })
    }
}

#[derive(Debug, Error)]
pub enum ServerError {
    #[error("cannot create the stats file {path}: {1}", path = .0.display())]
    StatsFile(std::path::PathBuf, std::io::Error),
    #[error("cannot listen for metrics on {0}: {1}")]
    Metrics(std::net::SocketAddr, std::io::Error),
    #[error(transparent)]
    Pool(#[from] PoolError),
    #[error("{0} listeners for {1} configured listeners")]
    Listeners(usize, usize),
    #[error("pool {0}: {1}")]
    Tls(String, TlsError),
}

/// [`start`] then [`Ready::serve`], for callers that announce nothing in between.
pub async fn run<L: Into<Listener>>(
    listeners: Vec<L>,
    config: Config,
    shutdown: impl Future<Output = ()>,
    reloads: mpsc::Receiver<()>,
) -> Result<RunSummary, ServerError> {
    Ok(start(listeners, config)
        .await?
        .serve(shutdown, reloads)
        .await)
}

/// A proxy holding everything it needs to serve (its listeners, their TLS settings, the
/// stats file, the metrics listener, its parts) and serving nothing yet. The split
/// exists so the caller announces `listening on` only once nothing can fail any more: a
/// script that waits for that line must not see it from a proxy about to exit.
pub struct Ready {
    listeners: Vec<Listener>,
    /// Each listener's TLS, in the same order (None: plain).
    tls: Vec<Option<Arc<ListenerTls>>>,
    config: Config,
    parts: Parts,
    stats: StatsWriter,
    metrics: Option<TcpListener>,
}

/// Acquires everything [`Ready::serve`] needs, failing before anything is served:
/// builds the pools, loads the listeners' certificates, creates the stats file and
/// binds the metrics endpoint. `listeners` are bound by the caller, one per configured
/// listener in order.
pub async fn start<L: Into<Listener>>(
    listeners: Vec<L>,
    config: Config,
) -> Result<Ready, ServerError> {
    let listeners: Vec<Listener> = listeners.into_iter().map(Into::into).collect();
    if listeners.len() != config.listeners.len() {
        return Err(ServerError::Listeners(
            listeners.len(),
            config.listeners.len(),
        ));
    }
    let parts = Parts::new(&config)?;
    let tls = config
        .listeners
        .iter()
        .map(|l| {
            l.tls
                .clone()
                .map(|spec| ListenerTls::new(spec).map(Arc::new))
                .transpose()
                .map_err(|e| ServerError::Tls(l.pool.name.clone(), e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let stats = StatsWriter::create(
        Arc::clone(&parts.observed),
        Arc::clone(&parts.stats),
        &config,
    )
    .map_err(|e| ServerError::StatsFile(config.stats_file.clone().unwrap_or_default(), e))?;
    let metrics = match config.metrics_addr {
        Some(addr) => {
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|e| ServerError::Metrics(addr, e))?;
            info!(addr = %listener.local_addr().map_err(|e| ServerError::Metrics(addr, e))?,
                  "serving Prometheus metrics");
            Some(listener)
        }
        None => None,
    };
    Ok(Ready {
        listeners,
        tls,
        config,
        parts,
        stats,
        metrics,
    })
}

impl Ready {
    /// The client listeners' addresses, in the configuration's order (the port chosen
    /// for port 0).
    pub fn local_addrs(&self) -> std::io::Result<Vec<Endpoint>> {
        self.listeners.iter().map(Listener::local).collect()
    }

    /// Serves until `shutdown` resolves, then stops accepting, answers every request
    /// already received (within the drain timeout), writes the last statistics window
    /// and returns the run's summary. Each message on `reloads` rereads `--config` (see
    /// [`reload`]).
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()>,
        reloads: mpsc::Receiver<()>,
    ) -> RunSummary {
        let Ready {
            listeners,
            tls,
            config,
            parts,
            stats,
            metrics,
        } = self;
        let (stop_tx, stop_rx) = watch::channel(false);
        let (stats_stop_tx, stats_stop_rx) = watch::channel(false);
        let stats_task = tokio::spawn(stats.run(stats_stop_rx));
        let metrics = metrics.map(|listener| {
            tokio::spawn(crate::metrics_http::serve(
                listener,
                Arc::clone(&parts.observed),
                Arc::clone(&parts.stats),
            ))
        });
        let health = Arc::clone(&parts.worker.health);
        let mut probes = JoinSet::new();
        let mut probed = 0;
        spawn_probes(&health, &config, &mut probed, &mut probes, &stop_rx);
        info!(
            listen = %config.listen, workers = config.workers,
            servers = ?config.servers, sharded = config.sharded,
            pools = config.listeners.len(),
            "cachelab-proxy started"
        );
        let slots: Vec<Arc<PoolSlot>> = parts
            .observed
            .listeners
            .iter()
            .map(|(_, slot)| Arc::clone(slot))
            .collect();
        let reloading = Reloading {
            config: &config,
            slots: &slots,
            tls: &tls,
            health: &health,
            probed: &mut probed,
            probes: &mut probes,
            stop: &stop_rx,
        };
        serve_loop(listeners, &parts, &config, shutdown, reloads, reloading).await;
        let _ = stop_tx.send(true);
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
        summary
    }
}

/// Starts a probe for every server registered since the last call.
fn spawn_probes(
    health: &Arc<Health>,
    config: &Config,
    probed: &mut usize,
    probes: &mut JoinSet<()>,
    stop: &watch::Receiver<bool>,
) {
    while *probed < health.len() {
        probes.spawn(health::probe(
            Arc::clone(health),
            *probed,
            config.server_timeout,
            config.backoff_max,
            stop.clone(),
        ));
        *probed += 1;
    }
}
