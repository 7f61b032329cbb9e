//! The command line (clap derive; every default a named constant of [`super`]).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use clap::Parser;

use cachelab_protocol::limits::DEFAULT_MAX_VALUE_LEN;

use crate::routing::Protocol;

use super::{
    DEFAULT_BACKOFF_MAX_MS, DEFAULT_DRAIN_TIMEOUT_SECS, DEFAULT_FAILURE_LIMIT, DEFAULT_LISTEN,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_INFLIGHT, DEFAULT_MAX_LINE_LENGTH,
    DEFAULT_MAX_PENDING_BYTES, DEFAULT_MAX_REPLY_BYTES, DEFAULT_MEMORY_BUDGET_MB, DEFAULT_PIPELINE,
    DEFAULT_PORT, DEFAULT_SERVER_TIMEOUT_MS, DEFAULT_STATS_WINDOW_SECS, DEFAULT_TLS_PROTOCOLS,
    DEFAULT_UNIX_SOCKET_MODE, DEFAULT_WORKERS,
};

/// cachelab-proxy: a memcached and Redis middleware that replicates writes to every
/// server, balances reads round-robin, optionally shards multi-GETs, and measures where
/// each request spends its time.
#[derive(Debug, Parser)]
#[command(name = "cachelab-proxy", version, about, long_about = None)]
pub struct Args {
    /// Address to listen on.
    #[arg(short = 'l', long = "listen", default_value = DEFAULT_LISTEN)]
    pub listen: IpAddr,

    /// Port to listen on (0 picks a free port; the chosen address is printed on stdout).
    #[arg(short = 'p', long = "port", default_value_t = DEFAULT_PORT)]
    pub port: u16,

    /// Listen on this Unix socket instead of -l/-p.
    #[arg(long, value_name = "PATH", conflicts_with = "config")]
    pub unix_socket: Option<PathBuf>,

    /// Permissions of the --unix-socket file, in octal.
    #[arg(long, default_value = DEFAULT_UNIX_SOCKET_MODE, value_name = "OCTAL")]
    pub unix_socket_mode: String,

