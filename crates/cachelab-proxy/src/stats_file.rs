//! The statistics writer: at every window boundary it swaps out each worker's statistics
//! unit, writes one JSON line per busy worker and one merged line, and keeps the run's
//! totals for the end-of-run summary. The schema is documented in docs/stats-file.md.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use cachelab_stats::Welford;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;
use tracing::{error, info};

use crate::metrics::{OpKind, OpStats, WorkerStats};
use crate::server::Shared;

/// Bumped when a field changes meaning or disappears (adding fields does not bump it).
pub const SCHEMA_VERSION: u32 = 1;

/// The workers' units taken out at a window boundary, with the net layer's counters.
struct Swapped {
    end: Instant,
    end_unix: f64,
    units: Vec<WorkerStats>,
    arrivals: u64,
    queue_len_now: usize,
    connections: u64,
}

/// The merged statistics of the whole run, for the summary.
pub struct RunSummary {
    pub duration_s: f64,
    pub arrivals: u64,
    pub totals: WorkerStats,
}

pub struct StatsWriter {
    shared: Arc<Shared>,
    out: Option<BufWriter<File>>,
    window: u64,
    window_start: Instant,
    window_start_unix: f64,
    arrivals_seen: u64,
    totals: WorkerStats,
}

/// Runs `work` on a new thread with the SCHED_IDLE policy: it gets the CPU only when the
/// event loop does not want it, and a waking event loop preempts it at once. (A pool thread
/// would keep the policy: an unprivileged thread cannot leave SCHED_IDLE.) Once per window,
/// so the thread's start-up cost does not matter.
async fn in_background<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("cachelab-stats".into())
        .spawn(move || {
            let idle = libc::sched_param { sched_priority: 0 };
            // SAFETY: plain syscall on the calling thread with a valid parameter block; on
            // failure the thread just keeps the normal policy.
            unsafe {
                libc::sched_setscheduler(0, libc::SCHED_IDLE, &idle);
            }
            let _ = done.send(work());
        })
        .expect("cannot start the statistics writer thread");
    result.await.expect("the statistics writer thread panicked")
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl StatsWriter {
    pub fn create(shared: Arc<Shared>, path: Option<&Path>) -> io::Result<Self> {
        let out = path.map(File::create).transpose()?.map(BufWriter::new);
        let now = Instant::now();
        let servers = shared.config.servers.len();
        let mut writer = StatsWriter {
            shared,
            out,
            window: 0,
            window_start: now,
            window_start_unix: unix_now(),
            arrivals_seen: 0,
            totals: WorkerStats::new(servers, now),
        };
        let config = &writer.shared.config;
        let header = json!({
            "type": "start",
            "schema": SCHEMA_VERSION,
            "version": env!("CARGO_PKG_VERSION"),
            "pid": std::process::id(),
            "start": writer.window_start_unix,
            "listen": config.listen.to_string(),
            "workers": config.workers,
            "servers": config.servers.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "sharded": config.sharded,
            "window_s": config.stats_window.as_secs_f64(),
            "bucket_width_us": crate::metrics::BUCKET_WIDTH_US,
        });
        writer.write_lines(&[header])?;
        Ok(writer)
    }

    /// Writes a window every `stats_window` until `stop` turns true, then the last
    /// (partial) window and the summary.
    ///
    /// Only the swap of the workers' units runs on the runtime; merging, encoding the HDR
    /// histograms and writing run on a thread of their own at idle priority, so a window
    /// boundary does not stall the event loop (and the tail latencies it measures) for
    /// milliseconds, not even when the proxy is pinned to one CPU.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) -> RunSummary {
        let mut ticks = tokio::time::interval(self.shared.config.stats_window);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            tokio::select! {
                _ = ticks.tick() => self = self.flush_window().await,
                _ = stop.changed() => break,
            }
        }
        self = self.flush_window().await;
        in_background(move || self.finish()).await
    }

    async fn flush_window(mut self) -> Self {
        let swapped = self.swap_units();
        in_background(move || {
            self.write_window(swapped);
            self
        })
        .await
    }

    /// Writes the lines and flushes once, so each window (or the header, or the summary)
    /// reaches the file whole.
    fn write_lines(&mut self, values: &[Value]) -> io::Result<()> {
        if let Some(out) = self.out.as_mut() {
            for value in values {
                serde_json::to_writer(&mut *out, value)?;
                out.write_all(b"\n")?;
            }
            out.flush()?;
        }
        Ok(())
    }

    /// Swaps every worker's unit for a fresh one (brief, per-worker locks) and samples
    /// the net layer's counters at the window's end.
    fn swap_units(&self) -> Swapped {
        let end = Instant::now();
        let servers = self.shared.config.servers.len();
        let units = (0..self.shared.config.workers)
            .map(|worker| {
                let fresh = WorkerStats::new(servers, end);
                std::mem::replace(&mut *self.shared.lock_worker_stats(worker), fresh)
            })
            .collect();
        Swapped {
            end,
            end_unix: unix_now(),
            units,
            arrivals: self.shared.net.arrivals.load(Ordering::Relaxed),
            queue_len_now: self.shared.queue.len(),
            connections: self.shared.net.curr_connections.load(Ordering::Relaxed),
        }
    }

    /// Merges a window's units into the run's totals and, if there is a stats file,
    /// writes one line per busy worker and the merged line.
    fn write_window(&mut self, swapped: Swapped) {
        let Swapped {
            end,
            end_unix,
            units,
            arrivals,
            queue_len_now,
            connections,
        } = swapped;
        let servers = self.shared.config.servers.len();
        let mut merged = WorkerStats::new(servers, self.window_start);
        let mut lines = Vec::new();
        for (worker, unit) in units.iter().enumerate() {
            if self.out.is_some() && unit.ops.iter().any(|op| op.count > 0) {
                lines.push(self.window_json(Some(worker), unit, end_unix, None));
            }
            merged.merge(unit);
        }
        let window_arrivals = arrivals - self.arrivals_seen;
        self.arrivals_seen = arrivals;
        if self.out.is_some() {
            let duration = end.duration_since(self.window_start).as_secs_f64();
            let completions: u64 = merged.ops.iter().map(|op| op.count).sum();
            let extra = json!({
                "arrivals": window_arrivals,
                "arrival_rate": rate(window_arrivals, duration),
                "throughput": rate(completions, duration),
                "queue_len_now": queue_len_now,
                "connections": connections,
            });
            lines.push(self.window_json(None, &merged, end_unix, Some(extra)));
        }
        if let Err(e) = self.write_lines(&lines) {
            error!(error = %e, "cannot write the stats file");
        }
        self.totals.merge(&merged);
        self.window += 1;
        self.window_start = end;
        self.window_start_unix = end_unix;
    }

    fn window_json(
        &self,
        worker: Option<usize>,
        stats: &WorkerStats,
        end_unix: f64,
        extra: Option<Value>,
    ) -> Value {
        let mut line = json!({
            "type": "window",
            "window": self.window,
            "scope": if worker.is_some() { "worker" } else { "total" },
            "worker": worker,
            "start": self.window_start_unix,
            "end": end_unix,
            "duration_s": end_unix - self.window_start_unix,
            "queue_len": welford_json(&stats.queue_len),
            "failovers": stats.failovers,
            "ops": ops_json(stats),
        });
        if let (Some(Value::Object(extra)), Value::Object(map)) = (extra, &mut line) {
            map.extend(extra);
        }
        line
    }

    fn finish(mut self) -> RunSummary {
        let duration_s = self.totals.window_start.elapsed().as_secs_f64();
        let completions: u64 = self.totals.ops.iter().map(|op| op.count).sum();
        let summary = json!({
            "type": "summary",
            "windows": self.window,
            "end": unix_now(),
            "duration_s": duration_s,
            "arrivals": self.arrivals_seen,
            "throughput": rate(completions, duration_s),
            "bad_requests": self.shared.net.bad_requests.load(Ordering::Relaxed),
            "total_connections": self.shared.net.total_connections.load(Ordering::Relaxed),
            "queue_len": welford_json(&self.totals.queue_len),
            "failovers": self.totals.failovers,
            "ops": ops_json(&self.totals),
        });
        if let Err(e) = self.write_lines(&[summary]) {
            error!(error = %e, "cannot write the stats file summary");
        }
        RunSummary {
            duration_s,
            arrivals: self.arrivals_seen,
            totals: self.totals,
        }
    }
}

