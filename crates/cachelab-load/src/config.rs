//! The validated configuration of a run, built from [`Args`]; every error names the
//! option at fault.

use std::path::PathBuf;
use std::time::Duration;

use cachelab_protocol::limits::MAX_KEY_LEN;
use thiserror::Error;

use crate::args::{
    Args, ArrivalArg, ProtocolArg, TimestampsArg, DEFAULT_DATA_SIZE, DEFAULT_REQUESTS,
};
use crate::cycle::{GetKeys, Ratio};
use crate::keys::{KeyPattern, KeyRange};
use crate::schedule::Arrival;
use crate::sizes::{self, MEMCACHED_MAX_RELATIVE_EXPTIME};
pub use crate::sizes::{DataSize, ExpiryRange, SizePattern};
use crate::timing::TimestampMode;
use crate::tls::{parse_protocols, Protocols, TlsOptions};

/// `--connect-timeout=0` (memtier's "no limit"): a day, far beyond any run.
pub const NO_CONNECT_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    MemcacheText,
    MemcacheBinary,
    Redis,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::MemcacheText => "memcache_text",
            Protocol::MemcacheBinary => "memcache_binary",
            Protocol::Redis => "redis",
        }
    }
}

/// Which addresses of the server to try (`-4`, `-6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressFamily {
    /// IPv4 first, then IPv6.
    Any,
    Ipv4,
    Ipv6,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requests {
    PerClient(u64),
    /// Each client covers its share of the key range (see [`crate::keys::KeyGen::allkeys_count`]).
    AllKeys,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpenLoop {
    /// Total requests per second over all connections.
    pub rate: f64,
    pub arrival: Arrival,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub protocol: Protocol,
    pub ratio: Ratio,
    pub get_keys: GetKeys,
    pub data_size: DataSize,
    /// Expiry of every SET, if any.
    pub expiry: Option<ExpiryRange>,
    pub random_data: bool,
    pub key_prefix: String,
    pub keys: KeyRange,
    pub set_pattern: KeyPattern,
    pub get_pattern: KeyPattern,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub server: String,
    pub port: u16,
    /// `-S`: a Unix socket instead of `server:port`.
    pub unix_socket: Option<PathBuf>,
    /// `--tls` and its options.
    pub tls: Option<TlsOptions>,
    pub family: AddressFamily,
    pub threads: usize,
    pub clients: usize,
    pub pipeline: usize,
    pub test_time: Option<Duration>,
    pub requests: Option<Requests>,
    pub workload: Workload,
    pub open_loop: Option<OpenLoop>,
    pub warmup: Duration,
    pub cooldown: Duration,
    pub seed: u64,
    pub reply_timeout: Duration,
    pub connect_timeout: Duration,
    /// Each connection re-opens after this many answered requests.
    pub reconnect_interval: Option<u64>,
    /// The last part of each wait before a due request (open loop), and the first part of
    /// each wait for a reply, that are busy-polled.
    pub busy_poll: Duration,
    /// Full runs made back to back.
    pub run_count: u32,
    /// With several runs, print each run's summary, not only the best, worst and average.
    pub print_all_runs: bool,
    /// Percentiles of the human summary's columns.
    pub print_percentiles: Vec<f64>,
    /// Which clock ends each latency.
    pub timestamps: TimestampMode,
    /// The instant (Unix ms) the first run starts on, once connected.
    pub start_at_unix_ms: Option<u64>,
}

impl Config {
    pub fn connections(&self) -> usize {
        self.threads * self.clients
    }
}

#[derive(Debug, Clone, PartialEq, Error)]
pub enum ConfigError {
    #[error("--{option}: {reason}")]
    Invalid {
        option: &'static str,
        reason: String,
    },
}

fn invalid(option: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        option,
        reason: reason.into(),
    }
}

fn seconds(option: &'static str, secs: f64) -> Result<Duration, ConfigError> {
    Duration::try_from_secs_f64(secs)
        .map_err(|_| invalid(option, format!("{secs} is not a number of seconds")))
}

