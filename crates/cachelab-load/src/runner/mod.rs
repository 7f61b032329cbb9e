//! The I/O shell around the pure modules: `--threads` OS threads, each with its own
//! current-thread tokio runtime driving its `--clients` connections (memtier's structure,
//! without locks on the hot path). Threads connect first; the clock starts only when every
//! connection is open, so connection set-up (connect and TLS handshake) is never in
//! request latency: it is measured apart ([`crate::setup`]).

mod clock;
mod conn;
mod link;
mod replay;
mod stamping;
mod thread;
mod ticker;
mod timer;
mod wire;

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cachelab_placement::entry::Address;
use thiserror::Error;

use crate::config::{AddressFamily, Config};
use crate::record::{Recorder, Window};
use crate::start::StartError;
use crate::tls::TlsError;
use crate::trace::TraceError;
use cachelab_net::endpoint::Endpoint;
use link::{Target, TlsTarget};

pub use clock::{monotonic_ns, realtime_ns};

/// How long, after `--test-time`, outstanding requests may still be answered before they
/// count as timeouts and the run ends (never more than `--reply-timeout`).
pub const DRAIN_GRACE: Duration = Duration::from_secs(2);

#[derive(Debug, Error)]
pub enum RunError {
    #[error("cannot resolve {server}: {source}")]
    Resolve {
        server: String,
        source: std::io::Error,
    },
    /// The cause is part of the line, not a `source`: a reporter that prints the chain
    /// would print it again.
    #[error("cannot connect to {server}: {cause}")]
    Connect {
        server: String,
        cause: std::io::Error,
    },
    #[error("TLS handshake with {server} failed: {reason}")]
    Handshake { server: String, reason: String },
    #[error("{0}")]
    Tls(#[from] TlsError),
    #[error("cannot start a load thread: {0}")]
    Thread(std::io::Error),
    #[error("{0} (connecting took until then)")]
    StartMissed(StartError),
    #[error("{path}: {error}")]
    Trace { path: String, error: TraceError },
}

/// What a run measured.
#[derive(Debug)]
pub struct RunResult {
    pub recorder: Recorder,
    pub started_unix_ms: u64,
    /// `--start-at`: how late the clock started after the instant asked for, in µs.
    pub start_late_us: Option<u64>,
    /// From the start of the clock until every connection finished.
    pub duration_ns: u64,
}

/// Everything one thread needs to run its share.
pub(crate) struct ThreadPlan {
    pub index: usize,
    pub config: Config,
    /// One server, or each server of a `--shard` pool in order.
    pub targets: Vec<Target>,
    pub window: Window,
    /// Set when any thread failed to connect: then nobody runs.
    pub failure: Arc<Mutex<Option<RunError>>>,
    pub barrier: Arc<Barrier>,
    pub origin_ns: Arc<AtomicU64>,
}

/// The summary window for a configuration.
pub fn window(config: &Config) -> Window {
    Window {
        start_ns: config.warmup.as_nanos() as u64,
        end_ns: config
            .test_time
            .map_or(u64::MAX, |t| (t - config.cooldown).as_nanos() as u64),
    }
}

pub fn resolve(config: &Config) -> Result<Vec<SocketAddr>, RunError> {
    resolve_host(&config.server, config.port, config.family)
}

fn resolve_host(host: &str, port: u16, family: AddressFamily) -> Result<Vec<SocketAddr>, RunError> {
    let server = format!("{host}:{port}");
    let mut addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|source| RunError::Resolve {
            server: server.clone(),
            source,
        })?
        .collect();
    // memcached and redis usually listen on IPv4 loopback while "localhost" may resolve
    // to ::1 first: try IPv4 addresses first.
    addrs.sort_by_key(|a| a.is_ipv6());
    match family {
        AddressFamily::Any => {}
        AddressFamily::Ipv4 => addrs.retain(SocketAddr::is_ipv4),
        AddressFamily::Ipv6 => addrs.retain(SocketAddr::is_ipv6),
    }
    if addrs.is_empty() {
        return Err(RunError::Resolve {
            server,
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no address of the family asked for (-4/-6)",
            ),
        });
    }
    Ok(addrs)
}

/// A name's addresses as the endpoints to try, in order.
fn tcp(addrs: Vec<SocketAddr>) -> Vec<Endpoint> {
    addrs.into_iter().map(Endpoint::Tcp).collect()
}