    /// Serve TLS to clients with this PEM certificate chain (leaf first); needs
    /// --tls-key. Reread on SIGHUP.
    #[arg(
        long,
        value_name = "FILE",
        requires = "tls_key",
        conflicts_with = "config"
    )]
    pub tls_cert: Option<PathBuf>,

    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Mutual TLS: require client certificates that chain to a CA in this PEM file.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,

    /// TLS versions served to clients and offered to servers (1.2, 1.3).
    #[arg(long, default_value = DEFAULT_TLS_PROTOCOLS, value_name = "LIST")]
    pub tls_protocols: String,

    /// Speak TLS to the -m servers (--server-tls-ca or --server-tls-skip-verify).
    #[arg(long, conflicts_with = "config")]
    pub server_tls: bool,

    /// PEM CAs the servers' certificates must chain to.
    #[arg(long, value_name = "FILE", requires = "server_tls")]
    pub server_tls_ca: Option<PathBuf>,

    /// Name sent as SNI and verified in the servers' certificates (default: each
    /// server's host as written in -m).
    #[arg(long, value_name = "NAME", requires = "server_tls")]
    pub server_tls_sni: Option<String>,

    /// Accept any server certificate (encrypts, does not authenticate the servers).
    #[arg(long, requires = "server_tls", conflicts_with = "server_tls_ca")]
    pub server_tls_skip_verify: bool,

    /// A PEM client certificate chain for servers that require one.
    #[arg(long, value_name = "FILE", requires_all = ["server_tls", "server_tls_key"])]
    pub server_tls_cert: Option<PathBuf>,

    /// The PEM private key of --server-tls-cert.
    #[arg(long, value_name = "FILE", requires = "server_tls_cert")]
    pub server_tls_key: Option<PathBuf>,

    /// Number of workers: at most this many requests are at the servers at once.
    #[arg(short = 't', long = "workers", default_value_t = DEFAULT_WORKERS)]
    pub workers: usize,

    /// Servers (memcached, or Redis with --protocol redis), host:port or a Unix socket path, one or more (a replicate
    /// pool; --config for more).
    #[arg(short = 'm', long = "servers", num_args = 1.., required_unless_present = "config",
          conflicts_with = "config", value_name = "HOST:PORT")]
    pub servers: Vec<String>,

    /// Listeners and pools from a file: cachelab's TOML, or twemproxy's nutcracker.yml
    /// as it is (by extension: .yml/.yaml). Reloaded on SIGHUP.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Split multi-GETs over the servers instead of sending each to one server.
    #[arg(short = 's', long = "sharded")]
    pub sharded: bool,

    /// Requests a worker takes from the queue at once and has at the servers together,
    /// sent in one write per server (at most workers x this at the servers). The
    /// default, 1, keeps the spec's queueing model: one request per worker at a time.
    #[arg(long, default_value_t = DEFAULT_PIPELINE, value_name = "DEPTH")]
    pub pipeline: usize,

    /// The W workers of a loop share one connection per server, as twemproxy's clients
    /// share its server connection: a worker's batch goes out while other workers'
    /// replies are still owed, and the server reads many batches in one read (cheaper
    /// per request for it). Off by default: each worker owns its own connection to
    /// every server, the spec's structure.
    #[arg(long)]
    pub share_connections: bool,

    /// A worker's memcached `get`s (and `gets`es) for one server in one batch go out as
    /// one `get` line of all their keys, and the reply is split back into each
    /// request's values (moxi's "multi-get escalation"): the server reads, looks up
    /// and writes once per line instead of once per request. memcached 1.6.18 writes
    /// each `get`'s reply with its own system call, so this is what makes it cheaper
    /// behind the proxy. Needs `--pipeline` above 1 to have requests to merge. Off by
    /// default. Redis pools are unchanged.
    #[arg(long)]
    pub merge_gets: bool,

    /// Event-loop threads, each owning its clients, its FCFS queue and its own W
    /// workers with their server connections (N such stations in parallel; the
    /// default, 1, is the spec's single queue).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub loops: usize,

    /// Removed with the tokio shell: refused with a line saying what replaced it.
    #[arg(long, hide = true, value_name = "N")]
    pub threads: Option<String>,

    /// Removed with the tokio shell: refused with a line saying what replaced it.
    #[arg(long, hide = true, value_name = "SHELL")]
    pub shell: Option<String>,

    /// After each read from a client or a server, keep one runtime thread spinning this
    /// many microseconds instead of sleeping, so the next request or reply is read as it
    /// lands rather than after the CPU's wake-up. Costs up to this much CPU after every
    /// burst of traffic, a whole core under steady load. 0: off.
    #[arg(long, default_value_t = 0, value_name = "US")]
    pub busy_poll_us: u64,

    /// Write one JSON object per worker and statistics window to this file.
    #[arg(long, value_name = "PATH")]
    pub stats_file: Option<PathBuf>,

    /// Length of a statistics window in seconds.
    #[arg(long, default_value_t = DEFAULT_STATS_WINDOW_SECS, value_name = "SECS")]
    pub stats_window: f64,

    /// Write the proxy's pid here at start (removed at exit), for `cachelab proxy reload`
    /// and scripts that send it SIGHUP.
    #[arg(long, value_name = "PATH")]
    pub pid_file: Option<PathBuf>,

    /// Write the log (info, warnings, errors) here instead of stderr.
    #[arg(long, value_name = "PATH")]
    pub log_file: Option<PathBuf>,

    /// Log level (error, warn, info, debug, trace, off) or target=level directives
    /// separated by commas.
    #[arg(long, default_value = "info", value_parser = log_level)]
    pub log_level: String,

    /// Largest value accepted from a client, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_VALUE_LEN)]
    pub max_value_size: usize,

    /// How long a server may take to answer before the request fails, in milliseconds.
    #[arg(long, default_value_t = DEFAULT_SERVER_TIMEOUT_MS, value_name = "MS")]
    pub server_timeout: u64,

    /// Longest wait between reconnection attempts to a failed server, in milliseconds.
    #[arg(long, default_value_t = DEFAULT_BACKOFF_MAX_MS, value_name = "MS")]
    pub backoff_max: u64,

    /// Failures in a row, over all workers, that eject a server (a timeout ejects at
    /// once); an ejected server gets no requests until a probe gets an answer. 0: never
    /// eject (each worker backs off on its own).
    #[arg(long, default_value_t = DEFAULT_FAILURE_LIMIT, value_name = "N")]
    pub failure_limit: u32,

    /// On SIGTERM or SIGINT, how long in-flight requests may take to finish, in seconds.
    #[arg(long, default_value_t = DEFAULT_DRAIN_TIMEOUT_SECS, value_name = "SECS")]
    pub drain_timeout: f64,

    /// Serve Prometheus metrics over HTTP on this address (e.g. 127.0.0.1:9150).
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_addr: Option<SocketAddr>,

    /// Client connections served at once; a connection past the limit is answered
    /// `ERROR Too many open connections` and closed, as memcached does.
    #[arg(long, default_value_t = DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,

    /// Requests one client connection may have in flight before we stop reading from it.
    #[arg(long, default_value_t = DEFAULT_MAX_INFLIGHT)]
    pub max_inflight: usize,

    /// Warnings about clients (bad requests) logged per second over the whole proxy;
    /// the rest are counted and the count is logged.
    #[arg(long, default_value_t = crate::log_limit::DEFAULT_LINES_PER_SECOND, value_name = "N")]
    pub log_lines_per_second: u32,

    /// Longest command line accepted (a multi-GET's key list), in bytes. memcached has
    /// no such limit; 4 MiB holds 16,000 keys of the longest size.
    #[arg(long, default_value_t = DEFAULT_MAX_LINE_LENGTH, value_name = "BYTES")]
    pub max_line_length: usize,

    /// Memory for requests and replies in MiB: requests and replies that would not fit
    /// are answered `SERVER_ERROR out of memory` (see docs/proxy.md, Memory bound).
    #[arg(long, default_value_t = DEFAULT_MEMORY_BUDGET_MB, value_name = "MIB")]
    pub memory_budget: usize,

    /// Largest reply one server may send for one request; a larger one is answered
    /// `SERVER_ERROR reply too large`.
    #[arg(long, default_value_t = DEFAULT_MAX_REPLY_BYTES, value_name = "BYTES")]
    pub max_reply_bytes: usize,

    /// Reply bytes a client may have coming (unread replies, plus its requests in flight
    /// at its largest reply so far) before nothing more of its is dispatched.
    #[arg(long, default_value_t = DEFAULT_MAX_PENDING_BYTES, value_name = "BYTES")]
    pub max_pending_bytes: usize,

    /// Close a client connection that has sent nothing and awaits nothing for this many
    /// seconds (0: never, memcached's default).
    #[arg(long, default_value_t = 0.0, value_name = "SECS")]
    pub idle_timeout: f64,

    /// What the command line's pool speaks: memcached's text protocol, or Redis's RESP2
    /// (its clients and -m servers then speak Redis; see docs/redis-pools.md).
    #[arg(long, value_enum, default_value_t = ProtocolArg::Memcached, conflicts_with = "config")]
    pub protocol: ProtocolArg,

    /// A Redis pool's password: sent with AUTH on every server connection, and asked of
    /// every client (AUTH PASSWORD) before its first command.
    #[arg(long, value_name = "PASSWORD", conflicts_with = "config")]
    pub redis_auth: Option<String>,

    /// A Redis pool's database: selected on every server connection; clients may SELECT
    /// only this one.
    #[arg(long, value_name = "N", conflicts_with = "config", value_parser = database,
          allow_negative_numbers = true)]
    pub redis_db: Option<u32>,
}

