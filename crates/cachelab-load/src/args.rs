//! The command line, with memtier_benchmark's option names and defaults, so that a
//! memtier command line runs unchanged after the program name. The `config` module turns
//! it into a validated `Config`.

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
/// Value size when none of `--data-size`, `--data-size-range`, `--data-size-list` is given.
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
pub const DEFAULT_RUN_COUNT: u32 = 1;

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
pub enum TimestampsArg {
    /// Kernel timestamps (SO_TIMESTAMPING) where the kernel gives them: latency ends at
    /// the kernel's receipt of the reply; wire time and the client's own delays reported.
    Kernel,
    /// The program's clock only: latency ends when the reply has been read.
    User,
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

    /// Connect over IPv4 only.
    #[arg(short = '4', long)]
    pub ipv4: bool,

    /// Connect over IPv6 only.
    #[arg(short = '6', long)]
    pub ipv6: bool,

    /// Server port.
    #[arg(short = 'p', long, default_value_t = DEFAULT_PORT)]
    pub port: u16,

    /// Connect to this Unix socket instead of --server and --port.
    #[arg(short = 'S', long, value_name = "PATH")]
    pub unix_socket: Option<PathBuf>,

    /// Shard over a pool's servers as twemproxy does: nutcracker.yml's server entries,
    /// comma-separated (`HOST:PORT[:WEIGHT][ NAME],...`); each connection opens one
    /// socket to every server and sends each key to its server.
    #[arg(long, value_name = "SERVERS", conflicts_with_all = ["server", "port", "unix_socket"])]
    pub shard: Option<String>,

    /// With --shard: the key hash, by twemproxy's name [default: fnv1a_64].
    #[arg(long, value_name = "NAME")]
    pub shard_hash: Option<String>,

    /// With --shard: ketama, modula or random, as twemproxy [default: ketama].
    #[arg(long, value_name = "NAME")]
    pub shard_distribution: Option<String>,

    /// With --shard: two characters; only what a key holds between them is hashed.
    #[arg(long, value_name = "XY")]
    pub shard_hash_tag: Option<String>,

    /// Speak TLS to the server (the handshake is timed apart from request latency).
    #[arg(long)]
    pub tls: bool,

    /// With --tls: the client's certificate chain (PEM), for servers that ask for one.
    #[arg(long, value_name = "FILE", requires = "key")]
    pub cert: Option<PathBuf>,

    /// With --tls: the private key (PEM) of --cert.
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,

    /// With --tls: the CA certificate(s) (PEM) that verify the server (default: the
    /// system's bundle, /etc/ssl/certs/ca-certificates.crt or $SSL_CERT_FILE).
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,

    /// With --tls: accept any server certificate (its handshake signature is still checked).
    #[arg(long)]
    pub tls_skip_verify: bool,

    /// With --tls: the server name sent (SNI) and verified (default: --server).
    #[arg(long, value_name = "NAME")]
    pub sni: Option<String>,

    /// With --tls: the TLS versions offered, comma-separated (TLSv1.2, TLSv1.3; both by default).
    #[arg(long, value_name = "TLSv1.2,TLSv1.3")]
    pub tls_protocols: Option<String>,

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

    /// Start from a preset workload (`--workload list` prints them with their sources);
    /// any option given explicitly overrides the preset's value.
    #[arg(long, value_name = "NAME")]
    pub workload: Option<String>,

    /// Set:Get ratio, sent as repeating runs of S sets then G gets on every connection
    /// (default 1:10).
    #[arg(long, value_name = "S:G")]
    pub ratio: Option<String>,

    /// Requests each closed-loop connection keeps outstanding.
    #[arg(long, default_value_t = DEFAULT_PIPELINE)]
    pub pipeline: usize,

    /// Keys per GET; above 1 every GET is a multi-get (memcached `get k1 k2 ...`, Redis
    /// MGET), and each counts once toward --ratio.
    #[arg(long, default_value_t = 0, value_name = "NUM")]
    pub multiget_keys: usize,