pub fn parse_ratio(text: &str) -> Result<Ratio, ConfigError> {
    let bad = || invalid("ratio", format!("{text:?} is not S:G with whole numbers"));
    let (s, g) = text.split_once(':').ok_or_else(bad)?;
    let ratio = Ratio {
        sets: s.trim().parse().map_err(|_| bad())?,
        gets: g.trim().parse().map_err(|_| bad())?,
    };
    if ratio.sets == 0 && ratio.gets == 0 {
        return Err(invalid("ratio", "0:0 sends nothing"));
    }
    Ok(ratio)
}

/// `-d`, `--data-size-range` with `--data-size-pattern`, or `--data-size-list`: at most
/// one of them, as memtier allows.
fn parse_data_size(args: &Args) -> Result<DataSize, ConfigError> {
    let pattern = match args.data_size_pattern.as_deref() {
        None | Some("R") => SizePattern::Random,
        Some("S") => SizePattern::Sequential,
        Some(other) => {
            return Err(invalid(
                "data-size-pattern",
                format!("{other:?} is not R or S"),
            ))
        }
    };
    if args.data_size_pattern.is_some() && args.data_size_range.is_none() {
        return Err(invalid(
            "data-size-pattern",
            "chooses sizes from --data-size-range, which is not given",
        ));
    }
    match (args.data_size, &args.data_size_range, &args.data_size_list) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => Err(invalid(
            "data-size",
            "cannot be used with --data-size-range or --data-size-list",
        )),
        (_, Some(_), Some(_)) => Err(invalid(
            "data-size-list",
            "cannot be used with --data-size-range",
        )),
        (_, Some(range), None) => {
            let (min, max) =
                sizes::parse_range(range).map_err(|e| invalid("data-size-range", e))?;
            Ok(DataSize::Range {
                min: min as usize,
                max: max as usize,
                pattern,
            })
        }
        (_, None, Some(list)) => Ok(DataSize::List(
            sizes::parse_size_list(list).map_err(|e| invalid("data-size-list", e))?,
        )),
        (size, None, None) => Ok(DataSize::Fixed(size.unwrap_or(DEFAULT_DATA_SIZE))),
    }
}

/// `--multiget-keys` (ours) or `--multi-key-get` (memtier's), not both.
fn parse_get_keys(args: &Args) -> Result<GetKeys, ConfigError> {
    match args.multi_key_get {
        None => Ok(GetKeys::Every(args.multiget_keys.max(1))),
        Some(_) if args.multiget_keys > 0 => Err(invalid(
            "multi-key-get",
            "cannot be used with --multiget-keys (memtier's keys counted toward --ratio, or ours: every GET that many keys)",
        )),
        Some(0) => Err(invalid("multi-key-get", "must be at least 1")),
        Some(n) => Ok(GetKeys::Memtier(n)),
    }
}

fn parse_expiry(args: &Args, protocol: Protocol) -> Result<Option<ExpiryRange>, ConfigError> {
    let Some(text) = &args.expiry_range else {
        return Ok(None);
    };
    let range = ExpiryRange::parse(text).map_err(|e| invalid("expiry-range", e))?;
    if protocol != Protocol::Redis && range.max > MEMCACHED_MAX_RELATIVE_EXPTIME {
        return Err(invalid(
            "expiry-range",
            format!(
                "memcached reads an expiry above {MEMCACHED_MAX_RELATIVE_EXPTIME} s (30 days) as a Unix time: it would expire at once"
            ),
        ));
    }
    Ok(Some(range))
}

fn parse_requests(text: &str) -> Result<Requests, ConfigError> {
    if text == "allkeys" {
        return Ok(Requests::AllKeys);
    }
    match text.parse::<u64>() {
        Ok(n) if n > 0 => Ok(Requests::PerClient(n)),
        _ => Err(invalid(
            "requests",
            format!("{text:?} is not a positive number or allkeys"),
        )),
    }
}

/// `R`, `G`, `Z`, `S`, `P`, or `SET:GET` with one letter on each side.
fn parse_key_patterns(
    args: &Args,
    range: KeyRange,
) -> Result<(KeyPattern, KeyPattern), ConfigError> {
    let letters: Vec<&str> = args.key_pattern.split(':').collect();
    let (set, get) = match letters.as_slice() {
        [both] => (*both, *both),
        [set, get] => (*set, *get),
        _ => {
            return Err(invalid(
                "key-pattern",
                format!("{:?} is not SET:GET", args.key_pattern),
            ))
        }
    };
    Ok((pattern(set, args, range)?, pattern(get, args, range)?))
}