/// Where the run connects, and with what TLS: one server, or every server of a
/// `--shard` pool. The files named are read here, once.
fn targets(config: &Config) -> Result<Vec<Target>, RunError> {
    let tls_config = match &config.tls {
        None => None,
        Some(options) => Some((crate::tls::client_config(options)?, options)),
    };
    let tls_for = |host: &str| -> Result<Option<TlsTarget>, RunError> {
        match &tls_config {
            None => Ok(None),
            Some((client, options)) => Ok(Some(TlsTarget {
                config: client.clone(),
                server_name: crate::tls::server_name(options, host)?,
            })),
        }
    };
    let Some(shard) = &config.shard else {
        let (endpoints, name) = match &config.unix_socket {
            Some(path) => (
                vec![Endpoint::Unix(path.clone())],
                path.display().to_string(),
            ),
            None => (
                tcp(resolve(config)?),
                format!("{}:{}", config.server, config.port),
            ),
        };
        return Ok(vec![Target {
            endpoints,
            tls: tls_for(&config.server)?,
            name,
        }]);
    };
    shard
        .servers
        .iter()
        .map(|entry| {
            Ok(match &entry.address {
                Address::Tcp { host, port } => Target {
                    endpoints: tcp(resolve_host(host, *port, config.family)?),
                    tls: tls_for(host)?,
                    name: format!("{host}:{port}"),
                },
                Address::Unix(path) => Target {
                    endpoints: vec![Endpoint::Unix(path.clone())],
                    tls: tls_for("localhost")?,
                    name: path.display().to_string(),
                },
            })
        })
        .collect()
}

/// Runs the load described by `config` and returns the merged measurements.
pub fn run(config: &Config) -> Result<RunResult, RunError> {
    let targets = targets(config)?;
    if let Some(trace) = &config.trace {
        // A trace that cannot be read is refused before anything is sent.
        let mut records = replay::records(trace, config.workload.protocol)?;
        if let Some(Err(error)) = records.next() {
            return Err(replay::refused(trace, error));
        }
    }
    let failure = Arc::new(Mutex::new(None));
    let barrier = Arc::new(Barrier::new(config.threads + 1));
    let origin_ns = Arc::new(AtomicU64::new(0));
    let window = window(config);
    let mut handles = Vec::with_capacity(config.threads);
    for index in 0..config.threads {
        let plan = ThreadPlan {
            index,
            config: config.clone(),
            targets: targets.clone(),
            window,
            failure: failure.clone(),
            barrier: barrier.clone(),
            origin_ns: origin_ns.clone(),
        };
        let handle = std::thread::Builder::new()
            .name(format!("load-{index}"))
            .spawn(move || thread::run(plan))
            .map_err(RunError::Thread)?;
        handles.push(handle);
    }
    // Every thread has connected (or failed): start the clock and release them.
    barrier.wait();
    let start_late_us = match config.start_at_unix_ms {
        Some(at) => match wait_until_unix_ms(at) {
            Ok(late) => Some(late),
            Err(error) => {
                failure
                    .lock()
                    .expect("failure lock")
                    .get_or_insert(RunError::StartMissed(error));
                None
            }
        },
        None => None,
    };
    let started_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let origin = monotonic_ns();
    origin_ns.store(origin, Ordering::SeqCst);
    barrier.wait();
    let mut merged = Recorder::new(window);
    for handle in handles {
        let recorder = handle.join().expect("a load thread panicked");
        if let Some(recorder) = recorder {
            merged.merge(&recorder);
        }
    }
    let duration_ns = monotonic_ns() - origin;
    if let Some(error) = failure.lock().expect("failure lock").take() {
        return Err(error);
    }
    Ok(RunResult {
        recorder: merged,
        started_unix_ms,
        start_late_us,
        duration_ns,
    })
}

/// Sleeps until the wall clock reads `at_ms` (Unix ms); returns how late it woke, in µs.
/// An instant within the slack in the past returns at once ([`crate::start`]).
fn wait_until_unix_ms(at_ms: u64) -> Result<u64, StartError> {
    let at_ns = at_ms * 1_000_000;
    crate::start::wait_for(at_ms, realtime_ns() / 1_000_000)?;
    let ts = libc::timespec {
        tv_sec: (at_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (at_ns % 1_000_000_000) as libc::c_long,
    };
    // An absolute sleep on the wall clock: it ends on the instant even if the clock is
    // adjusted meanwhile, and a signal only makes us sleep again.
    // SAFETY: a valid timespec; the remainder is not used with TIMER_ABSTIME.
    while unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_REALTIME,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    } == libc::EINTR
    {}
    Ok(realtime_ns().saturating_sub(at_ns) / 1000)
}
