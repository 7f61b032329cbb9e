//! The report as text: the human summary, the fell-behind warning, the HdrHistogram log.

use super::{Report, LATE_LAG_US};

/// The human summary, memtier-like: one row per operation type.
pub fn format_summary(report: &Report) -> String {
    let c = &report.configuration;
    let r = &report.run;
    let mut out = String::new();
    let mode = match (c.rate, &c.arrival) {
        (Some(rate), Some(arrival)) => format!("open loop at {rate:.0} ops/s ({arrival} arrivals)"),
        _ => format!("closed loop, pipeline {}", c.pipeline),
    };
    out += &format!(
        "cachelab-load {}: {} on {}:{}, {} threads x {} clients, {}\n",
        report.tool.version, c.protocol, c.server, c.port, c.threads, c.clients, mode
    );
    out += &format!(
        "run {:.2} s, summary over {:.2}..{:.2} s ({:.2} s)\n\n",
        r.duration_s, r.window_start_s, r.window_end_s, r.window_s
    );
    out += &format!(
        "{:<10}{:>12}{:>12}{:>10}{:>10}{:>8}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}\n",
        "Type",
        "Ops",
        "Ops/sec",
        "Hits",
        "Misses",
        "Errors",
        "Avg(ms)",
        "p50(ms)",
        "p90(ms)",
        "p99(ms)",
        "p99.9(ms)",
        "Max(ms)"
    );
    out += &format!("{}\n", "-".repeat(122));
    let s = &report.summary;
    for (name, op) in [
        ("Sets", &s.set),
        ("Gets", &s.get),
        ("MultiGets", &s.multiget),
        ("Totals", &s.total),
    ] {
        let l = &op.latency_ms;
        out += &format!(
            "{:<10}{:>12}{:>12.2}{:>10}{:>10}{:>8}{:>10.3}{:>10.3}{:>10.3}{:>10.3}{:>10.3}{:>10.3}\n",
            name, op.ops, op.ops_per_sec, op.hits, op.misses, op.errors, l.avg, l.p50, l.p90, l.p99, l.p999, l.max
        );
    }
    let t = &report.totals;
    out += &format!(
        "\nwhole run: {} sent, {} answered, {} errors ({} timeouts), {} connection errors\n",
        t.sent, t.completed, t.errors, t.timeouts, t.connection_errors
    );
    if let Some(o) = &report.open_loop {
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

/// HdrHistogram log format (as written by HdrHistogram's `HistogramLogWriter`): one
/// tagged interval per operation type covering the summary window; values in µs,
/// `Interval_Max` in ms.
pub fn hdr_log(report: &Report) -> String {
    let r = &report.run;
    let mut out = format!(
        "#[StartTime: {:.3} (seconds since epoch)]\n\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n",
        r.started_unix_ms as f64 / 1000.0
    );
    let h = &report.histograms;
    let s = &report.summary;
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
    use crate::args::Args;
    use crate::config::Config;
    use crate::record::{Recorder, Window};
    use crate::report::build;
    use crate::workload::{Op, Outcome};
    use cachelab_stats::LatencyHistogram;
    use clap::Parser;

    const S: u64 = 1_000_000_000;

    fn config(line: &str) -> Config {
        let args =
            Args::try_parse_from(std::iter::once("cachelab-load").chain(line.split_whitespace()))
                .unwrap();
        Config::try_from(&args).unwrap()
    }

    fn hit() -> Outcome {
        Outcome {
            hits: 1,
            misses: 0,
            error: false,
        }
    }

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
        let log = hdr_log(&report);
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
}
