//! The report as text: the human summary, the fell-behind warning, the HdrHistogram log.

use cachelab_stats::LatencyHistogram;

use super::setup::setup_line;
use super::{
    ClientCpu, Histograms, LatencyMs, OpenLoopReport, Report, Run, RunReport, Summary,
    TimingReport, Totals, LATE_LAG_US,
};
use crate::percentiles::label;

/// Each server's line of a sharded run: its share of the requests, its rate and latency.
fn servers(servers: &[super::ServerReport]) -> String {
    if servers.is_empty() {
        return String::new();
    }
    let sent: u64 = servers.iter().map(|s| s.sent).sum();
    let mut out = String::from("per server:\n");
    for s in servers {
        let t = &s.summary;
        out += &format!(
            "  {:<24} {:>5.1}% of requests {:>12.2} ops/sec  hits {:>10}  misses {:>10}  avg {:.3} ms  p99 {:.3} ms{}\n",
            s.server,
            100.0 * s.sent as f64 / sent.max(1) as f64,
            t.ops_per_sec,
            t.hits,
            t.misses,
            t.latency_ms.avg,
            t.latency_ms.p99,
            if s.failed > 0 {
                format!("  {} lost with its connection", s.failed)
            } else {
                String::new()
            }
        );
    }
    out
}

/// The human summary, memtier-like: one row per operation type, with the
/// `--print-percentiles` columns; with several runs, a line per run and memtier's BEST,
/// WORST and AGGREGATED AVERAGE tables (and every run's table with `--print-all-runs`).
pub fn format_summary(report: &Report) -> String {
    let c = &report.configuration;
    let mut out = String::new();
    let mode = match (c.rate, &c.arrival, &c.trace, c.trace_speed) {
        (Some(rate), Some(arrival), _, _) => {
            format!("open loop at {rate:.0} ops/s ({arrival} arrivals)")
        }
        (_, _, Some(trace), Some(speed)) if speed > 0.0 => {
            format!("replay of {trace} at {speed}x its own timing")
        }
        _ => format!("closed loop, pipeline {}", c.pipeline),
    };
    let target = match &c.shard {
        Some(shard) => format!(
            "{} servers ({} over {})",
            shard.servers.len(),
            shard.hash,
            shard.distribution
        ),
        None => format!("{}:{}", c.server, c.port),
    };
    out += &format!(
        "cachelab-load {}: {} on {}, {} threads x {} clients, {}\n",
        report.tool.version, c.protocol, target, c.threads, c.clients, mode
    );
    if report.runs.len() <= 1 {
        out += &run_line(&report.run);
        out += "\n";
        out += &table(&report.summary, &report.histograms, &c.print_percentiles);
        out += &servers(&report.servers);
        out += &whole_run("whole run", &report.totals, report.open_loop.as_ref());
        out += &timing(report.timing.as_ref(), report.client_cpu.as_ref());
        out += &report
            .connection_setup
            .as_ref()
            .map_or_else(String::new, setup_line);
        return out;
    }
    out += &format!("{} runs, one second apart\n", report.runs.len());
    for r in &report.runs {
        let t = &r.summary.total;
        out += &format!(
            "run {}: {:.2} ops/sec, avg {:.3} ms, p99 {:.3} ms; {:.2} s, summary over {:.2}..{:.2} s\n",
            r.index,
            t.ops_per_sec,
            t.latency_ms.avg,
            t.latency_ms.p99,
            r.run.duration_s,
            r.run.window_start_s,
            r.run.window_end_s
        );
    }
    if c.print_all_runs {
        for r in &report.runs {
            out += &format!("\nRUN #{} RESULTS\n", r.index);
            out += &table(&r.summary, &r.histograms, &c.print_percentiles);
            out += &whole_run("whole run", &r.totals, r.open_loop.as_ref());
            out += &timing(r.timing.as_ref(), r.client_cpu.as_ref());
            out += &r
                .connection_setup
                .as_ref()
                .map_or_else(String::new, setup_line);
        }
    }
    let rate = |r: &&RunReport| r.summary.total.ops_per_sec;
    // The first of equals, as memtier picks them (strict comparisons over the runs).
    let best = report
        .runs
        .iter()
        .reduce(|a, b| if rate(&b) > rate(&a) { b } else { a })
        .expect("several runs");
    let worst = report
        .runs
        .iter()
        .reduce(|a, b| if rate(&b) < rate(&a) { b } else { a })
        .expect("several runs");
    for (title, r) in [("BEST", best), ("WORST", worst)] {
        out += &format!("\n{title} RUN RESULTS (run {})\n", r.index);
        out += &table(&r.summary, &r.histograms, &c.print_percentiles);
    }
    out += &format!(
        "\nAGGREGATED AVERAGE RESULTS ({} runs): counts summed, rates averaged over the runs, latencies over every request\n",
        report.runs.len()
    );
    out += &table(&report.summary, &report.histograms, &c.print_percentiles);
    out += &whole_run("all runs", &report.totals, report.open_loop.as_ref());
    out += &timing(report.timing.as_ref(), report.client_cpu.as_ref());
    out += &report
        .connection_setup
        .as_ref()
        .map_or_else(String::new, setup_line);
    out
}

