//! The command line, with memtier_benchmark's option names and defaults, so that a
//! memtier command line runs unchanged after the program name. [`crate::config`] turns
//! it into a validated [`crate::config::Config`].

use std::path::PathBuf;

use clap::{ArgAction, Parser, ValueEnum};

pub const DEFAULT_SERVER: &str = "localhost";
/// memtier's default port (Redis's), kept so that pasted command lines mean the same.
pub const DEFAULT_PORT: u16 = 6379;
pub const DEFAULT_THREADS: usize = 4;
pub const DEFAULT_CLIENTS: usize = 50;
/// Requests per client when neither `--test-time` nor `--requests` is given (memtier's).
pub const DEFAULT_REQUESTS: u64 = 10_000;
pub const DEFAULT_RATIO: &str = "1:10";
pub const DEFAULT_PIPELINE: usize = 1;
pub const DEFAULT_DATA_SIZE: usize = 32;
pub const DEFAULT_KEY_PREFIX: &str = "memtier-";
pub const DEFAULT_KEY_MINIMUM: u64 = 0;
pub const DEFAULT_KEY_MAXIMUM: u64 = 10_000_000;
pub const DEFAULT_KEY_PATTERN: &str = "R:R";
pub const DEFAULT_ZIPF_EXPONENT: f64 = 1.0;
/// memtier's runs are repeatable by default (a constant seed); so are ours.
pub const DEFAULT_SEED: u64 = 5381;
/// How long a connection waits for a reply before it counts the request as timed out and
/// reconnects; it also bounds `--requests` runs against a server that stops answering.
pub const DEFAULT_REPLY_TIMEOUT_SECS: f64 = 10.0;
pub const DEFAULT_CONNECT_TIMEOUT_SECS: f64 = 5.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProtocolArg {
    /// Redis RESP2: SET, GET, MGET.
    #[value(alias = "resp2")]
    Redis,
    /// memcached text protocol: set, get, multi-key get.
    #[value(name = "memcache_text")]
    MemcacheText,
    /// memcached binary protocol: SET, GET, multi-key get as quiet GETKQs and a NOOP.
    #[value(name = "memcache_binary")]
    MemcacheBinary,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ArrivalArg {
    /// Exponential gaps: a Poisson process, the usual model of independent users.
    Poisson,
    /// Equal gaps, for a deterministic offered load.
    Fixed,
}

/// cachelab-load: a memtier_benchmark-compatible load generator for memcached, Redis and
/// the cachelab middleware. Closed loop by default (each connection keeps --pipeline
/// requests outstanding); open loop with --rate (requests sent on a schedule, latency
/// measured from the scheduled time, so stalls are not hidden by coordinated omission).
#[derive(Debug, Clone, Parser)]
#[command(
    name = "cachelab-load",
    version,
    about,
    long_about = None,
    disable_help_flag = true,
    disable_version_flag = true
)]
pub struct Args {
    /// Server address (memtier's -s/--server, also -h/--host).
    #[arg(short = 's', long = "server", visible_alias = "host", visible_short_alias = 'h', default_value = DEFAULT_SERVER)]
    pub server: String,

    /// Server port.
    #[arg(short = 'p', long, default_value_t = DEFAULT_PORT)]
    pub port: u16,

    /// Protocol to use.
    #[arg(short = 'P', long, value_enum, default_value = "redis")]
    pub protocol: ProtocolArg,

    /// Number of threads, each with its own event loop.
    #[arg(short = 't', long, default_value_t = DEFAULT_THREADS)]
    pub threads: usize,

    /// Number of connections (clients) per thread.
    #[arg(short = 'c', long, default_value_t = DEFAULT_CLIENTS)]
    pub clients: usize,

    /// Seconds to run (fractions allowed). With --requests too, whichever ends first.
    #[arg(long, value_name = "SECS")]
    pub test_time: Option<f64>,

    /// Requests per client, or `allkeys` to cover the key range (with P, each key once).
    /// Default 10000 when --test-time is not given.
    #[arg(short = 'n', long, value_name = "NUMBER|allkeys")]
    pub requests: Option<String>,

    /// Set:Get ratio, sent as repeating runs of S sets then G gets on every connection.
    #[arg(long, default_value = DEFAULT_RATIO, value_name = "S:G")]
    pub ratio: String,

    /// Requests each closed-loop connection keeps outstanding.
    #[arg(long, default_value_t = DEFAULT_PIPELINE)]
    pub pipeline: usize,

