//! cachelab-load: a load generator for memcached, Redis and the cachelab middleware,
//! with memtier_benchmark's options, closed or open loop.
//!
//! Pure modules, unit-tested without sockets:
//! - [`args`] (the memtier-compatible command line) and [`config`] (its validation);
//! - [`memtier`]: memtier_benchmark's options, which of them are supported, and the
//!   one-line refusal of the others;
//! - [`keys`]: key patterns R, G, Z, S, P over a key range; [`keysize`]: key sizes
//!   drawn per key number;
//! - [`dist`]: distributions of sizes, gaps and expiry times, and their text syntax;
//! - [`cycle`]: the set:get cycle and the keys per GET (`--multiget-keys`, memtier's
//!   `--multi-key-get`);
//! - [`sizes`]: value sizes (fixed, range, weighted list) and expiry times;
//! - [`percentiles`]: the human summary's percentile columns;
//! - [`presets`]: `--workload` presets from published production studies;
//! - [`workload`]: values, requests composed with the protocol crate, and what each
//!   reply means;
//! - [`schedule`]: open-loop send times (Poisson or fixed);
//! - [`record`]: per-thread measurements, the summary window and the per-second series;
//!   [`sent`]: what was sent (key and value sizes, how often each key was asked);
//!   [`record::servers`]: each server's counts in a sharded run;
//! - [`timing`]: where each request's time went (wire time, response time, the client's
//!   own delays), from kernel and program timestamps; [`stamps`]: the kernel's
//!   timestamps parsed from control messages and matched to requests;
//! - [`setup`]: connection set-up (connect and TLS handshake), apart from request
//!   latency; [`tls`]: memtier's `--tls` options as `cachelab-net`'s TLS settings;
//! - [`start`]: `--start-at`, the instant a run starts on;
//! - [`report`]: the JSON report (one run, or several and their aggregate), the human
//!   summary, the HdrHistogram log.
//!
//! - [`engine`]: one connection's load engine without I/O: what to send next and when,
//!   what each reply means, what to record (closed loop, open loop, lookaside, replay,
//!   client-side sharding over a pool's servers), tested in simulated time.
//!
//! [`runner`] is the I/O shell: threads, connections, the precise open-loop timer and the
//! watchdog that keeps every run within its time.

pub mod args;
pub mod config;
pub mod cycle;
pub mod dist;
pub mod engine;
pub mod keys;
pub mod keysize;
pub mod memtier;
pub mod percentiles;
pub mod presets;
pub mod record;
pub mod report;
pub mod runner;
pub mod schedule;
pub mod sent;
pub mod setup;
pub mod sizes;
pub mod stamps;
pub mod start;
pub mod timing;
pub mod tls;
pub mod trace;
pub mod workload;
