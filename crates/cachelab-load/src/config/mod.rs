//! The validated configuration of a run, built from [`Args`]; every error names the
//! option at fault.

mod preset;
mod replay;
mod shard;
mod workload;

use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

use crate::args::{Args, ArrivalArg, TimestampsArg, DEFAULT_REQUESTS};
use crate::presets;
use crate::schedule::Arrival;
pub use crate::sizes::{DataSize, Expiry, ExpiryRange, SizePattern};
use crate::timing::TimestampMode;
use crate::tls::{Protocols, TlsOptions};
pub use replay::{replay_options, TraceReplay};
pub use shard::Shard;
pub use workload::{parse_ratio, Workload};

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

#[derive(Debug, Clone, PartialEq)]
pub struct OpenLoop {
    /// Total requests per second over all connections.
    pub rate: f64,
    pub arrival: Arrival,
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
    /// `--trace`: replay a trace instead of generating requests.
    pub trace: Option<TraceReplay>,
    /// `--shard`: every connection sends to each server of a pool, key by key.
    pub shard: Option<Shard>,
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

/// `--tls` and the options that only mean something with it.
fn parse_tls(args: &Args) -> Result<Option<TlsOptions>, ConfigError> {
    let protocols = args
        .tls_protocols
        .as_deref()
        .map(Protocols::parse)
        .transpose()
        .map_err(|e| invalid("tls-protocols", e.to_string()))?;
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
        if let Some(name) = &args.workload {
            let preset = presets::find(name).map_err(|e| invalid("workload", e))?;
            preset::apply(&preset, &mut args);
        }
        if args.populate {
            args.ratio = Some("1:0".into());
            args.key_pattern = Some("P:P".into());
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
        let workload = workload::parse(args, args.threads * args.clients)?;
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
        let trace = replay_options(args)?;
        let requests = match (&args.requests, test_time) {
            (Some(text), _) => Some(parse_requests(text)?),
            // A replay without a bound sends the whole trace.
            (None, None) if trace.is_some() => None,
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
            None if args.arrival_dist.is_some() => {
                return Err(invalid("arrival-dist", "needs --rate (an open loop)"))
            }
            None => None,
            Some(rate) if rate > 0.0 && rate.is_finite() => {
                if args.pipeline != 1 {
                    return Err(invalid("pipeline", "has no meaning with --rate: an open loop sends on schedule, however many requests are outstanding"));
                }
                let arrival = match (args.arrival, &args.arrival_dist) {
                    (Some(_), Some(_)) => {
                        return Err(invalid("arrival-dist", "cannot be used with --arrival"))
                    }
                    (_, Some(spec)) => workload::arrival_dist(spec)?,
                    (None | Some(ArrivalArg::Poisson), None) => Arrival::Poisson,
                    (Some(ArrivalArg::Fixed), None) => Arrival::Fixed,
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
        let shard = shard::parse(args, workload.get_keys)?;
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
            workload,
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
            trace,
            shard,
        })
    }
}

#[cfg(test)]
mod tests;
