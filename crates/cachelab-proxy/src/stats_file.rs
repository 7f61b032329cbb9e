//! The statistics writer: at every window boundary it swaps out each worker's statistics
//! unit, writes one JSON line per busy worker and one merged line, and keeps the run's
//! totals for the end-of-run summary.
//!
//! Every line is one of the typed records below ([`Line`]), serialised with serde. The
//! contract is `schema/stats-file.schema.json` (fields documented in
//! docs/stats-file.md), and `schema/stats-file.golden.jsonl` is what this writer
//! produces for a fixed run: the writer is tested against it here, and the Python
//! reader (`cachelab.readers.proxy_stats`) against the same file.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use std::collections::BTreeMap;

use cachelab_stats::Welford;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;
use tracing::{error, info};

use crate::config::Config;
use crate::metrics::{OpKind, OpStats, WorkerStats};
use crate::observed::Observed;
use crate::routing::plan::Mode;
use crate::stats_units::StatsUnits;

/// Bumped when a field changes meaning or disappears (adding fields does not bump it).
pub const SCHEMA_VERSION: u32 = 1;

/// One line of the stats file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Line {
    Start(StartLine),
    Window(WindowLine),
    Summary(SummaryLine),
}

/// The first line: what ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartLine {
    pub schema: u32,
    pub version: String,
    pub pid: u32,
    /// Unix seconds.
    pub start: f64,
    /// The first listener's address.
    pub listen: String,
    pub workers: usize,
    /// Every distinct server, in the order of `server_service_us_by_server`.
    pub servers: Vec<String>,
    pub sharded: bool,
    pub window_s: f64,
    pub bucket_width_us: u64,
    /// Each listener with its pool as configured at start.
    pub pools: Vec<PoolLine>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolLine {
    pub name: String,
    pub listen: String,
    /// "replicate" or "shard".
    pub mode: String,
    /// Servers holding each key: all of them in a replicate pool.
    pub replicas: usize,
    pub hash: String,
    pub distribution: String,
    pub servers: Vec<String>,
}

/// Count, mean and M2 of Welford's algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WelfordLine {
    pub count: u64,
    pub mean: f64,
    pub m2: f64,
}

impl From<&Welford> for WelfordLine {
    fn from(w: &Welford) -> Self {
        WelfordLine {
            count: w.count,
            mean: w.mean,
            m2: w.m2,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Percentiles {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

/// One operation type's statistics (times in microseconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpLine {
    pub count: u64,
    pub hits: u64,
    pub misses: u64,
    pub errors: u64,
    pub keys: WelfordLine,
    pub response_us: WelfordLine,
    pub decode_us: WelfordLine,
    pub queue_wait_us: WelfordLine,
    pub worker_service_us: WelfordLine,
    pub server_service_us: WelfordLine,
    pub worker_processing_us: WelfordLine,
    pub server_service_us_by_server: Vec<WelfordLine>,
    pub rt_hist_100us: Vec<u64>,
    pub rt_overflow: u64,
    pub rt_percentiles_us: Percentiles,
    /// The HDR histogram, V2-deflate encoded, base64.
    pub rt_hdr: String,
}

/// A statistics window of one worker (`scope: "worker"`) or of all (`"total"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowLine {
    pub window: u64,
    /// "worker" or "total".
    pub scope: String,
    pub worker: Option<usize>,
    pub start: f64,
    pub end: f64,
    pub duration_s: f64,
    pub queue_len: WelfordLine,
    pub failovers: u64,
    pub ops: BTreeMap<String, OpLine>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub total: Option<TotalFields>,
}

/// Fields only the merged ("total") line of a window has.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TotalFields {
    pub arrivals: u64,
    pub arrival_rate: f64,
    pub throughput: f64,
    pub queue_len_now: usize,
    pub connections: u64,
}

/// The last line, on a clean shutdown: the whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SummaryLine {
    pub windows: u64,
    pub end: f64,
    pub duration_s: f64,
    pub arrivals: u64,
    pub throughput: f64,
    pub bad_requests: u64,
    pub total_connections: u64,
    pub queue_len: WelfordLine,
    pub failovers: u64,
    pub ops: BTreeMap<String, OpLine>,
}

