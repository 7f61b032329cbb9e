//! cachelab-proxy: a memcached and Redis middleware that replicates writes, balances
//! reads, optionally shards multi-GETs, and measures where every request spends its time.
//! A pool speaks memcached or Redis (RESP2): a Redis pool's clients are decoded by
//! [`resp_decode`], its commands planned by [`routing::redis`], its servers greeted
//! (`AUTH`, `SELECT`) and probed (`PING`) as [`dialect`] says; the rest is shared.
//!
//! The structure is the queueing model the measurements are about:
//!
//! - **event loops** ([`evloop`]): one thread by default (`--loops N`: N, the first
//!   accepting for all and handing clients out in turn) owns its clients' sockets, its
//!   FCFS queue and its W workers with their server sockets; a request goes from its
//!   client's read to its servers' write in one loop turn.
//! - **client engine** ([`client::session::ClientSession`], over [`decode`] and [`client`]):
//!   no socket, no clock. A client's bytes, as the loop read them, are decoded into
//!   requests ([`decode::Decoder`] over the sans-I/O protocol crate); rejections and
//!   local commands are answered here; the rest takes its round-robin position in its
//!   listener's pool ([`routing::plan::Pool::assign`]) and joins its loop's FCFS queue
//!   ([`queue`]); replies come out in request order as bytes the loop writes.
//! - **routing** ([`routing`]): pure. A request and its pool in, a plan out (which
//!   server gets which part, who may stand in, how replies merge); twemproxy's hashes and
//!   distributions, so a `shard` pool puts every key where nutcracker would.
//! - **W workers** ([`worker`]): each an engine without I/O that carries plans out
//!   over its own connection to every server: takes the oldest request, sends its
//!   parts, waits for every involved server, merges the replies, sends the reply in the
//!   connection's order, and takes the next. With `--share-connections` a loop's
//!   workers share one connection per server instead, their replies handed back in
//!   sending order (`evloop::shared`).
//! - **server health** ([`health`]): one registry for the whole proxy: eject, probe,
//!   restore.
//! - **configuration** ([`config`]): the command line's
//!   single pool, or listeners and pools from cachelab's TOML or twemproxy's
//!   nutcracker.yml, bounded in size and without YAML aliases; reloaded on SIGHUP
//!   ([`reload`]).
//! - **statistics** ([`metrics`], [`stats_file`]): per-request timestamps feed each
//!   worker's own statistics unit, swapped out and written every window.
//! - **transport** ([`endpoint`], [`loop_stream`], [`server_stream`], [`tls`]): TCP,
//!   Unix sockets and TLS (rustls), on the client side and towards the servers; the
//!   addresses, the TLS configurations and the rustls driving are `cachelab-net`'s,
//!   shared with the load generator.
//! - [`server::run`] wires it together and shuts it down gracefully.

pub mod admission;
pub mod budget;
pub mod busy_poll;
pub mod client;
pub mod config;
pub mod counters;
pub mod decode;
pub mod demux;
pub mod dialect;
pub mod down;
pub mod endpoint;
pub mod evloop;
pub mod health;
pub mod histograms;
pub mod job;
pub mod log_limit;
pub mod logging;
pub mod loop_stream;
pub mod metrics;
pub mod metrics_http;
pub mod mio_socket;
pub mod observed;
pub mod pool_build;
pub mod queue;
pub mod reconnect;
pub mod redis_info;
pub mod reload;
pub mod resp_decode;
pub mod routing;
pub mod server;
pub mod server_stream;
pub mod stats_command;
pub mod stats_file;
pub mod stats_units;
pub mod tls;
pub mod worker;
