//! The run's report: built from the configuration and the merged measurements, written as
//! JSON (`--json-out-file`, schema in `schema/load-report.schema.json` and
//! `docs/load-generator.md`) and, by [`text`], as the human summary and an HdrHistogram log.
//! Pure.

mod runs;
mod setup;
#[cfg(test)]
mod test_support;
mod text;
mod timing;

pub use runs::{build, build_runs, Measured};
pub use setup::SetupReport;
pub use text::{fell_behind_warning, format_summary, hdr_log};
pub use timing::{ClientCpu, Clocks, TimingHistograms, TimingReport, CLIENT_SATURATED_SHARE};

use cachelab_stats::{LatencyHistogram, Welford};
use serde::{Deserialize, Serialize};

use crate::config::{AddressFamily, Config, DataSize, Requests};
use crate::cycle::GetKeys;
use crate::keys::KeyPattern;
use crate::record::{OpStats, SecondOp};
use crate::sent::SentReport;
use crate::sizes::Expiry;
use crate::workload::Op;

/// Bumped whenever a field changes meaning or disappears.
pub const SCHEMA: &str = "cachelab-load/1";

/// An open-loop run "fell behind" when it sent less than this share of the requests its
/// schedule held for the window (not of the target rate: a Poisson schedule's count
/// varies around it)...
pub const FELL_BEHIND_RATE_SHARE: f64 = 0.99;
/// ...or when its p99 send lag exceeded this (µs): latencies are then inflated by the
/// client, not the server.
pub const FELL_BEHIND_P99_LAG_US: u64 = 1000;
/// Send lags above this (µs) count as late requests.
pub const LATE_LAG_US: u64 = 1000;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Report {
    pub schema: String,
    pub tool: Tool,
    pub configuration: Configuration,
    pub run: Run,
    pub summary: Summary,
    pub totals: Totals,
    pub open_loop: Option<OpenLoopReport>,
    pub series: Vec<Second>,
    pub histograms: Histograms,
    /// Where the requests' time went and on which clock (wire time, response time to the
    /// kernel's receipt, the client's own delays). Absent from reports before it existed.
    #[serde(default)]
    pub timing: Option<TimingReport>,
    /// The load generator's own CPU over the run.
    #[serde(default)]
    pub client_cpu: Option<ClientCpu>,
    /// Connection set-up (connect and TLS handshake), apart from request latency.
    #[serde(default)]
    pub connection_setup: Option<SetupReport>,
    /// Open loop: a sample of the gaps in ns between successive sends of each load
    /// thread inside the window (each thread's in turn, at most 10,000 in all), so the
    /// harness can test that the arrivals follow the chosen distribution. Empty in
    /// closed loop.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub send_intervals_ns: Vec<u64>,
    /// What was sent: key and value sizes and how often each key was asked
    /// ([`crate::sent`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent: Option<SentReport>,
    /// Every run of `--run-count`, in order (one entry for a single run). With several,
    /// the fields above are their aggregate (see [`runs`]).
    #[serde(default)]
    pub runs: Vec<RunReport>,
}