    /// memtier's multi-key GET: up to NUM keys per GET, the keys counting toward --ratio
    /// (--ratio=1:10 --multi-key-get=3 sends SET, then GETs of 3, 3, 3 and 1 keys).
    #[arg(long, value_name = "NUM")]
    pub multi_key_get: Option<usize>,

    /// Value size in bytes (default 32).
    #[arg(short = 'd', long)]
    pub data_size: Option<usize>,

    /// Value sizes from this inclusive range, chosen by --data-size-pattern.
    #[arg(long, value_name = "MIN-MAX")]
    pub data_size_range: Option<String>,

    /// With --data-size-range: R a uniform draw per SET, S a size rising linearly with the
    /// key number over the key range.
    #[arg(long, value_name = "R|S")]
    pub data_size_pattern: Option<String>,

    /// Value sizes from a weighted list: each connection sends SIZE1 WEIGHT1 times in a
    /// row, then SIZE2 WEIGHT2 times, and so on, round and round (memtier's order).
    #[arg(long, value_name = "SIZE1:WEIGHT1,...")]
    pub data_size_list: Option<String>,

    /// Every SET expires after a number of seconds drawn uniformly from this inclusive
    /// range (0 = no expiry).
    #[arg(long, value_name = "MIN-MAX")]
    pub expiry_range: Option<String>,

    /// Value sizes drawn from a distribution for every SET (syntax in
    /// docs/load-generator.md: `gpareto:loc=15,scale=214.476,shape=0.348238`, `file:PATH`,
    /// `fb_value`, ...), rounded and clamped to 0..=--max-item-size.
    #[arg(long, value_name = "DIST")]
    pub data_size_dist: Option<String>,

    /// The largest value size a distribution may draw (default 1000000, which fits
    /// memcached's default 1 MiB item with its key and header; at most 512 MiB).
    #[arg(long, value_name = "BYTES")]
    pub max_item_size: Option<u64>,

    /// Key sizes drawn from a distribution: each key is the prefix, zeros and its number,
    /// as long as the size drawn for that key number (the same key always has the same
    /// size), at least the prefix and the digits, at most 250 bytes.
    #[arg(long, value_name = "DIST")]
    pub key_size_dist: Option<String>,

    /// Every SET's expiry in seconds drawn from a distribution (rounded, 0 = none;
    /// clamped to memcached's 30 days with memcached protocols).
    #[arg(long, value_name = "DIST")]
    pub expiry_dist: Option<String>,

    /// Share of GET keys asked from keys never set (one-hit wonders): key numbers above
    /// --key-maximum, each asked once. From 0 to 1.
    #[arg(long, value_name = "SHARE")]
    pub lone_get_share: Option<f64>,

    /// A lookaside client: a GET that misses is followed by a SET of its key
    /// (`--lookaside=false` turns a preset's off).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub lookaside: Option<bool>,

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
    /// split over the clients (sequential within each client's part). One letter sets both
    /// (default R:R).
    #[arg(long, value_name = "SET:GET")]
    pub key_pattern: Option<String>,

    /// Key popularity for the R pattern from a distribution of bounded support (e.g.
    /// `kvcache_reg_popularity`, or a cachebench pop.json as `file:PATH`), mapped linearly
    /// onto the key range: the lowest values are the lowest key numbers.
    #[arg(long, value_name = "DIST")]
    pub key_dist: Option<String>,

    /// Standard deviation of the gaussian pattern (default: key range / 6).
    #[arg(long)]
    pub key_stddev: Option<f64>,

    /// Median of the gaussian pattern (default: the centre of the key range).
    #[arg(long)]
    pub key_median: Option<f64>,

    /// Exponent of the zipf pattern: key rank r is drawn with probability ~ 1/r^s
    /// (default 1).
    #[arg(long, visible_alias = "key-zipf-exp")]
    pub zipf_exponent: Option<f64>,

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

