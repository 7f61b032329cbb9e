//! Wiring: each task's handles, the accept loop, the workers, the statistics writer,
//! live reload, and the graceful shutdown.
//!
//! Each task gets the handles it uses and nothing else: a connection task a
//! [`NetContext`] and its listener's [`PoolSlot`], a worker a [`WorkerContext`], the
//! statistics writer, `stats` and the metrics a read-only [`Observed`].
//!
//! [`run`] takes its listeners, its shutdown signal and its reload requests from the
//! caller, so tests bind `127.0.0.1:0`, reload and stop the server when they like.

use std::future::{poll_fn, Future};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinSet;
use tracing::{error, info, warn};

use crate::budget::MemoryBudget;
use crate::client::ClientConn;
use crate::client_stream;
use crate::config::Config;
use crate::connection;
use crate::connection::{NetContext, NetSettings};
use crate::counters::Counters;
use crate::endpoint::{Accepted, Endpoint, Listener};
use crate::health::{self, Health};
use crate::histograms::LatencyUnits;
use crate::log_limit::LogLimit;
use crate::observed::{NetCounters, Observed, PoolSlot};
use crate::pool_build::{build_pool, PoolError};
use crate::queue::RequestQueue;
use crate::stats_file::{RunSummary, StatsWriter};
use crate::stats_units::StatsUnits;
use crate::tls::{ListenerTls, TlsError};
use crate::worker::Worker;
use crate::worker::{WorkerContext, WorkerSettings};

