//! Per-thread measurements: the summary window's statistics per operation type, run
//! totals, the per-second series, and the open-loop send lag. Pure and mergeable, so each
//! thread records without sharing anything and the threads are merged at the end.
//!
//! Timers (all from the monotonic clock, in nanoseconds since the run started):
//! - **latency** starts at the request's *start*: in closed loop, just before the write
//!   that carries its bytes; in open loop, its scheduled send time (so time spent waiting
//!   behind a stalled server or a late client counts). It stops when the reply has been
//!   parsed.
//! - **send lag** (open loop) starts at the scheduled send time and stops just before the
//!   write that carries the request.
//!
//! A request belongs to the summary when it *completes* inside the window
//! `[warmup, test_time - cooldown)`; the per-second series counts completions by second
//! over the whole run.

use cachelab_stats::{LatencyHistogram, Welford};

pub mod servers;

use servers::PerServer;

use crate::sent::SentCounts;
use crate::setup::Setup;
use crate::timing::{ns_to_us, Times, TimestampMode, Timing};
use crate::workload::{Op, Outcome};

/// The part of the run that the summary covers, in ns since the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start_ns: u64,
    /// `u64::MAX` when the run ends by count rather than time.
    pub end_ns: u64,
}

impl Window {
    pub fn contains(&self, at_ns: u64) -> bool {
        at_ns >= self.start_ns && at_ns < self.end_ns
    }
}

/// The summary statistics of one operation type.
#[derive(Debug, Clone, Default)]
pub struct OpStats {
    /// Requests answered (error replies included).
    pub completed: u64,
    pub hits: u64,
    pub misses: u64,
    /// Error replies, plus requests lost to a broken connection or a reply timeout.
    pub errors: u64,
    /// Latency in µs of every answered request.
    pub latency: LatencyHistogram,
    /// The same latencies for an exact mean and deviation.
    pub moments: Welford,
}

impl OpStats {
    /// A request answered in `us` microseconds.
    pub(crate) fn answered(&mut self, us: u64, outcome: Outcome) {
        self.completed += 1;
        self.hits += u64::from(outcome.hits);
        self.misses += u64::from(outcome.misses);
        self.errors += u64::from(outcome.error);
        self.latency.record(us);
        self.moments.add(us as f64);
    }

    pub(crate) fn merge(&mut self, other: &OpStats) {
        self.completed += other.completed;
        self.hits += other.hits;
        self.misses += other.misses;
        self.errors += other.errors;
        self.latency
            .merge(&other.latency)
            .expect("histograms of one unit merge");
        self.moments.merge(&other.moments);
    }
}

/// One operation type during one second.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SecondOp {
    pub completed: u64,
    pub hits: u64,
    pub misses: u64,
    pub errors: u64,
    /// Latency in µs.
    pub latency: Welford,
    pub max_us: u64,
}

impl SecondOp {
    fn merge(&mut self, other: &SecondOp) {
        self.completed += other.completed;
        self.hits += other.hits;
        self.misses += other.misses;
        self.errors += other.errors;
        self.latency.merge(&other.latency);
        self.max_us = self.max_us.max(other.max_us);
    }
}

/// Whole-run counts, window or not.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub sent: u64,
    pub completed: u64,
    pub errors: u64,
    /// Requests that had no reply within `--reply-timeout`, or were still unanswered when
    /// the run's hard deadline passed.
    pub timeouts: u64,
    /// Connections that broke (reset, closed, malformed reply) or could not be re-opened.
    pub connection_errors: u64,
}

/// The most send gaps one report keeps: enough for a goodness-of-fit test, small in JSON.
pub const MAX_SEND_INTERVALS: usize = 10_000;

#[derive(Debug, Clone)]
pub struct Recorder {
    pub window: Window,
    pub ops: [OpStats; 3],
    pub totals: Totals,
    pub series: Vec<[SecondOp; 3]>,
    /// Open loop: send lag in µs of requests sent inside the window.
    pub send_lag: LatencyHistogram,
    pub send_lag_moments: Welford,
    /// Requests sent inside the window (the achieved offered load).
    pub sent_in_window: u64,
    /// Open loop: the gaps in ns between successive sends of this recorder's thread
    /// inside the window (at most [`MAX_SEND_INTERVALS`]): what the arrival check tests.
    pub send_intervals_ns: Vec<u64>,
    /// When this thread last sent in open loop.
    last_send_ns: Option<u64>,
    /// Open loop: requests whose scheduled time falls inside the window, sent or not.
    pub scheduled_in_window: u64,
    /// When the last request completed or failed.
    pub last_event_ns: u64,
    /// Kernel and program timestamps of the requests answered inside the window.
    pub timing: Timing,
    /// The CPU the load threads used while the run's clock ran.
    pub cpu: CpuUsage,
    /// Every connection's set-up (connect and TLS handshake), apart from request latency.
    pub setup: Setup,
    /// What was sent: sizes and key counts.
    pub sent_counts: SentCounts,
    /// Sharded runs: each server's counts.
    pub servers: PerServer,
}