fn run_line(r: &Run) -> String {
    format!(
        "run {:.2} s, summary over {:.2}..{:.2} s ({:.2} s)\n",
        r.duration_s, r.window_start_s, r.window_end_s, r.window_s
    )
}

/// The table of one summary; percentiles are read from the encoded histograms, so the
/// columns can be any the user asked for.
fn table(s: &Summary, h: &Histograms, percentiles: &[f64]) -> String {
    let labels: Vec<String> = percentiles
        .iter()
        .map(|p| format!("{}(ms)", label(*p)))
        .collect();
    let widths: Vec<usize> = labels.iter().map(|l| (l.len() + 1).max(10)).collect();
    let mut out = format!(
        "{:<10}{:>12}{:>12}{:>10}{:>10}{:>8}{:>10}",
        "Type", "Ops", "Ops/sec", "Hits", "Misses", "Errors", "Avg(ms)"
    );
    for (l, w) in labels.iter().zip(&widths) {
        out += &format!("{l:>w$}");
    }
    out += &format!("{:>10}\n", "Max(ms)");
    out += &format!("{}\n", "-".repeat(82 + widths.iter().sum::<usize>()));
    for (name, op, encoded) in [
        ("Sets", &s.set, &h.set),
        ("Gets", &s.get, &h.get),
        ("MultiGets", &s.multiget, &h.multiget),
        ("Totals", &s.total, &h.total),
    ] {
        let l = &op.latency_ms;
        out += &format!(
            "{:<10}{:>12}{:>12.2}{:>10}{:>10}{:>8}{:>10.3}",
            name, op.ops, op.ops_per_sec, op.hits, op.misses, op.errors, l.avg
        );
        let histogram = LatencyHistogram::decode_base64(encoded).unwrap_or_default();
        for (p, w) in percentiles.iter().zip(&widths) {
            let ms = histogram.quantile(p / 100.0) as f64 / 1000.0;
            out += &format!("{ms:>w$.3}");
        }
        out += &format!("{:>10.3}\n", l.max);
    }
    out
}

fn whole_run(what: &str, t: &Totals, open_loop: Option<&OpenLoopReport>) -> String {
    let mut out = format!(
        "\n{what}: {} sent, {} answered, {} errors ({} timeouts), {} connection errors\n",
        t.sent, t.completed, t.errors, t.timeouts, t.connection_errors
    );
    if let Some(o) = open_loop {
        out += &format!(
            "open loop: target {:.2} ops/s, scheduled {:.2} ops/s, sent {:.2} ops/s ({:+.2}% of target), answered {:.2} ops/s\n",
            o.target_rate,
            o.scheduled_rate,
            o.achieved_rate,
            100.0 * (o.achieved_rate / o.target_rate - 1.0),
            o.completed_rate
        );
        let l = &o.send_lag_ms;
        out += &format!(
            "send lag (actual - scheduled send time): avg {:.3} ms, p99 {:.3} ms, p99.9 {:.3} ms, max {:.3} ms; {} requests over {} ms late\n",
            l.avg, l.p99, l.p999, l.max, o.late_requests, LATE_LAG_US / 1000
        );
    }
    out
}

/// Where the time went (and on which clock), and the client's CPU.
fn timing(t: Option<&TimingReport>, cpu: Option<&ClientCpu>) -> String {
    let mut out = String::new();
    if let Some(t) = t {
        let line = |name: &str, clock: Option<&String>, l: Option<&LatencyMs>| match (clock, l) {
            (Some(clock), Some(l)) => format!(
                "  {name:<13}{:>9.3}{:>9.3}{:>9.3}{:>9.3}{:>9.3}  {clock}\n",
                l.avg, l.p50, l.p99, l.p999, l.max
            ),
            _ => format!("  {name:<13}{:>9}  (no kernel timestamps)\n", "-"),
        };
        out += &format!(
            "timing (ms)       avg      p50      p99    p99.9      max  clock; latency above: {}\n",
            t.clocks.latency
        );
        out += &line("wire", t.clocks.wire.as_ref(), t.wire_ms.as_ref());
        out += &line(
            "response",
            t.clocks.response.as_ref(),
            t.response_ms.as_ref(),
        );
        out += &line(
            "user latency",
            Some(&t.clocks.user_latency),
            Some(&t.user_latency_ms),
        );
        out += &line(
            "send delay",
            t.clocks.send_delay.as_ref(),
            t.send_delay_ms.as_ref(),
        );
        out += &line(
            "read delay",
            t.clocks.read_delay.as_ref(),
            t.read_delay_ms.as_ref(),
        );
        if let Some(why) = &t.fallback {
            out += &format!("kernel timestamps unavailable: {why}\n");
        }
    }
    if let Some(c) = cpu {
        out += &format!(
            "client CPU: {:.3} s user + {:.3} s system over {} thread(s), {:.0}% of their time (busiest thread {:.0}%){}\n",
            c.user_s,
            c.system_s,
            c.threads,
            100.0 * c.share,
            100.0 * c.busiest_thread_share,
            if c.saturated { ": SATURATED, the throughput may be the client's" } else { "" }
        );
    }
    out
}