/// The proxy's parts, wired once at start.
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
        let queue = Arc::new(RequestQueue::new(config.workers));
        let budget = Arc::new(MemoryBudget::new(config.memory_budget));
        let counters: Arc<[CachePadded<Counters>]> = (0..config.workers)
            .map(|_| CachePadded::default())
            .collect();
        let net = Arc::new(NetCounters::default());
        let stats = Arc::new(StatsUnits::new(config.workers, health.len(), now));
        let latencies = Arc::new(LatencyUnits::new(config.workers));
        let observed = Arc::new(Observed {
            counters: Arc::clone(&counters),
            latencies: Arc::clone(&latencies),
            net: Arc::clone(&net),
            health: Arc::clone(&health),
            budget: Arc::clone(&budget),
            queue: Arc::clone(&queue),
            listeners,
            started: now,
            workers: config.workers,
            pipeline: config.pipeline,
            sharded: config.sharded,
        });
        Ok(Parts {
            net: Arc::new(NetContext {
                settings: NetSettings {
                    limits: config.limits,
                    max_inflight: config.max_inflight,
                    idle_timeout: config.idle_timeout,
                    max_pending_bytes: config.max_pending_bytes,
                },
                queue: Arc::clone(&queue),
                budget: Arc::clone(&budget),
                log_limit: LogLimit::new(config.log_lines_per_second),
                net,
                observed: Arc::clone(&observed),
            }),
            worker: WorkerContext {
                queue,
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
        mut reloads: mpsc::Receiver<()>,
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
            ))
        });
        let health = Arc::clone(&parts.worker.health);
        let mut probes = JoinSet::new();
        let mut probed = 0;
        spawn_probes(&health, &config, &mut probed, &mut probes, &stop_rx);
        let mut workers = JoinSet::new();
        for id in 0..config.workers {
            workers.spawn(Worker::new(id, parts.worker.clone()).run());
        }
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
        let mut connections = JoinSet::new();
        {
            let accepting = accept_loop(
                &listeners,
                &slots,
                &tls,
                &parts.net,
                config.max_connections,
                &stop_rx,
                &mut connections,
                shutdown,
            );
            tokio::pin!(accepting);
            loop {
                tokio::select! {
                    _ = &mut accepting => break,
                    Some(()) = reloads.recv() => {
                        reload(&config, &slots, &tls, &health);
                        spawn_probes(&health, &config, &mut probed, &mut probes, &stop_rx);
                    }
                }
            }
        }
        drop(listeners);

        info!("shutting down: no new connections; answering requests already received");
        let _ = stop_tx.send(true);
        let queue = Arc::clone(&parts.worker.queue);
        let drain_timeout = config.drain_timeout;
        let drained = tokio::time::timeout(drain_timeout, async {
            while connections.join_next().await.is_some() {}
            queue.close();
            while workers.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            warn!(
                queued = queue.len(),
                timeout_s = drain_timeout.as_secs_f64(),
                "drain timeout: closing with requests unanswered"
            );
            connections.abort_all();
            queue.close();
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

/// Rereads `--config` and gives each listener its new pool: requests decoded from now on
/// use it, requests already decoded finish on the old one, and no connection is
/// touched. A file that cannot be read, does not parse, or changes the listeners is
/// refused with its reason logged, and the old configuration keeps serving.
///
/// Certificates are reread too (with the command line's pool as well): a listener's
/// from the file names of the new configuration (or the old ones), a pool's server side
/// when its pool is rebuilt. A file that cannot be read leaves the old one in use.
pub fn reload(
    config: &Config,
    slots: &[Arc<PoolSlot>],
    tls: &[Option<Arc<ListenerTls>>],
    health: &Health,
) {
    let Some(path) = &config.config_file else {
        reload_listener_tls(config, tls, None);
        if config.listeners.iter().any(|l| l.pool.server_tls.is_some()) {
            // The command line's pool: rebuilt only to reread its server-side files.
            let pools = config
                .listeners
                .iter()
                .map(|l| build_pool(&l.pool, health))
                .collect::<Result<Vec<_>, _>>();
            match pools {
                Ok(pools) => {
                    for (slot, pool) in slots.iter().zip(pools) {
                        slot.replace(pool);
                    }
                    info!("server TLS files reread");
                }
                Err(e) => error!(error = %e, "server TLS files not reread; the old ones stay"),
            }
        } else if tls.iter().all(Option::is_none) {
            warn!("SIGHUP: no --config file to reload (the command line's pool stays)");
        }
        return;
    };
    let listeners =
        match crate::config::file::load(path, config.server_timeout, config.failure_limit) {
            Ok(listeners) => listeners,
            Err(e) => {
                error!(error = %e, "reload refused; the old configuration keeps serving");
                return;
            }
        };
    let old: Vec<&Endpoint> = config.listeners.iter().map(|l| &l.listen).collect();
    let new: Vec<&Endpoint> = listeners.iter().map(|l| &l.listen).collect();
    let tls_changed = config
        .listeners
        .iter()
        .zip(&listeners)
        .any(|(a, b)| a.tls.is_some() != b.tls.is_some());
    if tls_changed {
        error!(
            "reload refused: TLS was turned on or off on a listener (that needs a \
                restart); the old configuration keeps serving"
        );
        return;
    }
    if old != new {
        error!(old = ?old, new = ?new,
               "reload refused: the listen addresses changed (that needs a restart); \
                the old configuration keeps serving");
        return;
    }
    let pools = match listeners
        .iter()
        .map(|l| build_pool(&l.pool, health))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(pools) => pools,
        Err(e) => {
            error!(error = %e, "reload refused; the old configuration keeps serving");
            return;
        }
    };
    for (slot, pool) in slots.iter().zip(pools) {
        info!(pool = %pool.name, servers = ?pool.servers.iter().map(|s| s.addr.to_string()).collect::<Vec<_>>(),
              mode = ?pool.mode, "reloaded pool");
        slot.replace(pool);
    }
    reload_listener_tls(config, tls, Some(&listeners));
    info!(path = %path.display(), "configuration reloaded");
}

/// Rereads each TLS listener's certificate and key (and client CA), from `new`'s file
/// names if given; a listener whose files fail keeps its old configuration.
fn reload_listener_tls(
    config: &Config,
    tls: &[Option<Arc<ListenerTls>>],
    new: Option<&[crate::config::ListenerSpec]>,
) {
    for (i, (spec, tls)) in config.listeners.iter().zip(tls).enumerate() {
        let Some(tls) = tls else { continue };
        let new_spec = new.and_then(|n| n.get(i)).and_then(|l| l.tls.as_ref());
        match tls.reload(new_spec) {
            Ok(()) => info!(listen = %spec.listen, "TLS certificate reread"),
            Err(e) => error!(listen = %spec.listen, error = %e,
                             "TLS certificate not reread; the old one keeps serving"),
        }
    }
}

/// Answers a connection past the limit and closes it (bounded in time). A TLS
/// listener's client would not understand a plain line: it is closed without one.
async fn refuse(accepted: Accepted, tls: bool) {
    use tokio::io::{AsyncWrite, AsyncWriteExt};
    async fn answer(mut stream: impl AsyncWrite + Unpin, tls: bool) {
        if !tls {
            let _ = stream
                .write_all(b"ERROR Too many open connections\r\n")
                .await;
        }
        let _ = stream.shutdown().await;
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        match accepted {
            Accepted::Tcp(s) => answer(s, tls).await,
            Accepted::Unix(s) => answer(s, tls).await,
        }
    })
    .await;
}

