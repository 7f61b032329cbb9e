//! The report's `configuration`: the run's options as they were understood. Pure.

use cachelab_placement::entry::Address;
use serde::{Deserialize, Serialize};

use crate::config::{AddressFamily, Config, DataSize, Requests};
use crate::cycle::GetKeys;
use crate::keys::KeyPattern;
use crate::sizes::Expiry;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Configuration {
    /// `--trace`: the trace replayed, and `--trace-speed` (0: not timed).
    #[serde(default)]
    pub trace: Option<String>,
    #[serde(default)]
    pub trace_speed: Option<f64>,
    pub server: String,
    pub port: u16,
    pub protocol: String,
    pub threads: usize,
    pub clients: usize,
    pub connections: usize,
    pub mode: String,
    pub pipeline: usize,
    pub rate: Option<f64>,
    pub arrival: Option<String>,
    pub ratio: String,
    /// The most keys one GET asks for.
    pub multiget_keys: usize,
    /// memtier's `--multi-key-get`: GETs ask for up to `multiget_keys` keys, counted
    /// toward the ratio.
    #[serde(default)]
    pub multi_key_get: bool,
    pub data_size_min: usize,
    pub data_size_max: usize,
    /// `R` or `S` with a size range, else null.
    #[serde(default)]
    pub data_size_pattern: Option<String>,
    /// `--data-size-list`, else null.
    #[serde(default)]
    pub data_size_list: Option<Vec<SizeWeightReport>>,
    #[serde(default)]
    pub expiry_min_s: Option<u32>,
    #[serde(default)]
    pub expiry_max_s: Option<u32>,
    /// `--data-size-dist` as written, else null.
    #[serde(default)]
    pub data_size_dist: Option<String>,
    /// `--key-size-dist` as written, else null.
    #[serde(default)]
    pub key_size_dist: Option<String>,
    /// `--key-dist` as written, else null.
    #[serde(default)]
    pub key_dist: Option<String>,
    /// `--expiry-dist` as written, else null.
    #[serde(default)]
    pub expiry_dist: Option<String>,
    /// Share of GET keys asked from keys never set.
    #[serde(default)]
    pub lone_get_share: f64,
    /// A GET that misses is followed by a SET of its key.
    #[serde(default)]
    pub lookaside: bool,
    /// The `--workload` preset the options started from, else null.
    #[serde(default)]
    pub workload: Option<String>,
    pub random_data: bool,
    pub key_prefix: String,
    pub key_minimum: u64,
    pub key_maximum: u64,
    pub key_pattern: String,
    pub key_median: Option<f64>,
    pub key_stddev: Option<f64>,
    pub zipf_exponent: Option<f64>,
    pub test_time_s: Option<f64>,
    pub requests: Option<String>,
    pub warmup_s: f64,
    pub cooldown_s: f64,
    pub seed: u64,
    #[serde(default)]
    pub address_family: String,
    #[serde(default)]
    pub reconnect_interval: Option<u64>,
    /// `--busy-poll-us`: the busy-polled end of each open-loop wait.
    #[serde(default)]
    pub busy_poll_us: u64,
    #[serde(default = "one")]
    pub run_count: u32,
    #[serde(default)]
    pub print_all_runs: bool,
    #[serde(default)]
    pub print_percentiles: Vec<f64>,
    /// `--timestamps`: `kernel` or `user` (reports before the option: `user`).
    #[serde(default = "user_clock")]
    pub timestamps: String,
    /// `--start-at`, Unix ms.
    #[serde(default)]
    pub start_at_unix_ms: Option<u64>,
    /// `-S`: the Unix socket connected to instead of `server:port`.
    #[serde(default)]
    pub unix_socket: Option<String>,
    /// `--tls` and its options; null without TLS.
    #[serde(default)]
    pub tls: Option<TlsConfiguration>,
    /// `--shard` and its options; null when the run has one server.
    #[serde(default)]
    pub shard: Option<ShardConfiguration>,
}

/// The pool a sharded run spread its keys over.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ShardConfiguration {
    /// Each server's address (`host:port` or a socket's path), in the list's order.
    pub servers: Vec<String>,
    /// The names hashed onto the ketama ring, in the same order.
    pub names: Vec<String>,
    pub weights: Vec<u32>,
    pub hash: String,
    pub distribution: String,
    /// The two hash-tag characters, or null.
    pub hash_tag: Option<String>,
}

/// The TLS a run asked for (what was negotiated is in `connection_setup`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TlsConfiguration {
    /// `--tls-protocols`, e.g. `TLSv1.2,TLSv1.3`.
    pub protocols: String,
    /// How the server's certificate is verified: `cacert` (the file given), `system`
    /// (the system's CA bundle) or `skip` (`--tls-skip-verify`).
    pub verify: String,
    /// A client certificate was offered (`--cert`, `--key`).
    pub client_certificate: bool,
    pub sni: Option<String>,
}

