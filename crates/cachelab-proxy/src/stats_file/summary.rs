//! The end-of-run summary: one line per operation type, printed on exit and logged.

use tracing::info;

use super::{rate, RunSummary};
use crate::metrics::OpKind;

/// The human end-of-run summary (also logged).
pub fn format_summary(summary: &RunSummary) -> String {
    let mut text = format!(
        "cachelab-proxy summary: {:.1} s, {} requests received\n{:<9} {:>10} {:>11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
        summary.duration_s,
        summary.arrivals,
        "op", "count", "ops/s", "rt_us", "p50", "p99", "decode", "queue", "server", "worker", "errors"
    );
    for kind in OpKind::ALL {
        let op = summary.totals.op(kind);
        if op.count == 0 {
            continue;
        }
        let p = op.rt_hdr.percentiles();
        text.push_str(&format!(
            // A space before every column, so a number wider than its column still
            // stands apart from its neighbour.
            "{:<9} {:>10} {:>11.1} {:>9.1} {:>9} {:>9} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9}\n",
            kind.name(),
            op.count,
            rate(op.count, summary.duration_s),
            op.response.mean,
            p.p50,
            p.p99,
            op.decode.mean,
            op.queue_wait.mean,
            op.server_service.mean,
            op.worker_processing.mean,
            op.errors
        ));
    }
    text
}

/// Logs the summary line by line.
pub fn log_summary(summary: &RunSummary) {
    for line in format_summary(summary).lines() {
        info!("{line}");
    }
}

#[cfg(test)]
mod summary_tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::metrics::{OpKind, Outcome, Timestamps, WorkerStats};

    #[test]
    fn summary_columns_stay_apart_when_numbers_outgrow_them() {
        let start = Instant::now();
        let mut totals = WorkerStats::new(1, start);
        // a 20 s response time makes every time column wider than its header
        let late = start + Duration::from_secs(20);
        let ts = Timestamps {
            arrival: start,
            enqueued: start,
            dequeued: start,
            first_sent: Some(start),
            last_answer: Some(late),
            reply_sent: late,
        };
        for _ in 0..3 {
            totals.record(OpKind::Get, &ts, Outcome::default());
        }
        let summary = RunSummary {
            duration_s: 1e-6,
            arrivals: 12_345_678_901,
            totals,
        };
        let text = format_summary(&summary);
        let row = text
            .lines()
            .find(|l| l.starts_with("get"))
            .expect("a get row");
        assert_eq!(row.split_whitespace().count(), 11, "{text}");
    }
}