/// Accepts on every listener until `shutdown` resolves.
#[allow(clippy::too_many_arguments)]
async fn accept_loop(
    listeners: &[Listener],
    slots: &[Arc<PoolSlot>],
    tls: &[Option<Arc<ListenerTls>>],
    net: &Arc<NetContext>,
    max_connections: usize,
    stop_rx: &watch::Receiver<bool>,
    connections: &mut JoinSet<()>,
    shutdown: impl Future<Output = ()>,
) {
    let limit = Arc::new(Semaphore::new(max_connections));
    let mut next_id = 0u64;
    let mut backoff = Duration::from_millis(5);
    tokio::pin!(shutdown);
    loop {
        let any_listener = poll_fn(|cx| {
            for (index, listener) in listeners.iter().enumerate() {
                if let Poll::Ready(accepted) = listener.poll_accept(cx) {
                    return Poll::Ready((index, accepted));
                }
            }
            Poll::Pending
        });
        let (listener, accepted) = tokio::select! {
            _ = &mut shutdown => return,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = any_listener => accepted,
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
            let refused = net.net.rejected_connections.fetch_add(1, Ordering::Relaxed);
            if refused.is_multiple_of(1000) {
                warn!(%peer, limit = max_connections, refused = refused + 1,
                      "too many open connections: refusing");
            }
            tokio::spawn(refuse(stream, tls[listener].is_some()));
            continue;
        };
        if let Accepted::Tcp(s) = &stream {
            let _ = s.set_nodelay(true);
        }
        next_id += 1;
        let id = next_id;
        net.net.total_connections.fetch_add(1, Ordering::Relaxed);
        net.net.curr_connections.fetch_add(1, Ordering::Relaxed);
        let net = Arc::clone(net);
        let slot = Arc::clone(&slots[listener]);
        let tls = tls[listener].clone();
        let mut stop = stop_rx.clone();
        connections.spawn(async move {
            // The handshake runs here, not in the accept loop: a slow or failed one
            // costs only this connection.
            let established = tokio::select! {
                established = client_stream::establish(stream, tls.as_deref()) => established,
                _ = stop.changed() => {
                    net.net.curr_connections.fetch_sub(1, Ordering::Relaxed);
                    return;
                }
            };
            let (reader, writer) = match established {
                Ok(halves) => halves,
                Err(e) => {
                    net.net.tls_handshake_errors.fetch_add(1, Ordering::Relaxed);
                    net.net.curr_connections.fetch_sub(1, Ordering::Relaxed);
                    if net.log_limit.allow() {
                        warn!(conn = id, %peer, error = %e, "client connection closed");
                    }
                    return;
                }
            };
            let conn = Arc::new(ClientConn::new(id, peer, writer, Arc::clone(&net.budget)));
            connection::serve(conn, reader, net, slot, stop).await;
            drop(permit);
        });
    }
}