fn user_clock() -> String {
    "user".into()
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct SizeWeightReport {
    pub size: usize,
    pub weight: u32,
}

fn pattern_text(config: &Config) -> String {
    let w = &config.workload;
    format!("{}:{}", w.set_pattern.letter(), w.get_pattern.letter())
}

pub(super) fn configuration(config: &Config) -> Configuration {
    let w = &config.workload;
    let patterns = [w.set_pattern, w.get_pattern];
    let gaussian = patterns.iter().find_map(|p| match p {
        KeyPattern::Gaussian { median, stddev } => Some((*median, *stddev)),
        _ => None,
    });
    let zipf = patterns.iter().find_map(|p| match p {
        KeyPattern::Zipf { exponent } => Some(*exponent),
        _ => None,
    });
    let data_size_pattern = match &w.data_size {
        DataSize::Range { pattern, .. } => Some(pattern.letter().to_string()),
        _ => None,
    };
    let data_size_list = match &w.data_size {
        DataSize::List(list) => Some(
            list.iter()
                .map(|e| SizeWeightReport {
                    size: e.size,
                    weight: e.weight,
                })
                .collect(),
        ),
        _ => None,
    };
    let expiry_range = match &w.expiry {
        Some(Expiry::Range(range)) => Some(*range),
        _ => None,
    };
    Configuration {
        trace: config.trace.as_ref().map(|t| t.path.display().to_string()),
        trace_speed: config.trace.as_ref().map(|t| t.speed),
        server: config.server.clone(),
        port: config.port,
        protocol: w.protocol.name().into(),
        threads: config.threads,
        clients: config.clients,
        connections: config.connections(),
        mode: match (&config.trace, config.open_loop.is_some()) {
            (Some(t), false) if t.speed > 0.0 => "replay",
            (_, true) => "open",
            _ => "closed",
        }
        .into(),
        pipeline: config.pipeline,
        rate: config.open_loop.as_ref().map(|o| o.rate),
        arrival: config.open_loop.as_ref().map(|o| o.arrival.name()),
        ratio: format!("{}:{}", w.ratio.sets, w.ratio.gets),
        multiget_keys: w.get_keys.max(),
        multi_key_get: matches!(w.get_keys, GetKeys::Memtier(_)),
        data_size_min: w.data_size.min(),
        data_size_max: w.data_size.max(),
        data_size_pattern,
        data_size_list,
        expiry_min_s: expiry_range.map(|e| e.min),
        expiry_max_s: expiry_range.map(|e| e.max),
        data_size_dist: match &w.data_size {
            DataSize::Dist { spec, .. } => Some(spec.clone()),
            _ => None,
        },
        key_size_dist: w.key_size.as_ref().map(|k| k.spec.clone()),
        key_dist: w.key_dist.as_ref().map(|k| k.0.clone()),
        expiry_dist: match &w.expiry {
            Some(Expiry::Dist { spec, .. }) => Some(spec.clone()),
            _ => None,
        },
        lone_get_share: w.lone_get_share,
        lookaside: w.lookaside,
        workload: w.preset.clone(),
        random_data: w.random_data,
        key_prefix: w.key_prefix.clone(),
        key_minimum: w.keys.min,
        key_maximum: w.keys.max,
        key_pattern: pattern_text(config),
        key_median: gaussian.map(|g| g.0),
        key_stddev: gaussian.map(|g| g.1),
        zipf_exponent: zipf,
        test_time_s: config.test_time.map(|t| t.as_secs_f64()),
        requests: config.requests.map(|r| match r {
            Requests::PerClient(n) => n.to_string(),
            Requests::AllKeys => "allkeys".into(),
        }),
        warmup_s: config.warmup.as_secs_f64(),
        cooldown_s: config.cooldown.as_secs_f64(),
        seed: config.seed,
        address_family: match config.family {
            AddressFamily::Any => "any",
            AddressFamily::Ipv4 => "ipv4",
            AddressFamily::Ipv6 => "ipv6",
        }
        .into(),
        reconnect_interval: config.reconnect_interval,
        busy_poll_us: config.busy_poll.as_micros() as u64,
        run_count: config.run_count,
        print_all_runs: config.print_all_runs,
        print_percentiles: config.print_percentiles.clone(),
        timestamps: config.timestamps.name().into(),
        start_at_unix_ms: config.start_at_unix_ms,
        unix_socket: config.unix_socket.as_ref().map(|p| p.display().to_string()),
        tls: config.tls.as_ref().map(|t| TlsConfiguration {
            protocols: t.protocols.names(),
            verify: match (t.skip_verify, &t.cacert) {
                (true, _) => "skip",
                (false, Some(_)) => "cacert",
                (false, None) => "system",
            }
            .into(),
            client_certificate: t.client_cert.is_some(),
            sni: t.sni.clone(),
        }),
        shard: config.shard.as_ref().map(|s| ShardConfiguration {
            servers: s.servers.iter().map(|e| address(&e.address)).collect(),
            names: s.servers.iter().map(|e| e.name.clone()).collect(),
            weights: s.servers.iter().map(|e| e.weight).collect(),
            hash: s.hash.name().into(),
            distribution: s.distribution.name().into(),
            hash_tag: s.hash_tag.map(|t| String::from_utf8_lossy(&t).into_owned()),
        }),
    }
}

/// A server's address as the report shows it.
pub(super) fn address(address: &Address) -> String {
    match address {
        Address::Tcp { host, port } => format!("{host}:{port}"),
        Address::Unix(path) => path.display().to_string(),
    }
}