fn rate(count: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        count as f64 / seconds
    } else {
        0.0
    }
}

fn welford_json(w: &Welford) -> Value {
    json!({"count": w.count, "mean": w.mean, "m2": w.m2})
}

fn ops_json(stats: &WorkerStats) -> Value {
    let mut ops = serde_json::Map::new();
    for kind in OpKind::ALL {
        let op = stats.op(kind);
        if op.count > 0 {
            ops.insert(kind.name().to_string(), op_json(op));
        }
    }
    Value::Object(ops)
}

fn op_json(op: &OpStats) -> Value {
    let p = op.rt_hdr.percentiles();
    json!({
        "count": op.count,
        "hits": op.hits,
        "misses": op.misses,
        "errors": op.errors,
        "keys": welford_json(&op.keys),
        "response_us": welford_json(&op.response),
        "decode_us": welford_json(&op.decode),
        "queue_wait_us": welford_json(&op.queue_wait),
        "worker_service_us": welford_json(&op.worker_service),
        "server_service_us": welford_json(&op.server_service),
        "worker_processing_us": welford_json(&op.worker_processing),
        "server_service_us_by_server": op.per_server.iter().map(welford_json).collect::<Vec<_>>(),
        "rt_hist_100us": op.rt_buckets.trimmed(),
        "rt_overflow": op.rt_buckets.overflow,
        "rt_percentiles_us": {"p50": p.p50, "p90": p.p90, "p99": p.p99, "p999": p.p999, "max": p.max},
        "rt_hdr": op.rt_hdr.encode_base64().unwrap_or_default(),
    })
}

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