/// CPU time of load threads (`getrusage(RUSAGE_THREAD)`) over their wall time, from the
/// start of the run's clock until the thread's connections were done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuUsage {
    pub threads: u64,
    pub user_ns: u64,
    pub system_ns: u64,
    /// The threads' wall times added up.
    pub wall_ns: u64,
    /// The highest share of its wall time one thread spent on the CPU, in millionths.
    pub busiest_ppm: u64,
}

impl CpuUsage {
    /// One thread's usage.
    pub fn thread(user_ns: u64, system_ns: u64, wall_ns: u64) -> CpuUsage {
        let ppm = if wall_ns == 0 {
            0
        } else {
            ((user_ns + system_ns) as u128 * 1_000_000 / wall_ns as u128) as u64
        };
        CpuUsage {
            threads: 1,
            user_ns,
            system_ns,
            wall_ns,
            busiest_ppm: ppm,
        }
    }

    pub fn merge(&mut self, other: &CpuUsage) {
        self.threads += other.threads;
        self.user_ns += other.user_ns;
        self.system_ns += other.system_ns;
        self.wall_ns += other.wall_ns;
        self.busiest_ppm = self.busiest_ppm.max(other.busiest_ppm);
    }

    /// CPU time over wall time, all threads together (1.0: every thread always on a CPU).
    pub fn share(&self) -> f64 {
        if self.wall_ns == 0 {
            0.0
        } else {
            (self.user_ns + self.system_ns) as f64 / self.wall_ns as f64
        }
    }
}

impl Recorder {
    pub fn new(window: Window) -> Recorder {
        Recorder {
            window,
            ops: Default::default(),
            totals: Totals::default(),
            series: Vec::new(),
            send_lag: LatencyHistogram::default(),
            send_lag_moments: Welford::default(),
            sent_in_window: 0,
            send_intervals_ns: Vec::new(),
            last_send_ns: None,
            scheduled_in_window: 0,
            last_event_ns: 0,
            timing: Timing::default(),
            cpu: CpuUsage::default(),
            setup: Setup::default(),
            sent_counts: SentCounts::default(),
            servers: PerServer::new(window),
        }
    }

    fn second(&mut self, at_ns: u64) -> &mut [SecondOp; 3] {
        let index = (at_ns / 1_000_000_000) as usize;
        if index >= self.series.len() {
            self.series.resize(index + 1, Default::default());
        }
        &mut self.series[index]
    }

    /// A request is written at `at_ns`; `lag_ns` is its send lag in open loop.
    pub fn sent(&mut self, at_ns: u64, lag_ns: Option<u64>) {
        self.totals.sent += 1;
        let previous = match lag_ns {
            Some(_) => self.last_send_ns.replace(at_ns),
            None => None,
        };
        if self.window.contains(at_ns) {
            self.sent_in_window += 1;
            if let Some(lag) = lag_ns {
                let us = ns_to_us(lag);
                self.send_lag.record(us);
                self.send_lag_moments.add(us as f64);
            }
            if let Some(previous) = previous {
                if self.send_intervals_ns.len() < MAX_SEND_INTERVALS {
                    self.send_intervals_ns.push(at_ns.saturating_sub(previous));
                }
            }
        }
    }

    /// A request outside the stream's schedule (a lookaside SET after a miss) is written:
    /// it counts as sent, not toward the offered load, the send lag or the gaps.
    pub fn sent_extra(&mut self) {
        self.totals.sent += 1;
    }

    /// Open loop: a request was due at `due_ns` (called whether or not it could be sent).
    pub fn scheduled(&mut self, due_ns: u64) {
        self.scheduled_in_window += u64::from(self.window.contains(due_ns));
    }

    /// A reply to a request that started at `start_ns` was parsed at `done_ns`.
    pub fn completed(&mut self, op: Op, start_ns: u64, done_ns: u64, outcome: Outcome) {
        let us = ns_to_us(done_ns.saturating_sub(start_ns));
        self.totals.completed += 1;
        self.totals.errors += u64::from(outcome.error);
        self.last_event_ns = self.last_event_ns.max(done_ns);
        let second = &mut self.second(done_ns)[op.index()];
        second.completed += 1;
        second.hits += u64::from(outcome.hits);
        second.misses += u64::from(outcome.misses);
        second.errors += u64::from(outcome.error);
        second.latency.add(us as f64);
        second.max_us = second.max_us.max(us);
        if self.window.contains(done_ns) {
            self.ops[op.index()].answered(us, outcome);
        }
    }

