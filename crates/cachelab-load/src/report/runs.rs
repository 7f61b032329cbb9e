//! The report of one or several runs (`--run-count`). Pure.
//!
//! With one run the report is that run's, and `runs` holds it once more. With several,
//! `runs` holds each run's report and the top-level fields are their aggregate, as
//! memtier_benchmark's "AGGREGATED AVERAGE RESULTS" computes it (`run_stats::
//! aggregate_average` in run_stats.cpp, `totals::add` in run_stats_types.cpp):
//!
//! - counts (ops, hits, misses, errors, every total) are summed over the runs;
//! - rates (ops/s, hits/s, misses/s, and the open loop's scheduled, achieved and
//!   completed rates) are the mean of the runs' rates: `sum_i rate_i / runs`;
//! - percentiles and maxima come from the runs' histograms merged;
//! - the mean latency and its standard deviation are over every request of every run
//!   (Welford's merge). memtier takes the unweighted mean of the runs' mean latencies
//!   instead; the two differ only when the runs answered different numbers of requests.
//!
//! `series` is the runs' series one after the other: run i's second 0 is at
//! `runs[i].first_second`, the sum of the earlier runs' lengths in whole seconds (the
//! pause between runs is left out). `run` describes that joined timeline: it starts with
//! the first run; `duration_s` and `window_end_s` are on the joined timeline; `window_s`
//! is the sum of the runs' windows.

use super::{build_one, Report, RunReport};
use crate::config::Config;
use crate::record::Recorder;

const NS_PER_S: u64 = 1_000_000_000;

/// What one run measured.
#[derive(Debug, Clone, Copy)]
pub struct Measured<'a> {
    pub recorder: &'a Recorder,
    pub started_unix_ms: u64,
    /// `--start-at`: how late the clock started, in µs.
    pub start_late_us: Option<u64>,
    /// From the start of the run's clock until its last connection finished.
    pub duration_ns: u64,
}

/// The report of a single run.
pub fn build(
    config: &Config,
    recorder: &Recorder,
    started_unix_ms: u64,
    duration_ns: u64,
) -> Report {
    build_runs(
        config,
        &[Measured {
            recorder,
            started_unix_ms,
            start_late_us: None,
            duration_ns,
        }],
    )
}