/// The start line for `config` (pure: the caller gives the pid and the time).
pub fn start_line(config: &Config, pid: u32, start: f64) -> StartLine {
    StartLine {
        schema: SCHEMA_VERSION,
        version: env!("CARGO_PKG_VERSION").into(),
        pid,
        start,
        listen: config.listen.to_string(),
        workers: config.workers,
        servers: config.servers.iter().map(ToString::to_string).collect(),
        sharded: config.sharded,
        window_s: config.stats_window.as_secs_f64(),
        bucket_width_us: crate::metrics::BUCKET_WIDTH_US,
        pools: config
            .listeners
            .iter()
            .map(|l| PoolLine {
                name: l.pool.name.clone(),
                listen: l.listen.to_string(),
                mode: match l.pool.mode {
                    Mode::Replicate { .. } => "replicate".into(),
                    Mode::Shard { .. } => "shard".into(),
                },
                replicas: match l.pool.mode {
                    Mode::Replicate { .. } => l.pool.servers.len(),
                    Mode::Shard { replicas } => replicas,
                },
                hash: l.pool.hash.name().into(),
                distribution: l.pool.distribution.name().into(),
                servers: l.pool.servers.iter().map(|s| s.addr.to_string()).collect(),
            })
            .collect(),
    }
}

/// A window line (pure).
pub fn window_line(
    window: u64,
    worker: Option<usize>,
    stats: &WorkerStats,
    start: f64,
    end: f64,
    total: Option<TotalFields>,
) -> WindowLine {
    WindowLine {
        window,
        scope: if worker.is_some() { "worker" } else { "total" }.into(),
        worker,
        start,
        end,
        duration_s: end - start,
        queue_len: (&stats.queue_len).into(),
        failovers: stats.failovers,
        ops: ops_lines(stats),
        total,
    }
}

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
    observed: Arc<Observed>,
    units: Arc<StatsUnits>,
    window_len: std::time::Duration,
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
    pub fn create(
        observed: Arc<Observed>,
        units: Arc<StatsUnits>,
        config: &Config,
    ) -> io::Result<Self> {
        let out = config
            .stats_file
            .as_deref()
            .map(File::create)
            .transpose()?
            .map(BufWriter::new);
        let now = Instant::now();
        let servers = observed.health.len();
        let mut writer = StatsWriter {
            observed,
            units,
            window_len: config.stats_window,
            out,
            window: 0,
            window_start: now,
            window_start_unix: unix_now(),
            arrivals_seen: 0,
            totals: WorkerStats::new(servers, now),
        };
        let header = start_line(config, std::process::id(), writer.window_start_unix);
        writer.write_lines(&[Line::Start(header)])?;
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
        let mut ticks = tokio::time::interval(self.window_len);
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
    fn write_lines(&mut self, values: &[Line]) -> io::Result<()> {
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
        // Sized for every server known now (a reload may have added some).
        let servers = self.observed.health.len();
        let units = (0..self.units.len())
            .map(|worker| {
                let fresh = WorkerStats::new(servers, end);
                std::mem::replace(&mut *self.units.lock(worker), fresh)
            })
            .collect();
        let net = &self.observed.net;
        Swapped {
            end,
            end_unix: unix_now(),
            units,
            arrivals: net.arrivals.load(Ordering::Relaxed),
            queue_len_now: self.observed.queue.len(),
            connections: net.curr_connections.load(Ordering::Relaxed),
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
        let servers = units.iter().map(|u| u.servers()).max().unwrap_or(0);
        let mut merged = WorkerStats::new(servers, self.window_start);
        let mut lines = Vec::new();
        for (worker, unit) in units.iter().enumerate() {
            if self.out.is_some() && unit.ops.iter().any(|op| op.count > 0) {
                lines.push(Line::Window(window_line(
                    self.window,
                    Some(worker),
                    unit,
                    self.window_start_unix,
                    end_unix,
                    None,
                )));
            }
            merged.merge(unit);
        }
        let window_arrivals = arrivals - self.arrivals_seen;
        self.arrivals_seen = arrivals;
        if self.out.is_some() {
            let duration = end.duration_since(self.window_start).as_secs_f64();
            let completions: u64 = merged.ops.iter().map(|op| op.count).sum();
            let total = TotalFields {
                arrivals: window_arrivals,
                arrival_rate: rate(window_arrivals, duration),
                throughput: rate(completions, duration),
                queue_len_now,
                connections,
            };
            lines.push(Line::Window(window_line(
                self.window,
                None,
                &merged,
                self.window_start_unix,
                end_unix,
                Some(total),
            )));
        }
        if let Err(e) = self.write_lines(&lines) {
            error!(error = %e, "cannot write the stats file");
        }
        self.totals.merge(&merged);
        self.window += 1;
        self.window_start = end;
        self.window_start_unix = end_unix;
    }

    fn finish(mut self) -> RunSummary {
        let duration_s = self.totals.window_start.elapsed().as_secs_f64();
        let completions: u64 = self.totals.ops.iter().map(|op| op.count).sum();
        let net = &self.observed.net;
        let summary = SummaryLine {
            windows: self.window,
            end: unix_now(),
            duration_s,
            arrivals: self.arrivals_seen,
            throughput: rate(completions, duration_s),
            bad_requests: net.bad_requests.load(Ordering::Relaxed),
            total_connections: net.total_connections.load(Ordering::Relaxed),
            queue_len: (&self.totals.queue_len).into(),
            failovers: self.totals.failovers,
            ops: ops_lines(&self.totals),
        };
        if let Err(e) = self.write_lines(&[Line::Summary(summary)]) {
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

fn ops_lines(stats: &WorkerStats) -> BTreeMap<String, OpLine> {
    OpKind::ALL
        .into_iter()
        .filter(|kind| stats.op(*kind).count > 0)
        .map(|kind| (kind.name().to_string(), op_line(stats.op(kind))))
        .collect()
}

fn op_line(op: &OpStats) -> OpLine {
    let p = op.rt_hdr.percentiles();
    OpLine {
        count: op.count,
        hits: op.hits,
        misses: op.misses,
        errors: op.errors,
        keys: (&op.keys).into(),
        response_us: (&op.response).into(),
        decode_us: (&op.decode).into(),
        queue_wait_us: (&op.queue_wait).into(),
        worker_service_us: (&op.worker_service).into(),
        server_service_us: (&op.server_service).into(),
        worker_processing_us: (&op.worker_processing).into(),
        server_service_us_by_server: op.per_server.iter().map(WelfordLine::from).collect(),
        rt_hist_100us: op.rt_buckets.trimmed().to_vec(),
        rt_overflow: op.rt_buckets.overflow,
        rt_percentiles_us: Percentiles {
            p50: p.p50,
            p90: p.p90,
            p99: p.p99,
            p999: p.p999,
            max: p.max,
        },
        rt_hdr: op.rt_hdr.encode_base64().unwrap_or_default(),
    }
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

#[cfg(test)]
mod golden_tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::metrics::{OpKind, Outcome, Timestamps};

    const GOLDEN: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schema/stats-file.golden.jsonl"
    );

    /// A short run with fixed times and values: two workers over two servers.
    fn fixture() -> Vec<Line> {
        let config = Config::new(
            "127.0.0.1:11212".parse().unwrap(),
            vec![
                "127.0.0.1:11211".parse().unwrap(),
                "127.0.0.1:11311".parse().unwrap(),
            ],
            2,
        );
        let t0 = Instant::now();
        let at = |us: u64| t0 + Duration::from_micros(us);
        let stamps = |offsets: [u64; 6]| Timestamps {
            arrival: at(offsets[0]),
            enqueued: at(offsets[1]),
            dequeued: at(offsets[2]),
            first_sent: Some(at(offsets[3])),
            last_answer: Some(at(offsets[4])),
            reply_sent: at(offsets[5]),
        };
        let mut workers = [WorkerStats::new(2, t0), WorkerStats::new(2, t0)];
        let hit = Outcome {
            keys: 1,
            hits: 1,
            error: false,
        };
        let ts = stamps([0, 4, 10, 12, 160, 170]);
        workers[0].record(OpKind::Get, &ts, hit);
        workers[0].record_server(OpKind::Get, 0, at(12), at(160));
        workers[0].queue_len.add(0.0);
        let ts = stamps([0, 5, 30, 31, 231, 250]);
        workers[0].record(OpKind::Get, &ts, Outcome { hits: 0, ..hit });
        workers[0].record_server(OpKind::Get, 1, at(31), at(231));
        workers[0].queue_len.add(1.0);
        let ts = stamps([0, 6, 8, 9, 1209, 1220]);
        workers[1].record(OpKind::Set, &ts, hit);
        workers[1].record_server(OpKind::Set, 0, at(9), at(1100));
        workers[1].record_server(OpKind::Set, 1, at(9), at(1209));
        workers[1].queue_len.add(0.0);
        workers[1].failovers = 1;
        let (start, end) = (1_700_000_000.0, 1_700_000_005.0);
        let mut lines = vec![Line::Start(start_line(&config, 4242, start))];
        let mut merged = WorkerStats::new(2, t0);
        for (i, w) in workers.iter().enumerate() {
            lines.push(Line::Window(window_line(0, Some(i), w, start, end, None)));
            merged.merge(w);
        }
        let total = TotalFields {
            arrivals: 3,
            arrival_rate: 0.6,
            throughput: 0.6,
            queue_len_now: 0,
            connections: 2,
        };
        lines.push(Line::Window(window_line(
            0,
            None,
            &merged,
            start,
            end,
            Some(total),
        )));
        lines.push(Line::Summary(SummaryLine {
            windows: 1,
            end: end + 0.5,
            duration_s: 5.5,
            arrivals: 3,
            throughput: 3.0 / 5.5,
            bad_requests: 0,
            total_connections: 2,
            queue_len: (&merged.queue_len).into(),
            failovers: merged.failovers,
            ops: ops_lines(&merged),
        }));
        lines
    }

    fn encode(lines: &[Line]) -> String {
        lines
            .iter()
            .map(|l| serde_json::to_string(l).unwrap() + "\n")
            .collect()
    }

    #[test]
    fn the_writer_produces_the_golden_file() {
        let text = encode(&fixture());
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(GOLDEN, &text).unwrap();
        }
        let golden = std::fs::read_to_string(GOLDEN).expect("the golden stats file");
        assert_eq!(
            text, golden,
            "the stats file changed: if on purpose, rerun with UPDATE_GOLDEN=1, update \
             schema/stats-file.schema.json and docs/stats-file.md, and check the Python reader"
        );
    }

    #[test]
    fn every_golden_line_reads_back_into_the_same_typed_record() {
        let golden = std::fs::read_to_string(GOLDEN).unwrap();
        let read: Vec<Line> = golden
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(read, fixture());
    }

    #[test]
    fn an_unknown_field_is_refused_by_the_typed_reader() {
        let line = r#"{"type":"summary","windows":0,"end":0,"duration_s":0,"arrivals":0,
            "throughput":0,"bad_requests":0,"total_connections":0,
            "queue_len":{"count":0,"mean":0,"m2":0},"failovers":0,"ops":{},"extra":1}"#;
        assert!(serde_json::from_str::<Line>(line).is_err());
    }
}