    /// Keys per GET; above 1 every GET is a multi-get (memcached `get k1 k2 ...`, Redis MGET).
    #[arg(
        long,
        visible_alias = "multi-key-get",
        default_value_t = 0,
        value_name = "NUM"
    )]
    pub multiget_keys: usize,

    /// Value size in bytes.
    #[arg(short = 'd', long, default_value_t = DEFAULT_DATA_SIZE)]
    pub data_size: usize,

    /// Value sizes drawn uniformly from this inclusive range (overrides --data-size).
    #[arg(long, value_name = "MIN-MAX")]
    pub data_size_range: Option<String>,

    /// Random value bytes instead of a constant fill.
    #[arg(short = 'R', long)]
    pub random_data: bool,

    /// Prefix of every key (keys are the prefix followed by the key number).
    #[arg(long, default_value = DEFAULT_KEY_PREFIX)]
    pub key_prefix: String,

    /// Smallest key number.
    #[arg(long, default_value_t = DEFAULT_KEY_MINIMUM)]
    pub key_minimum: u64,

    /// Largest key number (inclusive).
    #[arg(long, default_value_t = DEFAULT_KEY_MAXIMUM)]
    pub key_maximum: u64,

    /// Set:Get key patterns: R uniform, G gaussian, Z zipf, S sequential, P the range
    /// split over the clients (sequential within each client's part). One letter sets both.
    #[arg(long, default_value = DEFAULT_KEY_PATTERN, value_name = "SET:GET")]
    pub key_pattern: String,

    /// Standard deviation of the gaussian pattern (default: key range / 6).
    #[arg(long)]
    pub key_stddev: Option<f64>,

    /// Median of the gaussian pattern (default: the centre of the key range).
    #[arg(long)]
    pub key_median: Option<f64>,

    /// Exponent of the zipf pattern: key rank r is drawn with probability ~ 1/r^s.
    #[arg(long, visible_alias = "key-zipf-exp", default_value_t = DEFAULT_ZIPF_EXPONENT)]
    pub zipf_exponent: f64,

    /// Seed of every random choice; the same seed and options give the same requests.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,

    /// Seed from the clock instead of --seed (memtier's option).
    #[arg(long)]
    pub randomize: bool,

    /// Accepted for memtier compatibility: clients always get distinct streams here.
    #[arg(long)]
    pub distinct_client_seed: bool,

    /// Open loop: this many requests per second in total, spread evenly over connections.
    #[arg(long, value_name = "OPS_PER_SEC")]
    pub rate: Option<f64>,

    /// Open-loop inter-arrival times.
    #[arg(long, value_enum, default_value = "poisson")]
    pub arrival: ArrivalArg,

    /// Seconds at the start left out of the summary (still in the per-second series).
    #[arg(long, default_value_t = 0.0, value_name = "SECS")]
    pub warmup: f64,

    /// Seconds at the end left out of the summary (needs --test-time).
    #[arg(long, default_value_t = 0.0, value_name = "SECS")]
    pub cooldown: f64,

    /// Write every key of the range once: shorthand for
    /// --ratio=1:0 --key-pattern=P:P --requests=allkeys.
    #[arg(long)]
    pub populate: bool,

    /// Write the JSON report (summary, per-second series, HDR histograms) here.
    #[arg(long, value_name = "FILE")]
    pub json_out_file: Option<PathBuf>,

    /// Write the latency histograms as an HdrHistogram log, `<PREFIX>_FULL_RUN_1.txt`
    /// (one tagged interval per operation type, mergeable with any HDR tool).
    #[arg(long, value_name = "PREFIX")]
    pub hdr_file_prefix: Option<PathBuf>,

    /// Write the human summary here instead of stdout.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub out_file: Option<PathBuf>,

    /// Seconds to wait for a reply before counting a timeout and reconnecting.
    #[arg(long, default_value_t = DEFAULT_REPLY_TIMEOUT_SECS, value_name = "SECS")]
    pub reply_timeout: f64,

    /// Seconds to wait for a connection to be accepted.
    #[arg(long, default_value_t = DEFAULT_CONNECT_TIMEOUT_SECS, value_name = "SECS")]
    pub connect_timeout: f64,

    /// Accepted for memtier compatibility (no histogram is printed anyway).
    #[arg(long)]
    pub hide_histogram: bool,

    /// Print help.
    #[arg(long, action = ArgAction::Help)]
    pub help: Option<bool>,

    /// Print the version.
    #[arg(short = 'v', long, action = ArgAction::Version)]
    pub version: Option<bool>,
}