    /// Open-loop inter-arrival times (default poisson).
    #[arg(long, value_enum)]
    pub arrival: Option<ArrivalArg>,

    /// Open loop: gaps between a connection's requests drawn from this distribution,
    /// rescaled so that their mean gives --rate (as mutilate's --iadist), e.g. `fb_ia`.
    #[arg(long, value_name = "DIST")]
    pub arrival_dist: Option<String>,

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

    /// Full runs to make back to back, one second apart; the summary shows the best, the
    /// worst and their average (memtier's).
    #[arg(short = 'x', long, default_value_t = DEFAULT_RUN_COUNT, value_name = "NUMBER")]
    pub run_count: u32,

    /// With --run-count above 1, print every run's full summary too.
    #[arg(long)]
    pub print_all_runs: bool,

    /// Latency percentiles shown in the human summary (the JSON report has them all).
    #[arg(long, default_value = crate::percentiles::DEFAULT_PERCENTILES, value_name = "P1,P2,...")]
    pub print_percentiles: String,

    /// Each connection closes and re-opens after this many answered requests.
    #[arg(long, value_name = "NUM")]
    pub reconnect_interval: Option<u64>,

    /// Spin in the event loop instead of sleeping for this many microseconds before a
    /// request is due (open loop) and after each send while its reply is awaited, so sends
    /// are on time and replies are timed when they land even when the kernel's wake-up is
    /// late. Costs up to twice this much CPU per request when requests are sparse.
    #[arg(long, default_value_t = 0, value_name = "US")]
    pub busy_poll_us: u64,

    /// Which clock ends each latency: `kernel` (the kernel's receive timestamp of the
    /// reply, falling back to the program's clock where the kernel gives none) or `user`
    /// (the program's clock only). The JSON report says which each figure used.
    #[arg(long, value_enum, default_value = "kernel")]
    pub timestamps: TimestampsArg,

    /// Replay this trace instead of generating requests: twitter/cache-trace's CSV or
    /// Redis MONITOR output, plain or zstd-compressed. Without --requests or --test-time
    /// the whole trace is sent.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<std::path::PathBuf>,

    /// Replay at the trace's own timing divided by this (1 by default: as recorded; 4:
    /// four times faster); 0 sends as fast as the connections go (closed loop, with
    /// --pipeline), or at --rate.
    #[arg(long, value_name = "FACTOR")]
    pub trace_speed: Option<f64>,

    /// Connect, then start the run at this instant (Unix time in milliseconds), so that
    /// instances on several hosts run together. Up to 100 ms in the past starts at once;
    /// further back is refused.
    #[arg(long, value_name = "UNIX_TIME_MS")]
    pub start_at: Option<u64>,

    /// Accepted for memtier compatibility: a broken connection is always re-opened here.
    #[arg(long)]
    pub reconnect_on_error: bool,

    /// Write the JSON report (summary, per-second series, HDR histograms) here.
    #[arg(long, value_name = "FILE")]
    pub json_out_file: Option<PathBuf>,

    /// Write each run's latency histograms as an HdrHistogram log, `<PREFIX>_FULL_RUN_<i>.txt`
    /// (one tagged interval per operation type, mergeable with any HDR tool).
    #[arg(long, value_name = "PREFIX")]
    pub hdr_file_prefix: Option<PathBuf>,

    /// Write the human summary here instead of stdout.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub out_file: Option<PathBuf>,

    /// Seconds to wait for a reply before counting a timeout and reconnecting.
    #[arg(long, default_value_t = DEFAULT_REPLY_TIMEOUT_SECS, value_name = "SECS")]
    pub reply_timeout: f64,

    /// Seconds to wait for a connection to be accepted (0: no limit).
    #[arg(long, visible_alias = "connection-timeout", default_value_t = DEFAULT_CONNECT_TIMEOUT_SECS, value_name = "SECS")]
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