/// The loud warning printed when an open-loop run could not keep to its schedule.
pub fn fell_behind_warning(report: &Report) -> Option<String> {
    let o = report.open_loop.as_ref().filter(|o| o.fell_behind)?;
    let bar = "!".repeat(78);
    Some(format!(
        "{bar}\nWARNING: the load generator FELL BEHIND its schedule: it sent {:.2} ops/s of the \
         {:.2} scheduled, with a p99 send lag of {:.3} ms. Latencies include time the client could \
         not send; use more threads, a lower --rate, or more CPU for the client.\n{bar}\n",
        o.achieved_rate, o.scheduled_rate, o.send_lag_ms.p99
    ))
}

/// HdrHistogram log format (as written by HdrHistogram's `HistogramLogWriter`) of one
/// run: one tagged interval per operation type covering the summary window; values in
/// µs, `Interval_Max` in ms.
pub fn hdr_log(run: &RunReport) -> String {
    let r = &run.run;
    let mut out = format!(
        "#[StartTime: {:.3} (seconds since epoch)]\n\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n",
        r.started_unix_ms as f64 / 1000.0
    );
    let h = &run.histograms;
    let s = &run.summary;
    for (tag, encoded, op) in [
        ("set", &h.set, &s.set),
        ("get", &h.get, &s.get),
        ("multiget", &h.multiget, &s.multiget),
        ("total", &h.total, &s.total),
    ] {
        out += &format!(
            "Tag={tag},{:.3},{:.3},{:.3},{encoded}\n",
            r.window_start_s, r.window_s, op.latency_ms.max
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Recorder, Window};
    use crate::report::build;
    use crate::report::test_support::{config, hit, S};
    use crate::workload::Op;
    use cachelab_stats::LatencyHistogram;

    #[test]
    fn the_summary_and_the_hdr_log_name_every_operation_type() {
        let c = config("--test-time=1 --rate=10");
        let mut r = Recorder::new(Window {
            start_ns: 0,
            end_ns: S,
        });
        r.completed(Op::MultiGet, 0, 1_500_000, hit());
        let report = build(&c, &r, 1_700_000_000_000, S);
        let text = format_summary(&report);
        for row in [
            "Sets",
            "Gets",
            "MultiGets",
            "Totals",
            "open loop: target 10.00 ops/s",
            "send lag",
        ] {
            assert!(text.contains(row), "{row} missing:\n{text}");
        }
        let log = hdr_log(&report.runs[0]);
        assert!(log.starts_with("#[StartTime: 1700000000.000"));
        let tagged: Vec<&str> = log.lines().filter(|l| l.starts_with("Tag=")).collect();
        assert_eq!(tagged.len(), 4);
        assert!(
            tagged[2].starts_with("Tag=multiget,0.000,1.000,1.500,"),
            "{}",
            tagged[2]
        );
        let decoded =
            LatencyHistogram::decode_base64(tagged[2].rsplit(',').next().unwrap()).unwrap();
        assert_eq!(decoded.len(), 1);
    }

    #[test]
    fn several_runs_print_a_line_each_then_best_worst_and_the_aggregate() {
        let c = config("--requests=10 --run-count=2 --print-percentiles=99.99");
        let window = Window {
            start_ns: 0,
            end_ns: u64::MAX,
        };
        let (mut slow, mut fast) = (Recorder::new(window), Recorder::new(window));
        slow.completed(Op::Get, 0, 2_000_000, hit());
        for i in 0..4 {
            fast.completed(Op::Get, i, i + 1_000_000, hit());
        }
        let measured = |r| crate::report::Measured {
            recorder: r,
            started_unix_ms: 0,
            start_late_us: None,
            duration_ns: S,
        };
        let report = crate::report::build_runs(&c, &[measured(&slow), measured(&fast)]);
        let text = format_summary(&report);
        for line in [
            "2 runs, one second apart\n",
            "run 1: 1.00 ops/sec, avg 2.000 ms",
            "run 2: 4.00 ops/sec, avg 1.000 ms",
            "BEST RUN RESULTS (run 2)",
            "WORST RUN RESULTS (run 1)",
            "AGGREGATED AVERAGE RESULTS (2 runs)",
            "p99.99(ms)",
            "all runs: 0 sent, 5 answered",
        ] {
            assert!(text.contains(line), "{line} missing:\n{text}");
        }
        assert!(!text.contains("RUN #1"), "only with --print-all-runs");
        let aggregate = text.split("AGGREGATED").nth(1).unwrap();
        let gets = aggregate.lines().find(|l| l.starts_with("Gets")).unwrap();
        let cells: Vec<&str> = gets.split_whitespace().collect();
        // 5 gets; 2.5 ops/s, the mean of 1 and 4; p99.99 and max of both runs: 2 ms.
        assert_eq!(cells[..3], ["Gets", "5", "2.50"]);
        assert_eq!(cells[cells.len() - 2..], ["2.000", "2.000"]);
    }
}