    /// A reply was parsed: the latency runs from the intended send to the kernel's
    /// receipt (`mode` kernel, where stamped) or to the program's read, and the timing
    /// figures are kept if it completed inside the window.
    pub fn answered(&mut self, op: Op, times: &Times, mode: TimestampMode, outcome: Outcome) {
        let end = times.latency_end(mode);
        self.completed(op, times.intended_ns, end, outcome);
        if self.window.contains(end) {
            self.timing.record(times);
        }
    }

    /// A request got no reply: its connection broke, or it timed out (`timeout`).
    pub fn failed(&mut self, op: Op, at_ns: u64, timeout: bool) {
        self.totals.errors += 1;
        self.totals.timeouts += u64::from(timeout);
        self.last_event_ns = self.last_event_ns.max(at_ns);
        self.second(at_ns)[op.index()].errors += 1;
        if self.window.contains(at_ns) {
            self.ops[op.index()].errors += 1;
        }
    }

    pub fn connection_error(&mut self) {
        self.totals.connection_errors += 1;
    }

    pub fn merge(&mut self, other: &Recorder) {
        for (mine, theirs) in self.ops.iter_mut().zip(&other.ops) {
            mine.merge(theirs);
        }
        let t = &other.totals;
        self.totals.sent += t.sent;
        self.totals.completed += t.completed;
        self.totals.errors += t.errors;
        self.totals.timeouts += t.timeouts;
        self.totals.connection_errors += t.connection_errors;
        if other.series.len() > self.series.len() {
            self.series.resize(other.series.len(), Default::default());
        }
        for (mine, theirs) in self.series.iter_mut().zip(&other.series) {
            for (m, t) in mine.iter_mut().zip(theirs) {
                m.merge(t);
            }
        }
        self.send_lag
            .merge(&other.send_lag)
            .expect("histograms of one unit merge");
        self.send_lag_moments.merge(&other.send_lag_moments);
        self.sent_in_window += other.sent_in_window;
        // Each thread's gaps are a sample of its own process (threads share the rate
        // evenly); the merged sample is theirs in turn, still bounded.
        let room = MAX_SEND_INTERVALS.saturating_sub(self.send_intervals_ns.len());
        self.send_intervals_ns
            .extend(other.send_intervals_ns.iter().take(room));
        self.scheduled_in_window += other.scheduled_in_window;
        self.last_event_ns = self.last_event_ns.max(other.last_event_ns);
        self.timing.merge(&other.timing);
        self.cpu.merge(&other.cpu);
        self.setup.merge(&other.setup);
        self.sent_counts.merge(&other.sent_counts);
        self.servers.merge(&other.servers);
    }

