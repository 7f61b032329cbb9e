//! Command-line options and the validated configuration built from them, and the
//! configuration file (`--config`: cachelab's TOML or twemproxy's nutcracker.yml).
//!
//! - [`args`]: the command line; [`spec`]: listeners, pools and servers as configured;
//! - [`file`]: reading a file ([`toml`] or [`nutcracker`], over [`yaml`]), with the
//!   fields both formats share in [`fields`].

pub mod args;
pub mod fields;
pub mod file;
pub mod nutcracker;
pub mod spec;
pub mod toml;
pub mod yaml;

pub use args::Args;
pub use spec::{ketama_name, ListenerSpec, PoolSpec, ServerSpec};

use std::collections::HashSet;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use cachelab_protocol::limits::MAX_KEY_LEN;
use cachelab_protocol::Limits;
use thiserror::Error;

use crate::endpoint::Endpoint;
use crate::health::{ServerKey, MAX_SERVERS};
use crate::tls::{ListenerTlsSpec, Protocols, ServerTlsSpec, TlsError};

pub const DEFAULT_LISTEN: &str = "127.0.0.1";
pub const DEFAULT_PORT: u16 = 11212;
pub const DEFAULT_WORKERS: usize = 16;
pub const DEFAULT_STATS_WINDOW_SECS: f64 = 5.0;
pub const DEFAULT_DRAIN_TIMEOUT_SECS: f64 = 5.0;
pub const DEFAULT_SERVER_TIMEOUT_MS: u64 = 1000;
pub const DEFAULT_BACKOFF_MAX_MS: u64 = 1000;
/// Failures in a row (over all workers) that eject a server; twemproxy's default.
pub const DEFAULT_FAILURE_LIMIT: u32 = 2;
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
pub const DEFAULT_MAX_INFLIGHT: usize = 1024;
/// Longest command line accepted by default: room for a 10,000-key multi-GET of 250-byte
/// keys, which memcached serves.
pub const DEFAULT_MAX_LINE_LENGTH: usize = 4 << 20;
/// Bytes held for requests and replies at once (see `budget`).
pub const DEFAULT_MEMORY_BUDGET_MB: usize = 1024;
/// Largest reply one server may send for one request (a multi-GET of 10,000 values of
/// 1 KiB is 10 MiB).
pub const DEFAULT_MAX_REPLY_BYTES: usize = 32 << 20;
/// Reply bytes a client may leave unread before we stop reading its requests.
pub const DEFAULT_MAX_PENDING_BYTES: usize = 4 << 20;
/// Requests a worker has at the servers at once by default: one, the spec's model.
pub const DEFAULT_PIPELINE: usize = 1;
/// Permissions of a Unix socket listener's file (memcached's `-a` default).
pub const DEFAULT_UNIX_SOCKET_MODE: &str = "700";
/// TLS protocol versions offered and accepted by default.
pub const DEFAULT_TLS_PROTOCOLS: &str = "1.2,1.3";

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("--{0} was removed with the tokio shell: {1}")]
    Removed(&'static str, &'static str),
    #[error("--workers must be at least 1")]
    NoWorkers,
    #[error("server address {0:?} is not host:port")]
    BadServer(String),
    #[error("server address {0:?} did not resolve: {1}")]
    Unresolved(String, std::io::Error),
    #[error("--{0} must be a positive number of seconds")]
    BadSeconds(&'static str),
    #[error("--{0} must be at least 1")]
    Zero(&'static str),
    #[error("{0}")]
    File(#[from] file::FileError),
    #[error("--{0}: {1}")]
    Tls(&'static str, TlsError),
    #[error("{0}")]
    Unsupported(&'static str),
    #[error("--unix-socket-mode {0:?}: expected octal permissions such as 700")]
    BadMode(String),
    #[error("{0}")]
    Pool(String),
    #[error(
        "{0} distinct servers (address, protocol, database, password, TLS); at most \
         {MAX_SERVERS} are supported"
    )]
    TooManyServers(usize),
}

/// The validated configuration the server runs with.
#[derive(Debug, Clone)]
pub struct Config {
    /// The first listener's address.
    pub listen: Endpoint,
    pub workers: usize,
    /// Every distinct server address of every pool, in order of appearance (one
    /// address may be several servers: see [`Config::server_keys`]).
    pub servers: Vec<Endpoint>,
    /// The command line's `-s` (for the stats file header).
    pub sharded: bool,
    pub listeners: Vec<ListenerSpec>,
    /// `--config`: reread on SIGHUP.
    pub config_file: Option<PathBuf>,
    pub pipeline: usize,
    /// `--share-connections`: a loop's workers share one connection per server.
    pub share_connections: bool,
    /// `--merge-gets`: a batch's memcached retrievals for one server go out in one line.
    pub merge_gets: bool,
    /// `--loops`: event-loop threads, each with its own queue and `workers` workers.
    pub loops: usize,
    /// `--busy-poll-us`; zero: off.
    pub busy_poll: Duration,
    pub stats_file: Option<PathBuf>,
    pub stats_window: Duration,
    pub metrics_addr: Option<SocketAddr>,
    pub limits: Limits,
    pub server_timeout: Duration,
    pub backoff_max: Duration,
    pub failure_limit: u32,
    pub drain_timeout: Duration,
    pub max_connections: usize,
    pub max_inflight: usize,
    pub idle_timeout: Option<Duration>,
    pub memory_budget: usize,
    pub max_reply_bytes: usize,
    pub max_pending_bytes: usize,
    pub log_lines_per_second: u32,
    /// Permissions of Unix socket listeners' files.
    pub unix_socket_mode: u32,
}

/// File descriptors beyond clients and server connections: the listener, the log and
/// stats files, the metrics listener and its clients, probes, the runtime's own.
pub const SPARE_DESCRIPTORS: u64 = 64;

impl Config {
    /// Whether any listener serves TLS or any pool reaches its servers over TLS.
    pub fn has_tls(&self) -> bool {
        self.listeners
            .iter()
            .any(|l| l.tls.is_some() || l.pool.server_tls.is_some())
    }

    /// File descriptors the proxy may need at once: every client connection, every
    /// worker's connection to every server, and `SPARE_DESCRIPTORS`.
    pub fn descriptors_needed(&self) -> u64 {
        self.max_connections as u64
            + (self.workers as u64) * (self.server_keys().len() as u64)
            + SPARE_DESCRIPTORS
    }

    /// Every distinct server (address and pool settings, as the health registry keys
    /// them): each has its own connection per worker.
    pub fn server_keys(&self) -> Vec<ServerKey> {
        distinct_server_keys(&self.listeners)
    }

    /// A configuration with the defaults, for tests and embedding.
    pub fn new(listen: SocketAddr, servers: Vec<SocketAddr>, workers: usize) -> Self {
        let specs = servers
            .iter()
            .map(|addr| ServerSpec {
                addr: Endpoint::Tcp(*addr),
                host: addr.ip().to_string(),
                name: ketama_name(&addr.ip().to_string(), addr.port()),
                weight: 1,
            })
            .collect();
        let pool = PoolSpec::replicate(
            specs,
            false,
            Duration::from_millis(DEFAULT_SERVER_TIMEOUT_MS),
            DEFAULT_FAILURE_LIMIT,
        );
        Config {
            listen: Endpoint::Tcp(listen),
            workers,
            servers: servers.into_iter().map(Endpoint::Tcp).collect(),
            sharded: false,
            listeners: vec![ListenerSpec {
                listen: Endpoint::Tcp(listen),
                pool,
                tls: None,
            }],
            config_file: None,
            pipeline: DEFAULT_PIPELINE,
            share_connections: false,
            merge_gets: false,
            loops: 1,
            busy_poll: Duration::ZERO,
            stats_file: None,
            stats_window: Duration::from_secs_f64(DEFAULT_STATS_WINDOW_SECS),
            metrics_addr: None,
            limits: Limits {
                max_line_len: DEFAULT_MAX_LINE_LENGTH,
                ..Limits::default()
            },
            server_timeout: Duration::from_millis(DEFAULT_SERVER_TIMEOUT_MS),
            backoff_max: Duration::from_millis(DEFAULT_BACKOFF_MAX_MS),
            failure_limit: DEFAULT_FAILURE_LIMIT,
            drain_timeout: Duration::from_secs_f64(DEFAULT_DRAIN_TIMEOUT_SECS),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_inflight: DEFAULT_MAX_INFLIGHT,
            idle_timeout: None,
            memory_budget: DEFAULT_MEMORY_BUDGET_MB << 20,
            max_reply_bytes: DEFAULT_MAX_REPLY_BYTES,
            max_pending_bytes: DEFAULT_MAX_PENDING_BYTES,
            log_lines_per_second: crate::log_limit::DEFAULT_LINES_PER_SECOND,
            unix_socket_mode: 0o700,
        }
    }
}

impl TryFrom<&Args> for Config {
    type Error = ConfigError;

    fn try_from(args: &Args) -> Result<Self, ConfigError> {
        if args.shell.is_some() {
            return Err(ConfigError::Removed(
                "shell",
                "the event loop is the only data path; drop the flag",
            ));
        }
        if args.threads.is_some() {
            return Err(ConfigError::Removed(
                "threads",
                "the data path is the event loop; --loops N runs N of them",
            ));
        }
        if args.workers == 0 {
            return Err(ConfigError::NoWorkers);
        }
        let server_timeout = Duration::from_millis(args.server_timeout);
        let listeners = match &args.config {
            Some(path) => file::load(path, server_timeout, args.failure_limit)?,
            None => {
                let specs = args
                    .servers
                    .iter()
                    .map(|s| {
                        if let Some(path) = Endpoint::unix_path(s) {
                            return Ok(ServerSpec {
                                addr: Endpoint::Unix(path),
                                host: s.clone(),
                                name: s.clone(),
                                weight: 1,
                            });
                        }
                        let addr = resolve(s)?;
                        let (host, _) = s.rsplit_once(':').expect("resolve checked host:port");
                        Ok(ServerSpec {
                            addr: Endpoint::Tcp(addr),
                            host: host.to_string(),
                            name: ketama_name(host, addr.port()),
                            weight: 1,
                        })
                    })
                    .collect::<Result<Vec<_>, ConfigError>>()?;
                let mut pool =
                    PoolSpec::replicate(specs, args.sharded, server_timeout, args.failure_limit);
                pool.protocol = args.protocol.into();
                pool.redis_auth = args.redis_auth.clone();
                pool.redis_db = args.redis_db.unwrap_or(0);
                fields::check_protocol(&pool).map_err(ConfigError::Pool)?;
                fields::check_servers(&pool).map_err(ConfigError::Pool)?;
                let protocols = Protocols::parse(&args.tls_protocols)
                    .map_err(|e| ConfigError::Tls("tls-protocols", e.into()))?;
                if args.server_tls {
                    pool.server_tls = Some(ServerTlsSpec {
                        ca: args.server_tls_ca.clone(),
                        sni: args.server_tls_sni.clone(),
                        skip_verify: args.server_tls_skip_verify,
                        cert: args.server_tls_cert.clone(),
                        key: args.server_tls_key.clone(),
                        protocols,
                    });
                }
                let tls = match (&args.tls_cert, &args.tls_key) {
                    (Some(cert), Some(key)) => Some(ListenerTlsSpec {
                        cert: cert.clone(),
                        key: key.clone(),
                        client_ca: args.tls_client_ca.clone(),
                        protocols,
                    }),
                    _ => None,
                };
                let listen = match &args.unix_socket {
                    Some(path) => Endpoint::Unix(path.clone()),
                    None => Endpoint::Tcp(SocketAddr::new(args.listen, args.port)),
                };
                if tls.is_some() && listen.is_unix() {
                    return Err(ConfigError::Unsupported(
                        "--tls-cert: TLS is not served on a --unix-socket listener",
                    ));
                }
                if pool.server_tls.is_some() && pool.servers.iter().any(|s| s.addr.is_unix()) {
                    return Err(ConfigError::Unsupported(
                        "--server-tls: a Unix socket server cannot speak TLS",
                    ));
                }
                vec![ListenerSpec { listen, pool, tls }]
            }
        };
        let servers = distinct_servers(&listeners);
        // Refused here, with the reason, rather than as a descriptor shortfall or when
        // the health registry fills.
        let keys = distinct_server_keys(&listeners).len();
        if keys > MAX_SERVERS {
            return Err(ConfigError::TooManyServers(keys));
        }
        let seconds = |value: f64, name| {
            Duration::try_from_secs_f64(value)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or(ConfigError::BadSeconds(name))
        };
        for (is_zero, name) in [
            (args.max_connections == 0, "max-connections"),
            (args.max_inflight == 0, "max-inflight"),
            (args.server_timeout == 0, "server-timeout"),
            (args.pipeline == 0, "pipeline"),
            (args.loops == 0, "loops"),
            (args.memory_budget == 0, "memory-budget"),
            (args.max_reply_bytes == 0, "max-reply-bytes"),
            (args.max_pending_bytes == 0, "max-pending-bytes"),
        ] {
            if is_zero {
                return Err(ConfigError::Zero(name));
            }
        }
        let config = Config {
            listen: listeners[0].listen.clone(),
            workers: args.workers,
            servers,
            sharded: args.sharded,
            listeners,
            config_file: args.config.clone(),
            pipeline: args.pipeline,
            share_connections: args.share_connections,
            merge_gets: args.merge_gets,
            loops: args.loops,
            busy_poll: Duration::from_micros(args.busy_poll_us),
            stats_file: args.stats_file.clone(),
            stats_window: seconds(args.stats_window, "stats-window")?,
            metrics_addr: args.metrics_addr,
            limits: Limits {
                max_key_len: MAX_KEY_LEN,
                max_value_len: args.max_value_size,
                max_line_len: args.max_line_length.max(16),
            },
            server_timeout: Duration::from_millis(args.server_timeout),
            backoff_max: Duration::from_millis(args.backoff_max.max(1)),
            failure_limit: args.failure_limit,
            drain_timeout: seconds(args.drain_timeout, "drain-timeout")?,
            max_connections: args.max_connections,
            max_inflight: args.max_inflight,
            idle_timeout: if args.idle_timeout == 0.0 {
                None
            } else {
                Some(seconds(args.idle_timeout, "idle-timeout")?)
            },
            memory_budget: args.memory_budget.saturating_mul(1 << 20),
            max_reply_bytes: args.max_reply_bytes,
            max_pending_bytes: args.max_pending_bytes,
            log_lines_per_second: args.log_lines_per_second.max(1),
            unix_socket_mode: u32::from_str_radix(&args.unix_socket_mode, 8)
                .ok()
                .filter(|m| *m <= 0o777)
                .ok_or_else(|| ConfigError::BadMode(args.unix_socket_mode.clone()))?,
        };
        Ok(config)
    }
}

/// Every distinct server of every listener's pool, in order of appearance.
pub fn distinct_servers(listeners: &[ListenerSpec]) -> Vec<Endpoint> {
    let mut seen = HashSet::new();
    listeners
        .iter()
        .flat_map(|l| &l.pool.servers)
        .map(|s| &s.addr)
        .filter(|addr| seen.insert(*addr))
        .cloned()
        .collect()
}

/// Every distinct server of every listener's pool as the health registry keys it, in
/// order of appearance.
pub fn distinct_server_keys(listeners: &[ListenerSpec]) -> Vec<ServerKey> {
    let mut seen = HashSet::new();
    let mut keys = Vec::new();
    for l in listeners {
        for s in &l.pool.servers {
            let key = l.pool.server_key(s);
            if !seen.contains(&key) {
                seen.insert(key.clone());
                keys.push(key);
            }
        }
    }
    keys
}

pub(crate) fn resolve(server: &str) -> Result<SocketAddr, ConfigError> {
    if !server.contains(':') {
        return Err(ConfigError::BadServer(server.to_string()));
    }
    server
        .to_socket_addrs()
        .map_err(|e| ConfigError::Unresolved(server.to_string(), e))?
        .next()
        .ok_or_else(|| ConfigError::BadServer(server.to_string()))
}

#[cfg(test)]
mod tests;