fn pattern(letter: &str, args: &Args, range: KeyRange) -> Result<KeyPattern, ConfigError> {
    match letter.trim() {
        "R" => Ok(KeyPattern::Uniform),
        "S" => Ok(KeyPattern::Sequential),
        "P" => Ok(KeyPattern::Parallel),
        "G" => {
            let median = args
                .key_median
                .unwrap_or((range.min as f64 + range.max as f64) / 2.0);
            let stddev = args
                .key_stddev
                .unwrap_or((range.max - range.min) as f64 / 6.0);
            if !(stddev > 0.0 && stddev.is_finite()) {
                return Err(invalid(
                    "key-stddev",
                    format!("{stddev} must be positive (is the key range a single key?)"),
                ));
            }
            if !(median >= range.min as f64 && median <= range.max as f64) {
                return Err(invalid(
                    "key-median",
                    format!("{median} is outside the key range"),
                ));
            }
            Ok(KeyPattern::Gaussian { median, stddev })
        }
        "Z" => {
            let exponent = args.zipf_exponent;
            if !(exponent > 0.0 && exponent.is_finite()) {
                return Err(invalid(
                    "zipf-exponent",
                    format!("{exponent} must be positive"),
                ));
            }
            Ok(KeyPattern::Zipf { exponent })
        }
        other => Err(invalid(
            "key-pattern",
            format!("{other:?} is not one of R, G, Z, S, P"),
        )),
    }
}

/// `--tls` and the options that only mean something with it.
fn parse_tls(args: &Args) -> Result<Option<TlsOptions>, ConfigError> {
    let protocols = args
        .tls_protocols
        .as_deref()
        .map(parse_protocols)
        .transpose()
        .map_err(|e| invalid("tls-protocols", e))?;
    if !args.tls {
        let given = [
            ("cert", args.cert.is_some()),
            ("key", args.key.is_some()),
            ("cacert", args.cacert.is_some()),
            ("tls-skip-verify", args.tls_skip_verify),
            ("sni", args.sni.is_some()),
            ("tls-protocols", protocols.is_some()),
        ];
        return match given.iter().find(|(_, given)| *given) {
            Some((option, _)) => Err(invalid(option, "needs --tls")),
            None => Ok(None),
        };
    }
    if args.tls_skip_verify && args.cacert.is_some() {
        return Err(invalid(
            "tls-skip-verify",
            "cannot be used with --cacert (verify against it, or skip verifying)",
        ));
    }
    Ok(Some(TlsOptions {
        client_cert: args.cert.clone().zip(args.key.clone()),
        cacert: args.cacert.clone(),
        skip_verify: args.tls_skip_verify,
        sni: args.sni.clone(),
        protocols: protocols.unwrap_or(Protocols::default()),
    }))
}

impl TryFrom<&Args> for Config {
    type Error = ConfigError;