/// One run of several.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunReport {
    /// 1 for the first run.
    pub index: u32,
    /// Where this run's second 0 is in the report's `series`.
    pub first_second: u64,
    pub run: Run,
    pub summary: Summary,
    pub totals: Totals,
    pub open_loop: Option<OpenLoopReport>,
    pub histograms: Histograms,
    #[serde(default)]
    pub timing: Option<TimingReport>,
    #[serde(default)]
    pub client_cpu: Option<ClientCpu>,
    #[serde(default)]
    pub connection_setup: Option<SetupReport>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

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

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Run {
    pub started_unix_ms: u64,
    /// With `--start-at`: how late the run's clock started after the instant, in µs.
    #[serde(default)]
    pub start_late_us: Option<u64>,
    pub duration_s: f64,
    pub window_start_s: f64,
    pub window_end_s: f64,
    pub window_s: f64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct LatencyMs {
    pub avg: f64,
    pub stddev: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl LatencyMs {
    fn of(histogram: &LatencyHistogram, moments: &Welford) -> LatencyMs {
        let p = histogram.percentiles();
        let ms = |us: u64| us as f64 / 1000.0;
        LatencyMs {
            avg: moments.mean / 1000.0,
            stddev: moments.std_dev().unwrap_or(0.0) / 1000.0,
            p50: ms(p.p50),
            p90: ms(p.p90),
            p99: ms(p.p99),
            p999: ms(p.p999),
            max: ms(p.max),
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct OpSummary {
    pub ops: u64,
    pub ops_per_sec: f64,
    pub hits: u64,
    pub misses: u64,
    pub hits_per_sec: f64,
    pub misses_per_sec: f64,
    pub errors: u64,
    pub latency_ms: LatencyMs,
}

impl OpSummary {
    fn of(stats: &OpStats, window_s: f64) -> OpSummary {
        let rate = |n: u64| {
            if window_s > 0.0 {
                n as f64 / window_s
            } else {
                0.0
            }
        };
        OpSummary {
            ops: stats.completed,
            ops_per_sec: rate(stats.completed),
            hits: stats.hits,
            misses: stats.misses,
            hits_per_sec: rate(stats.hits),
            misses_per_sec: rate(stats.misses),
            errors: stats.errors,
            latency_ms: LatencyMs::of(&stats.latency, &stats.moments),
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub set: OpSummary,
    pub get: OpSummary,
    pub multiget: OpSummary,
    pub total: OpSummary,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Totals {
    pub sent: u64,
    pub completed: u64,
    pub errors: u64,
    pub timeouts: u64,
    pub connection_errors: u64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct OpenLoopReport {
    pub target_rate: f64,
    pub scheduled_rate: f64,
    pub achieved_rate: f64,
    pub completed_rate: f64,
    pub send_lag_ms: LatencyMs,
    pub late_requests: u64,
    pub fell_behind: bool,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct SecondStats {
    pub ops: u64,
    pub hits: u64,
    pub misses: u64,
    pub errors: u64,
    pub latency_ms_avg: f64,
    pub latency_ms_max: f64,
}

impl SecondStats {
    fn of(s: &SecondOp) -> SecondStats {
        SecondStats {
            ops: s.completed,
            hits: s.hits,
            misses: s.misses,
            errors: s.errors,
            latency_ms_avg: s.latency.mean / 1000.0,
            latency_ms_max: s.max_us as f64 / 1000.0,
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Second {
    pub second: u64,
    pub ops: u64,
    pub set: SecondStats,
    pub get: SecondStats,
    pub multiget: SecondStats,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Histograms {
    pub unit: String,
    pub encoding: String,
    pub set: String,
    pub get: String,
    pub multiget: String,
    pub total: String,
}

fn pattern_text(config: &Config) -> String {
    let w = &config.workload;
    format!("{}:{}", w.set_pattern.letter(), w.get_pattern.letter())
}

fn configuration(config: &Config) -> Configuration {
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
    }
}

/// Builds one run's report, without `runs`. `duration_ns` is the whole run; the window is
/// clipped to it.
fn build_one(config: &Config, m: &Measured) -> Report {
    let Measured {
        recorder,
        started_unix_ms,
        start_late_us,
        duration_ns,
    } = *m;
    let start_ns = recorder.window.start_ns.min(duration_ns);
    let end_ns = recorder.window.end_ns.min(duration_ns).max(start_ns);
    let window_s = (end_ns - start_ns) as f64 / 1e9;
    let total = recorder.total();
    let op = |o: Op| OpSummary::of(&recorder.ops[o.index()], window_s);
    let summary = Summary {
        set: op(Op::Set),
        get: op(Op::Get),
        multiget: op(Op::MultiGet),
        total: OpSummary::of(&total, window_s),
    };
    // A trace replayed with its own timing is an open loop whose rate is the trace's.
    let timed_replay = config.trace.as_ref().is_some_and(|t| t.speed > 0.0);
    let target = config.open_loop.as_ref().map(|o| o.rate).or_else(|| {
        timed_replay.then(|| recorder.scheduled_in_window as f64 / window_s.max(f64::MIN_POSITIVE))
    });
    let open_loop = target.map(|target_rate| {
        let rate = |n: u64| {
            if window_s > 0.0 {
                n as f64 / window_s
            } else {
                0.0
            }
        };
        let achieved_rate = rate(recorder.sent_in_window);
        let send_lag_ms = LatencyMs::of(&recorder.send_lag, &recorder.send_lag_moments);
        let late_requests = recorder.send_lag.count_at_or_above(LATE_LAG_US + 1);
        let fell_behind = (recorder.sent_in_window as f64)
            < FELL_BEHIND_RATE_SHARE * recorder.scheduled_in_window as f64
            || recorder.send_lag.quantile(0.99) > FELL_BEHIND_P99_LAG_US;
        OpenLoopReport {
            target_rate,
            scheduled_rate: rate(recorder.scheduled_in_window),
            achieved_rate,
            completed_rate: summary.total.ops_per_sec,
            send_lag_ms,
            late_requests,
            fell_behind,
        }
    });
    let series = recorder
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| Second {
            second: i as u64,
            ops: s.iter().map(|o| o.completed).sum(),
            set: SecondStats::of(&s[Op::Set.index()]),
            get: SecondStats::of(&s[Op::Get.index()]),
            multiget: SecondStats::of(&s[Op::MultiGet.index()]),
        })
        .collect();
    let encode = |h: &LatencyHistogram| h.encode_base64().expect("a histogram always encodes");
    let t = recorder.totals;
    Report {
        schema: SCHEMA.into(),
        tool: Tool {
            name: "cachelab-load".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        configuration: configuration(config),
        run: Run {
            started_unix_ms,
            start_late_us,
            duration_s: duration_ns as f64 / 1e9,
            window_start_s: start_ns as f64 / 1e9,
            window_end_s: end_ns as f64 / 1e9,
            window_s,
        },
        summary,
        totals: Totals {
            sent: t.sent,
            completed: t.completed,
            errors: t.errors,
            timeouts: t.timeouts,
            connection_errors: t.connection_errors,
        },
        open_loop,
        series,
        histograms: Histograms {
            unit: "us".into(),
            encoding: "HdrHistogram V2 compressed (deflate), base64".into(),
            set: encode(&recorder.ops[Op::Set.index()].latency),
            get: encode(&recorder.ops[Op::Get.index()].latency),
            multiget: encode(&recorder.ops[Op::MultiGet.index()].latency),
            total: encode(&total.latency),
        },
        timing: Some(timing::timing(&recorder.timing, config.timestamps)),
        client_cpu: Some(timing::client_cpu(&recorder.cpu)),
        connection_setup: Some(setup::setup(&recorder.setup)),
        send_intervals_ns: recorder.send_intervals_ns.clone(),
        sent: Some(recorder.sent_counts.report()),
        runs: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Recorder, Window};
    use crate::report::test_support::{config, hit, S};
    use crate::workload::Outcome;

    #[test]
    fn rates_are_per_second_of_the_window_and_latencies_in_milliseconds() {
        let c = config("--test-time=4 --warmup=1 --cooldown=1");
        let mut r = Recorder::new(Window {
            start_ns: S,
            end_ns: 3 * S,
        });
        for i in 0..100 {
            r.completed(
                Op::Get,
                S + i * 10_000_000,
                S + i * 10_000_000 + 250_000,
                hit(),
            );
        }
        r.completed(Op::Get, 0, 1000, hit()); // in the warm-up: not in the summary
        let report = build(&c, &r, 0, 4 * S + 5);
        assert_eq!(report.run.window_s, 2.0);
        assert_eq!(report.summary.get.ops, 100);
        assert_eq!(report.summary.get.ops_per_sec, 50.0);
        assert_eq!(report.summary.get.hits_per_sec, 50.0);
        assert_eq!(report.summary.get.latency_ms.p50, 0.25);
        assert_eq!(report.summary.get.latency_ms.avg, 0.25);
        assert_eq!(report.summary.total.ops, 100);
        assert_eq!(report.totals.completed, 101);
        assert_eq!(report.series.len(), 2);
        assert!(report.open_loop.is_none());
    }

    #[test]
    fn a_requests_run_window_ends_with_the_run() {
        let c = config("--requests=10");
        let mut r = Recorder::new(Window {
            start_ns: 0,
            end_ns: u64::MAX,
        });
        r.completed(Op::Set, 0, S / 2, Outcome::default());
        let report = build(&c, &r, 0, S / 2);
        assert_eq!(report.run.window_s, 0.5);
        assert_eq!(report.summary.set.ops_per_sec, 2.0);
    }

    #[test]
    fn open_loop_fell_behind_when_it_sent_less_than_scheduled_or_sent_late() {
        let c = config("--test-time=1 --rate=100");
        let window = Window {
            start_ns: 0,
            end_ns: S,
        };
        let on_time = |sent: u64, lag_ns: u64| {
            let mut r = Recorder::new(window);
            for i in 0..100 {
                r.scheduled(i * 10_000_000);
            }
            for i in 0..sent {
                r.sent(i * 10_000_000 + lag_ns, Some(lag_ns));
            }
            build(&c, &r, 0, S).open_loop.unwrap()
        };
        let good = on_time(100, 20_000);
        assert!(!good.fell_behind);
        assert_eq!(
            (good.scheduled_rate, good.achieved_rate, good.late_requests),
            (100.0, 100.0, 0)
        );
        assert!(on_time(98, 20_000).fell_behind, "sent 98 of 100");
        let late = on_time(100, 2_000_000);
        assert!(late.fell_behind, "every send 2 ms late");
        assert_eq!(late.late_requests, 100);
        let report = build(&c, &Recorder::new(window), 0, S);
        assert!(
            fell_behind_warning(&report).is_none(),
            "nothing scheduled, nothing late"
        );
    }
}
