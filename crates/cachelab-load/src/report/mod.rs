//! The run's report: built from the configuration and the merged measurements, written as
//! JSON (`--json-out-file`, schema in `schema/load-report.schema.json` and
//! `docs/load-generator.md`) and, by [`text`], as the human summary and an HdrHistogram log.
//! Pure.

mod configuration;
mod runs;
mod servers;
mod setup;
#[cfg(test)]
mod test_support;
mod text;
mod timing;

pub use configuration::{Configuration, ShardConfiguration, SizeWeightReport, TlsConfiguration};
pub use runs::{build, build_runs, Measured};
pub use servers::ServerReport;
pub use setup::SetupReport;
pub use text::{fell_behind_warning, format_summary, hdr_log};
pub use timing::{ClientCpu, Clocks, TimingHistograms, TimingReport, CLIENT_SATURATED_SHARE};

use cachelab_stats::{LatencyHistogram, Welford};
use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::record::{OpStats, SecondOp};
use crate::sent::SentReport;
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
    /// `--shard`: each server's share, in the list's order; absent otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<ServerReport>,
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
        configuration: configuration::configuration(config),
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
        servers: servers::servers(config, &recorder.servers, window_s),
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