    fn try_from(args: &Args) -> Result<Config, ConfigError> {
        let mut args = args.clone();
        if args.populate {
            args.ratio = "1:0".into();
            args.key_pattern = "P:P".into();
            args.requests = Some("allkeys".into());
        }
        let args = &args;
        if args.threads == 0 {
            return Err(invalid("threads", "must be at least 1"));
        }
        if args.clients == 0 {
            return Err(invalid("clients", "must be at least 1"));
        }
        if args.pipeline == 0 {
            return Err(invalid("pipeline", "must be at least 1"));
        }
        if args.key_minimum > args.key_maximum {
            return Err(invalid("key-maximum", "is below --key-minimum"));
        }
        let keys = KeyRange::new(args.key_minimum, args.key_maximum);
        let longest_key = args.key_prefix.len() + args.key_maximum.to_string().len();
        if longest_key > MAX_KEY_LEN {
            return Err(invalid(
                "key-prefix",
                format!("keys would be {longest_key} bytes, over memcached's {MAX_KEY_LEN}"),
            ));
        }
        if args.key_prefix.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(invalid(
                "key-prefix",
                "must not contain spaces or control characters",
            ));
        }
        let (set_pattern, get_pattern) = parse_key_patterns(args, keys)?;
        let connections = args.threads * args.clients;
        for p in [set_pattern, get_pattern] {
            if p == KeyPattern::Parallel && (connections as u64) > keys.len() {
                return Err(invalid(
                    "key-pattern",
                    format!(
                        "P splits {} keys over {connections} clients: fewer keys than clients",
                        keys.len()
                    ),
                ));
            }
        }
        let data_size = parse_data_size(args)?;
        let protocol = match args.protocol {
            ProtocolArg::MemcacheText => Protocol::MemcacheText,
            ProtocolArg::MemcacheBinary => Protocol::MemcacheBinary,
            ProtocolArg::Redis => Protocol::Redis,
        };
        let family = match (args.ipv4, args.ipv6) {
            (true, true) => return Err(invalid("ipv4", "cannot be used with --ipv6")),
            (true, false) => AddressFamily::Ipv4,
            (false, true) => AddressFamily::Ipv6,
            (false, false) => AddressFamily::Any,
        };
        if args.run_count == 0 {
            return Err(invalid("run-count", "must be at least 1"));
        }
        if args.reconnect_interval == Some(0) {
            return Err(invalid("reconnect-interval", "must be at least 1"));
        }
        let print_percentiles = crate::percentiles::parse(&args.print_percentiles)
            .map_err(|e| invalid("print-percentiles", e))?;
        let connect_timeout = match seconds("connect-timeout", args.connect_timeout)? {
            Duration::ZERO => NO_CONNECT_TIMEOUT,
            t => t,
        };
        let test_time = args
            .test_time
            .map(|t| seconds("test-time", t))
            .transpose()?;
        if test_time == Some(Duration::ZERO) {
            return Err(invalid("test-time", "must be positive"));
        }
        let requests = match (&args.requests, test_time) {
            (Some(text), _) => Some(parse_requests(text)?),
            (None, None) => Some(Requests::PerClient(DEFAULT_REQUESTS)),
            (None, Some(_)) => None,
        };
        let warmup = seconds("warmup", args.warmup)?;
        let cooldown = seconds("cooldown", args.cooldown)?;
        match test_time {
            Some(t) if warmup + cooldown >= t => {
                return Err(invalid(
                    "warmup",
                    "warm-up plus cool-down leave nothing of --test-time",
                ));
            }
            None if !cooldown.is_zero() => {
                return Err(invalid(
                    "cooldown",
                    "needs --test-time: the end of a --requests run is not known in advance",
                ));
            }
            _ => {}
        }
        let open_loop = match args.rate {
            None => None,
            Some(rate) if rate > 0.0 && rate.is_finite() => {
                if args.pipeline != 1 {
                    return Err(invalid("pipeline", "has no meaning with --rate: an open loop sends on schedule, however many requests are outstanding"));
                }
                let arrival = match args.arrival {
                    ArrivalArg::Poisson => Arrival::Poisson,
                    ArrivalArg::Fixed => Arrival::Fixed,
                };
                Some(OpenLoop { rate, arrival })
            }
            Some(rate) => {
                return Err(invalid(
                    "rate",
                    format!("{rate} must be a positive number of requests per second"),
                ))
            }
        };
        let seed = if args.randomize {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(args.seed, |d| d.as_nanos() as u64)
        } else {
            args.seed
        };
        let tls = parse_tls(args)?;
        Ok(Config {
            server: args.server.clone(),
            port: args.port,
            unix_socket: args.unix_socket.clone(),
            tls,
            family,
            threads: args.threads,
            clients: args.clients,
            pipeline: args.pipeline,
            test_time,
            requests,
            workload: Workload {
                protocol,
                ratio: parse_ratio(&args.ratio)?,
                get_keys: parse_get_keys(args)?,
                data_size,
                expiry: parse_expiry(args, protocol)?,
                random_data: args.random_data,
                key_prefix: args.key_prefix.clone(),
                keys,
                set_pattern,
                get_pattern,
            },
            open_loop,
            warmup,
            cooldown,
            seed,
            reply_timeout: seconds("reply-timeout", args.reply_timeout)?,
            connect_timeout,
            reconnect_interval: args.reconnect_interval,
            busy_poll: Duration::from_micros(args.busy_poll_us),
            run_count: args.run_count,
            print_all_runs: args.print_all_runs,
            print_percentiles,
            timestamps: match args.timestamps {
                TimestampsArg::Kernel => TimestampMode::Kernel,
                TimestampsArg::User => TimestampMode::User,
            },
            start_at_unix_ms: args.start_at,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn config(line: &str) -> Result<Config, ConfigError> {
        let args =
            Args::try_parse_from(std::iter::once("cachelab-load").chain(line.split_whitespace()))
                .unwrap();
        Config::try_from(&args)
    }

    #[test]
    fn defaults_are_memtiers() {
        let c = config("").unwrap();
        assert_eq!(
            (c.server.as_str(), c.port, c.threads, c.clients),
            ("localhost", 6379, 4, 50)
        );
        assert_eq!(c.workload.protocol, Protocol::Redis);
        assert_eq!(c.workload.ratio, Ratio { sets: 1, gets: 10 });
        assert_eq!(c.requests, Some(Requests::PerClient(10_000)));
        assert_eq!(c.workload.key_prefix, "memtier-");
        assert_eq!(c.workload.keys, KeyRange::new(0, 10_000_000));
        assert_eq!(c.workload.data_size, DataSize::Fixed(32));
        assert_eq!(c.workload.set_pattern, KeyPattern::Uniform);
        assert!(c.open_loop.is_none());
    }

    #[test]
    fn tls_options_are_gathered_and_need_tls() {
        let c = config(
            "--tls --cacert ca.pem --cert c.pem --key c.key --sni cache.example --tls-protocols TLSv1.3",
        )
        .unwrap();
        let tls = c.tls.unwrap();
        assert_eq!(tls.cacert, Some(PathBuf::from("ca.pem")));
        assert_eq!(
            tls.client_cert,
            Some((PathBuf::from("c.pem"), PathBuf::from("c.key")))
        );
        assert_eq!(tls.sni.as_deref(), Some("cache.example"));
        assert!(tls.protocols.tls13 && !tls.protocols.tls12);
        assert!(!tls.skip_verify);
        assert_eq!(config("").unwrap().tls, None);
        for line in [
            "--cacert ca.pem",
            "--tls-skip-verify",
            "--sni x",
            "--tls-protocols TLSv1.2",
        ] {
            let e = config(line).unwrap_err().to_string();
            assert!(e.ends_with(": needs --tls"), "{line}: {e}");
        }
        let e = config("--tls --tls-protocols TLSv1.1")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--tls-protocols: TLSv1.1 is not offered"),
            "{e}"
        );
        let e = config("--tls --tls-skip-verify --cacert ca.pem").unwrap_err();
        assert!(e
            .to_string()
            .starts_with("--tls-skip-verify: cannot be used with --cacert"));
    }

    #[test]
    fn a_unix_socket_replaces_server_and_port() {
        let c = config("-S /tmp/cachelab-m.sock").unwrap();
        assert_eq!(c.unix_socket, Some(PathBuf::from("/tmp/cachelab-m.sock")));
    }

    #[test]
    fn a_memtier_command_line_parses_unchanged() {
        let c = config(
            "-h 127.0.0.1 -p 11211 -P memcache_text -t 2 -c 8 --test-time=30 --ratio=1:9 \
             --multi-key-get=3 -d 100 -R --key-prefix=k: --key-minimum=1 --key-maximum=1000 \
             --key-pattern=Z:G --key-zipf-exp=0.99 --pipeline=4 --hide-histogram --distinct-client-seed",
        )
        .unwrap();
        assert_eq!(
            (c.server.as_str(), c.port, c.threads, c.clients, c.pipeline),
            ("127.0.0.1", 11211, 2, 8, 4)
        );
        assert_eq!(c.test_time, Some(Duration::from_secs(30)));
        assert_eq!(c.requests, None);
        assert_eq!(c.workload.get_keys, GetKeys::Memtier(3));
        assert_eq!(c.workload.set_pattern, KeyPattern::Zipf { exponent: 0.99 });
        assert_eq!(
            c.workload.get_pattern,
            KeyPattern::Gaussian {
                median: 500.5,
                stddev: 999.0 / 6.0
            }
        );
        assert!(c.workload.random_data);
    }

    #[test]
    fn populate_is_memtiers_allkeys_idiom() {
        let a = config("--populate --key-maximum=99 -t 1 -c 2").unwrap();
        let b =
            config("--ratio=1:0 --key-pattern=P:P --requests=allkeys --key-maximum=99 -t 1 -c 2")
                .unwrap();
        assert_eq!(a, b);
        assert_eq!(a.requests, Some(Requests::AllKeys));
    }

    #[test]
    fn open_loop_needs_a_positive_rate_and_no_pipeline() {
        let c = config("--rate 1000 --arrival fixed --test-time 1").unwrap();
        assert_eq!(
            c.open_loop,
            Some(OpenLoop {
                rate: 1000.0,
                arrival: Arrival::Fixed
            })
        );
        assert!(config("--rate 0").is_err());
        assert!(config("--rate 100 --pipeline 2").is_err());
    }

    #[test]
    fn errors_name_the_option_at_fault() {
        for (line, option) in [
            ("--ratio=0:0", "--ratio"),
            ("--ratio=1-10", "--ratio"),
            ("--key-pattern=X:R", "--key-pattern"),
            ("--key-minimum=10 --key-maximum=5", "--key-maximum"),
            ("--data-size-range=9-3", "--data-size-range"),
            ("--requests=some", "--requests"),
            ("--cooldown=1", "--cooldown"),
            ("--test-time=2 --warmup=1 --cooldown=1", "--warmup"),
            (
                "--key-pattern=P:P --key-maximum=3 -t 1 -c 5",
                "--key-pattern",
            ),
            ("--key-pattern=Z:Z --zipf-exponent=0", "--zipf-exponent"),
            ("--key-prefix=a\x01b", "--key-prefix"),
            ("-d 10 --data-size-range=1-5", "--data-size"),
            ("-d 10 --data-size-list=1:1", "--data-size"),
            (
                "--data-size-range=1-5 --data-size-list=1:1",
                "--data-size-list",
            ),
            ("--data-size-list=1:0", "--data-size-list"),
            ("--data-size-pattern=S", "--data-size-pattern"),
            (
                "--data-size-pattern=X --data-size-range=1-2",
                "--data-size-pattern",
            ),
            ("--expiry-range=0-0", "--expiry-range"),
            (
                "-P memcache_text --expiry-range=1-2592001",
                "--expiry-range",
            ),
            ("--multi-key-get=0", "--multi-key-get"),
            ("--multi-key-get=2 --multiget-keys=2", "--multi-key-get"),
            ("--print-percentiles=50,101", "--print-percentiles"),
            ("--run-count=0", "--run-count"),
            ("--reconnect-interval=0", "--reconnect-interval"),
            ("-4 -6", "--ipv4"),
        ] {
            let e = config(line).unwrap_err().to_string();
            assert!(e.starts_with(option), "{line}: {e}");
        }
    }

    #[test]
    fn memtiers_sizes_expiry_runs_and_percentiles_parse() {
        let c = config(
            "-P redis --data-size-list=32:3,1024:1 --expiry-range=10-20 --print-percentiles=50,99.99 \
             --reconnect-interval=100 -x 3 --print-all-runs --reconnect-on-error --connection-timeout=0 -4",
        )
        .unwrap();
        assert_eq!(c.workload.data_size.max(), 1024);
        assert_eq!(c.workload.expiry, Some(ExpiryRange { min: 10, max: 20 }));
        assert_eq!(c.print_percentiles, [50.0, 99.99]);
        assert_eq!(
            (c.reconnect_interval, c.run_count, c.print_all_runs),
            (Some(100), 3, true)
        );
        assert_eq!(c.connect_timeout, NO_CONNECT_TIMEOUT);
        assert_eq!(c.family, AddressFamily::Ipv4);
        let r = config("--data-size-range=10-20 --data-size-pattern=S").unwrap();
        assert_eq!(
            r.workload.data_size,
            DataSize::Range {
                min: 10,
                max: 20,
                pattern: SizePattern::Sequential
            }
        );
        let d = config("").unwrap();
        assert_eq!(d.print_percentiles, [50.0, 99.0, 99.9]);
        assert_eq!((d.run_count, d.reconnect_interval), (1, None));
        assert_eq!(d.workload.get_keys, GetKeys::Every(1));
        assert_eq!(
            config("--multiget-keys=4").unwrap().workload.get_keys,
            GetKeys::Every(4)
        );
    }
}
