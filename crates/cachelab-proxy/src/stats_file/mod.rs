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
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio::time::MissedTickBehavior;
use tracing::error;

use crate::config::Config;
use crate::metrics::WorkerStats;
use crate::observed::Observed;
use crate::stats_units::StatsUnits;

mod lines;
mod summary;

use lines::ops_lines;
pub use lines::*;
pub use summary::{format_summary, log_summary};

/// How long the writer waits at a window's end for the loops to hand over.
const HANDOVER_PATIENCE: Duration = Duration::from_millis(250);

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
        let swapped = self.swap_units().await;
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

    /// Has the loops hand over every worker's window ([`StatsUnits::ask_windows`]),
    /// leaves a fresh unit for each, and samples the net layer's counters at the
    /// window's end. A loop that does not answer in time keeps its workers' windows
    /// for the next one.
    async fn swap_units(&self) -> Swapped {
        self.units.ask_windows(HANDOVER_PATIENCE).await;
        let end = Instant::now();
        // Sized for every server known now (a reload may have added some).
        let servers = self.observed.health.len();
        let units = (0..self.units.len())
            .map(|worker| {
                let mut handover = self.units.lock(worker);
                if handover.handed {
                    handover.handed = false;
                    std::mem::replace(&mut handover.unit, WorkerStats::new(servers, end))
                } else {
                    WorkerStats::new(servers, self.window_start)
                }
            })
            .collect();
        let net = &self.observed.net;
        Swapped {
            end,
            end_unix: unix_now(),
            units,
            arrivals: net.arrivals.load(Ordering::Relaxed),
            queue_len_now: self.observed.queue_len(),
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