    /// All operation types together.
    pub fn total(&self) -> OpStats {
        let mut all = OpStats::default();
        for stats in &self.ops {
            all.merge(stats);
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn hit() -> Outcome {
        Outcome {
            hits: 1,
            misses: 0,
            error: false,
        }
    }

    #[test]
    fn only_completions_inside_the_window_reach_the_summary() {
        let mut r = Recorder::new(Window {
            start_ns: S,
            end_ns: 3 * S,
        });
        r.completed(Op::Get, 0, S / 2, hit());
        r.completed(Op::Get, S, S + 1000, hit());
        r.completed(Op::Get, 2 * S, 3 * S, hit());
        assert_eq!(r.ops[Op::Get.index()].completed, 1);
        assert_eq!(r.totals.completed, 3);
        let per_second: Vec<u64> = r
            .series
            .iter()
            .map(|s| s[Op::Get.index()].completed)
            .collect();
        assert_eq!(per_second, vec![1, 1, 0, 1]);
    }

    #[test]
    fn latency_runs_from_start_to_completion_in_microseconds() {
        let mut r = Recorder::new(Window {
            start_ns: 0,
            end_ns: u64::MAX,
        });
        r.completed(Op::Set, 1_000, 251_400, Outcome::default());
        let stats = &r.ops[Op::Set.index()];
        assert_eq!(stats.latency.percentiles().max, 250);
        assert_eq!(stats.moments.mean, 250.0);
        assert_eq!(r.series[0][0].max_us, 250);
    }

    #[test]
    fn failures_count_as_errors_without_a_latency() {
        let mut r = Recorder::new(Window {
            start_ns: 0,
            end_ns: u64::MAX,
        });
        r.failed(Op::MultiGet, 5, true);
        r.failed(Op::MultiGet, 6, false);
        let stats = &r.ops[Op::MultiGet.index()];
        assert_eq!(
            (stats.errors, stats.completed, stats.latency.len()),
            (2, 0, 0)
        );
        assert_eq!((r.totals.errors, r.totals.timeouts), (2, 1));
    }

    #[test]
    fn open_loop_sends_keep_their_gaps_inside_the_window_and_closed_loop_none() {
        let mut r = Recorder::new(Window {
            start_ns: 1_000,
            end_ns: 10_000,
        });
        r.sent(500, Some(0)); // before the window: only a starting point
        r.sent(1_500, Some(0));
        r.sent(4_000, Some(10));
        r.sent(20_000, Some(0)); // after the window
        assert_eq!(r.send_intervals_ns, vec![1_000, 2_500]);
        let mut closed = Recorder::new(r.window);
        closed.sent(2_000, None);
        closed.sent(3_000, None);
        assert!(closed.send_intervals_ns.is_empty());
        r.merge(&closed);
        assert_eq!(r.send_intervals_ns.len(), 2);
    }

    #[test]
    fn send_lag_and_offered_load_count_only_the_window() {
        let mut r = Recorder::new(Window {
            start_ns: S,
            end_ns: 2 * S,
        });
        r.sent(10, Some(5_000));
        r.sent(S + 10, Some(2_000_000));
        r.sent(S + 20, None);
        assert_eq!((r.totals.sent, r.sent_in_window), (3, 2));
        r.scheduled(S - 1);
        r.scheduled(S);
        assert_eq!(r.scheduled_in_window, 1);
        assert_eq!(r.send_lag.len(), 1);
        assert_eq!(r.send_lag.percentiles().max, 2000);
    }

    #[test]
    fn an_answer_ends_at_the_kernels_receipt_and_keeps_its_timing_inside_the_window() {
        let mut r = Recorder::new(Window {
            start_ns: S,
            end_ns: 2 * S,
        });
        let times = |at: u64| Times {
            intended_ns: at,
            transmitted_ns: Some(at + 10_000),
            received_ns: Some(at + 60_000),
            wire: Some(crate::timing::Wire {
                ns: 50_000,
                hardware: false,
            }),
            read_ns: at + 90_000,
        };
        r.answered(Op::Get, &times(S), TimestampMode::Kernel, hit());
        r.answered(Op::Get, &times(S), TimestampMode::User, hit());
        r.answered(Op::Get, &times(0), TimestampMode::Kernel, hit());
        let get = &r.ops[Op::Get.index()];
        assert_eq!(get.completed, 2, "the third is in the warm-up");
        assert_eq!(
            get.moments.mean, 75.0,
            "60 us to the receipt, 90 us to the read"
        );
        assert_eq!(r.timing.requests, 2);
        assert_eq!(r.timing.wire.moments.mean, 50.0);
    }

    #[test]
    fn cpu_shares_add_over_threads_and_keep_the_busiest() {
        let mut a = CpuUsage::thread(600, 200, 1_000);
        a.merge(&CpuUsage::thread(100, 100, 1_000));
        assert_eq!((a.threads, a.busiest_ppm), (2, 800_000));
        assert_eq!(a.share(), 0.5);
        assert_eq!(CpuUsage::default().share(), 0.0);
    }

    #[test]
    fn merging_threads_adds_everything() {
        let window = Window {
            start_ns: 0,
            end_ns: u64::MAX,
        };
        let mut a = Recorder::new(window);
        let mut b = Recorder::new(window);
        a.completed(Op::Get, 0, 100_000, hit());
        b.completed(
            Op::Get,
            0,
            300_000,
            Outcome {
                hits: 0,
                misses: 1,
                error: false,
            },
        );
        b.completed(Op::Set, 0, 2 * S + 1, Outcome::default());
        b.connection_error();
        a.merge(&b);
        let get = &a.ops[Op::Get.index()];
        assert_eq!((get.completed, get.hits, get.misses), (2, 1, 1));
        assert_eq!(get.moments.mean, 200.0);
        assert_eq!(a.series.len(), 3);
        assert_eq!(a.series[0][Op::Get.index()].completed, 2);
        assert_eq!(a.totals.connection_errors, 1);
        assert_eq!(a.total().completed, 3);
        assert_eq!(a.last_event_ns, 2 * S + 1);
    }
}