/// `--protocol`'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProtocolArg {
    Memcached,
    Redis,
}

impl From<ProtocolArg> for Protocol {
    fn from(p: ProtocolArg) -> Protocol {
        match p {
            ProtocolArg::Memcached => Protocol::Memcached,
            ProtocolArg::Redis => Protocol::Redis,
        }
    }
}

/// `--redis-db`: a database number (negative ones reach here, to be refused by name
/// rather than taken for an unknown option).
fn database(s: &str) -> Result<u32, String> {
    s.parse()
        .map_err(|_| "expected a database number, 0 or more".to_string())
}

/// A command-line error as one line (clap's own text is a paragraph, a blank line, the
/// usage and a pointer to --help: 5-6 lines for a script's log to hold): the message,
/// its continuation lines and any tip joined, with the pointer to --help kept short.
pub fn one_line(error: &clap::Error) -> String {
    let text = error.render().to_string();
    let parts: Vec<String> = text
        .split("\n\n")
        .map(str::trim)
        .filter(|p| !p.is_empty() && !p.starts_with("Usage:") && !p.starts_with("For more"))
        .map(|p| {
            p.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let line = parts.join("; ");
    let line = line.strip_prefix("error: ").unwrap_or(&line);
    format!("{line} (see --help)")
}

/// `--log-level`, checked when the command line is read.
fn log_level(s: &str) -> Result<String, crate::logging::BadLevel> {
    crate::logging::filter(s).map(|_| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(argv: &[&str]) -> String {
        one_line(&Args::try_parse_from(argv).unwrap_err())
    }

    #[test]
    fn every_command_line_error_is_one_line() {
        let cases: &[(&[&str], &str)] = &[
            (
                &["p", "-m", "127.0.0.1:1", "--redis-db", "-1"],
                "invalid value '-1' for '--redis-db <N>': expected a database number, 0 or \
                 more (see --help)",
            ),
            (
                &["p", "-m", "127.0.0.1:1", "--tls-cert", "c.pem"],
                "the following required arguments were not provided: --tls-key <FILE> (see \
                 --help)",
            ),
            (
                &["p", "-m", "127.0.0.1:1", "--worker", "2"],
                "unexpected argument '--worker' found; tip: a similar argument exists: \
                 '--workers' (see --help)",
            ),
            (
                &["p", "-m", "127.0.0.1:1", "-p", "x"],
                "invalid value 'x' for '--port <PORT>': invalid digit found in string (see \
                 --help)",
            ),
            (
                &["p"],
                "the following required arguments were not provided: --servers <HOST:PORT>... \
                 (see --help)",
            ),
        ];
        for (argv, line) in cases {
            assert_eq!(&error_of(argv), line, "{argv:?}");
        }
    }
}
