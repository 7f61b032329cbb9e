//! cachelab-proxy: a memcached middleware that replicates writes, balances reads,
//! optionally shards multi-GETs, and measures where every request spends its time.
//!
//! The structure is the queueing model the measurements are about:
//!
//! - **net layer** ([`connection`], [`decode`], [`client`]): one task per client reads
//!   bytes, decodes requests ([`decode::Decoder`] over the sans-I/O protocol crate),
//!   answers rejections and local commands itself, assigns read targets round-robin
//!   ([`routing`]) and appends the rest to one FCFS queue ([`queue`]).
//! - **W workers** ([`worker`]): each owns a connection to every server ([`backend`]),
//!   takes the oldest request, sends its messages, waits for every involved server,
//!   assembles the reply, sends it in the connection's order, and takes the next.
//! - **statistics** ([`metrics`], [`stats_file`]): per-request timestamps feed each
//!   worker's own statistics unit, swapped out and written every window.
//! - [`server::run`] wires it together and shuts it down gracefully.

pub mod backend;
pub mod budget;
pub mod client;
pub mod config;
pub mod connection;
pub mod counters;
pub mod decode;
pub mod health;
pub mod job;
pub mod log_limit;
pub mod logging;
pub mod metrics;
pub mod metrics_http;
pub mod queue;
pub mod routing;
pub mod server;
pub mod stats_command;
pub mod stats_file;
pub mod worker;