fn entry(index: usize, first_second: u64, report: &Report) -> RunReport {
    RunReport {
        index: index as u32 + 1,
        first_second,
        run: report.run.clone(),
        summary: report.summary,
        totals: report.totals,
        open_loop: report.open_loop,
        histograms: report.histograms.clone(),
        timing: report.timing.clone(),
        client_cpu: report.client_cpu,
        connection_setup: report.connection_setup.clone(),
    }
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

/// The report of `runs` (at least one), made back to back with the same configuration.
pub fn build_runs(config: &Config, runs: &[Measured]) -> Report {
    assert!(!runs.is_empty(), "a report needs a run");
    let reports: Vec<Report> = runs.iter().map(|m| build_one(config, m)).collect();
    if let [single] = reports.as_slice() {
        let mut report = single.clone();
        report.runs = vec![entry(0, 0, single)];
        return report;
    }
    // Every request of every run, without the per-second series (those are joined below).
    let mut merged = runs[0].recorder.clone();
    merged.series.clear();
    for m in &runs[1..] {
        let mut r = m.recorder.clone();
        r.series.clear();
        merged.merge(&r);
    }
    let mut report = build_one(
        config,
        &Measured {
            recorder: &merged,
            started_unix_ms: runs[0].started_unix_ms,
            start_late_us: runs[0].start_late_us,
            duration_ns: u64::MAX,
        },
    );

    let mut entries = Vec::with_capacity(runs.len());
    let mut series = Vec::new();
    let mut first_second = 0u64;
    for (i, (m, r)) in runs.iter().zip(&reports).enumerate() {
        entries.push(entry(i, first_second, r));
        let seconds = m.duration_ns.div_ceil(NS_PER_S).max(r.series.len() as u64);
        for (s, second) in r.series.iter().enumerate() {
            let mut second = *second;
            second.second = first_second + s as u64;
            series.push(second);
        }
        for s in r.series.len() as u64..seconds {
            series.push(super::Second {
                second: first_second + s,
                ..empty_second()
            });
        }
        first_second += seconds;
    }
    let last = entries.last().expect("several runs");
    report.run.started_unix_ms = runs[0].started_unix_ms;
    report.run.duration_s = last.first_second as f64 + last.run.duration_s;
    report.run.window_start_s = entries[0].run.window_start_s;
    report.run.window_end_s = last.first_second as f64 + last.run.window_end_s;
    report.run.window_s = reports.iter().map(|r| r.run.window_s).sum();
    report.series = series;

    let summaries = |pick: fn(&Report) -> &super::OpSummary, op: &mut super::OpSummary| {
        op.ops_per_sec = mean(reports.iter().map(|r| pick(r).ops_per_sec));
        op.hits_per_sec = mean(reports.iter().map(|r| pick(r).hits_per_sec));
        op.misses_per_sec = mean(reports.iter().map(|r| pick(r).misses_per_sec));
    };
    summaries(|r| &r.summary.set, &mut report.summary.set);
    summaries(|r| &r.summary.get, &mut report.summary.get);
    summaries(|r| &r.summary.multiget, &mut report.summary.multiget);
    summaries(|r| &r.summary.total, &mut report.summary.total);
    if let Some(o) = report.open_loop.as_mut() {
        let each = || reports.iter().filter_map(|r| r.open_loop);
        o.scheduled_rate = mean(each().map(|o| o.scheduled_rate));
        o.achieved_rate = mean(each().map(|o| o.achieved_rate));
        o.completed_rate = mean(each().map(|o| o.completed_rate));
        o.fell_behind |= each().any(|o| o.fell_behind);
    }
    report.runs = entries;
    report
}

fn empty_second() -> super::Second {
    let nothing = super::SecondStats {
        ops: 0,
        hits: 0,
        misses: 0,
        errors: 0,
        latency_ms_avg: 0.0,
        latency_ms_max: 0.0,
    };
    super::Second {
        second: 0,
        ops: 0,
        set: nothing,
        get: nothing,
        multiget: nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Window;
    use crate::report::test_support::{config, hit, S};
    use crate::workload::Op;

    /// A 2-second run with `n` GETs of `latency_us`, spread over its first second.
    fn run(n: u64, latency_us: u64) -> Recorder {
        let mut r = Recorder::new(Window {
            start_ns: 0,
            end_ns: 2 * S,
        });
        for i in 0..n {
            let start = i * (S / n);
            r.sent(start, None);
            r.completed(Op::Get, start, start + latency_us * 1000, hit());
        }
        r
    }

    #[test]
    fn one_run_is_the_report_and_its_only_entry() {
        let c = config("--test-time=2");
        let r = run(10, 100);
        let report = build(&c, &r, 5, 2 * S);
        assert_eq!(report.runs.len(), 1);
        let only = &report.runs[0];
        assert_eq!((only.index, only.first_second), (1, 0));
        assert_eq!(only.summary, report.summary);
        assert_eq!(only.histograms, report.histograms);
        assert_eq!(only.run, report.run);
    }

    #[test]
    fn several_runs_sum_counts_average_rates_and_merge_histograms() {
        let c = config("--test-time=2 --run-count=2");
        let (a, b) = (run(100, 100), run(300, 500));
        let runs = [
            Measured {
                recorder: &a,
                started_unix_ms: 1000,
                start_late_us: None,
                duration_ns: 2 * S + 1,
            },
            Measured {
                recorder: &b,
                started_unix_ms: 5000,
                start_late_us: None,
                duration_ns: 2 * S,
            },
        ];
        let report = build_runs(&c, &runs);
        let get = report.summary.get;
        assert_eq!((get.ops, get.hits), (400, 400));
        // 50 and 150 ops/s over the two 2-second windows: their mean, as memtier.
        assert_eq!(get.ops_per_sec, 100.0);
        assert_eq!(get.hits_per_sec, 100.0);
        // Over every request: (100 x 0.1 + 300 x 0.5) / 400 ms.
        assert!((get.latency_ms.avg - 0.4).abs() < 1e-9);
        assert_eq!(get.latency_ms.p50, 0.5);
        assert_eq!(get.latency_ms.max, 0.5);
        assert_eq!(report.totals.completed, 400);
        assert_eq!(report.totals.sent, 400);
        assert_eq!(report.runs.len(), 2);
        assert_eq!(report.runs[0].summary.get.ops, 100);
        assert_eq!(report.runs[1].summary.get.latency_ms.p50, 0.5);
        // Run 1 lasted just over 2 s: it takes 3 whole seconds of the joined series.
        assert_eq!(
            (report.runs[0].first_second, report.runs[1].first_second),
            (0, 3)
        );
        let seconds: Vec<(u64, u64)> = report.series.iter().map(|s| (s.second, s.ops)).collect();
        assert_eq!(seconds, [(0, 100), (1, 0), (2, 0), (3, 300), (4, 0)]);
        assert_eq!(report.run.started_unix_ms, 1000);
        assert_eq!(report.run.duration_s, 5.0);
        assert_eq!(report.run.window_s, 4.0);
        assert_eq!(
            (report.run.window_start_s, report.run.window_end_s),
            (0.0, 5.0)
        );
        assert_eq!(report.configuration.run_count, 2);
    }
}
