//! Per-request timestamps, the metrics derived from them, and the per-worker statistics
//! unit they are recorded into.
//!
//! The decomposition, all in microseconds (every term is non-negative because the clock
//! is monotonic and the timestamps are taken in this order):
//!
//! ```text
//! response          = reply_sent - arrival
//!                   = decode + queue_wait + worker_service
//! decode            = enqueued - arrival
//! queue_wait        = dequeued - enqueued
//! worker_service    = reply_sent - dequeued
//!                   = server_service + worker_processing
//! server_service    = last server answer - first message sent (0 if no server was used)
//! worker_processing = worker_service - server_service
//! ```

use std::time::Instant;

use cachelab_stats::{BucketHistogram, LatencyHistogram, Welford};

/// Width of the response-time buckets written to the stats file.
pub const BUCKET_WIDTH_US: u64 = 100;
/// Buckets up to 10 s; slower responses count in the overflow bucket.
pub const MAX_BUCKETS: usize = 100_000;

/// The operation types statistics are kept for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// get or gets of one key.
    Get,
    /// get or gets of several keys.
    MultiGet,
    /// set, add, replace, append, prepend, cas.
    Set,
    /// delete, incr, decr, touch, flush_all: replicated like writes.
    Other,
}

impl OpKind {
    pub const ALL: [OpKind; 4] = [OpKind::Get, OpKind::MultiGet, OpKind::Set, OpKind::Other];

    pub fn name(self) -> &'static str {
        match self {
            OpKind::Get => "get",
            OpKind::MultiGet => "multiget",
            OpKind::Set => "set",
            OpKind::Other => "other",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// When things happened to one request.
#[derive(Debug, Clone, Copy)]
pub struct Timestamps {
    /// The read that completed the request's bytes returned.
    pub arrival: Instant,
    /// The request was in the FCFS queue.
    pub enqueued: Instant,
    /// A worker took it from the queue.
    pub dequeued: Instant,
    /// The first server message was handed to the kernel (None: no server was used).
    pub first_sent: Option<Instant>,
    /// The last involved server's answer was parsed (or its failure detected).
    pub last_answer: Option<Instant>,
    /// The reply was handed to the client's socket, or queued behind earlier replies of
    /// the same connection.
    pub reply_sent: Instant,
}

/// The derived metrics of one request, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub response: f64,
    pub decode: f64,
    pub queue_wait: f64,
    pub worker_service: f64,
    pub server_service: f64,
    pub worker_processing: f64,
}

/// `later - earlier` in microseconds (0 if `later` is earlier). The nanoseconds are
/// summed in a `u64` (585 years) rather than `as_nanos`'s `u128`, whose conversion to a
/// float was a visible share of a request's instructions.
pub fn micros(later: Instant, earlier: Instant) -> f64 {
    let d = later.saturating_duration_since(earlier);
    let nanos = d
        .as_secs()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::from(d.subsec_nanos()));
    nanos as f64 / 1000.0
}

impl Timestamps {
    pub fn sample(&self) -> Sample {
        let server_service = match (self.first_sent, self.last_answer) {
            (Some(sent), Some(answer)) => micros(answer, sent),
            _ => 0.0,
        };
        let decode = micros(self.enqueued, self.arrival);
        let queue_wait = micros(self.dequeued, self.enqueued);
        let worker_service = micros(self.reply_sent, self.dequeued);
        Sample {
            response: decode + queue_wait + worker_service,
            decode,
            queue_wait,
            worker_service,
            server_service: server_service.min(worker_service),
            worker_processing: (worker_service - server_service).max(0.0),
        }
    }
}

/// What the worker learnt about one request besides its timing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Outcome {
    pub keys: u32,
    pub hits: u32,
    /// The client got an error line (a server failed or answered with an error).
    pub error: bool,
}

/// Statistics of one operation type within one window.
#[derive(Debug, Clone)]
pub struct OpStats {
    pub count: u64,
    pub hits: u64,
    pub misses: u64,
    pub errors: u64,
    pub keys: Welford,
    pub response: Welford,
    pub decode: Welford,
    pub queue_wait: Welford,
    pub worker_service: Welford,
    pub server_service: Welford,
    pub worker_processing: Welford,
    /// Per server: time from sending that server its message to parsing its answer.
    pub per_server: Vec<Welford>,
    pub rt_buckets: BucketHistogram,
    pub rt_hdr: LatencyHistogram,
}

impl OpStats {
    fn new(servers: usize) -> Self {
        OpStats {
            count: 0,
            hits: 0,
            misses: 0,
            errors: 0,
            keys: Welford::default(),
            response: Welford::default(),
            decode: Welford::default(),
            queue_wait: Welford::default(),
            worker_service: Welford::default(),
            server_service: Welford::default(),
            worker_processing: Welford::default(),
            per_server: vec![Welford::default(); servers],
            rt_buckets: BucketHistogram::new(BUCKET_WIDTH_US, MAX_BUCKETS),
            rt_hdr: LatencyHistogram::default(),
        }
    }

    pub fn merge(&mut self, other: &OpStats) {
        // Everything is recorded with a completion, so an empty unit adds nothing (and
        // merging its histograms would still walk their buckets).
        if other.count == 0 {
            return;
        }
        self.count += other.count;
        self.hits += other.hits;
        self.misses += other.misses;
        self.errors += other.errors;
        self.keys.merge(&other.keys);
        self.response.merge(&other.response);
        self.decode.merge(&other.decode);
        self.queue_wait.merge(&other.queue_wait);
        self.worker_service.merge(&other.worker_service);
        self.server_service.merge(&other.server_service);
        self.worker_processing.merge(&other.worker_processing);
        for (mine, theirs) in self.per_server.iter_mut().zip(&other.per_server) {
            mine.merge(theirs);
        }
        self.rt_buckets.merge(&other.rt_buckets);
        // Both histograms auto-resize, so adding cannot fail for lack of range.
        let _ = self.rt_hdr.merge(&other.rt_hdr);
    }
}

/// One worker's statistics unit: owned by that worker and swapped out by the stats
/// writer at every window boundary.
#[derive(Debug, Clone)]
pub struct WorkerStats {
    pub window_start: Instant,
    pub ops: [OpStats; 4],
    /// Queue length seen by each request this worker took (after taking it).
    pub queue_len: Welford,
    /// Reads re-sent to another server because theirs had failed.
    pub failovers: u64,
}

impl WorkerStats {
    pub fn new(servers: usize, window_start: Instant) -> Self {
        WorkerStats {
            window_start,
            ops: std::array::from_fn(|_| OpStats::new(servers)),
            queue_len: Welford::default(),
            failovers: 0,
        }
    }

    /// Servers this unit keeps per-server times for.
    pub fn servers(&self) -> usize {
        self.ops[0].per_server.len()
    }

    pub fn op(&self, kind: OpKind) -> &OpStats {
        &self.ops[kind.index()]
    }

    pub fn record(&mut self, kind: OpKind, ts: &Timestamps, outcome: Outcome) {
        self.record_sample(kind, &ts.sample(), outcome);
    }

    /// [`WorkerStats::record`] with the request's [`Sample`] already derived.
    pub fn record_sample(&mut self, kind: OpKind, s: &Sample, outcome: Outcome) {
        let op = &mut self.ops[kind.index()];
        op.count += 1;
        if matches!(kind, OpKind::Get | OpKind::MultiGet) {
            op.hits += u64::from(outcome.hits);
            op.misses += u64::from(outcome.keys.saturating_sub(outcome.hits));
        }
        op.errors += u64::from(outcome.error);
        op.keys.add(f64::from(outcome.keys));
        op.response.add(s.response);
        op.decode.add(s.decode);
        op.queue_wait.add(s.queue_wait);
        op.worker_service.add(s.worker_service);
        op.server_service.add(s.server_service);
        op.worker_processing.add(s.worker_processing);
        let response_us = s.response.round() as u64;
        op.rt_buckets.record(response_us);
        op.rt_hdr.record(response_us);
    }

    pub fn record_server(&mut self, kind: OpKind, server: usize, sent: Instant, answer: Instant) {
        self.record_server_us(kind, server, micros(answer, sent));
    }

    /// [`WorkerStats::record_server`] with the time already in microseconds.
    pub fn record_server_us(&mut self, kind: OpKind, server: usize, us: f64) {
        if let Some(w) = self.ops[kind.index()].per_server.get_mut(server) {
            w.add(us);
        }
    }

    pub fn merge(&mut self, other: &WorkerStats) {
        for (mine, theirs) in self.ops.iter_mut().zip(&other.ops) {
            mine.merge(theirs);
        }
        self.queue_len.merge(&other.queue_len);
        self.failovers += other.failovers;
        self.window_start = self.window_start.min(other.window_start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn stamps(offsets_us: [u64; 6]) -> Timestamps {
        let t0 = Instant::now();
        let at = |us| t0 + Duration::from_micros(us);
        Timestamps {
            arrival: at(offsets_us[0]),
            enqueued: at(offsets_us[1]),
            dequeued: at(offsets_us[2]),
            first_sent: Some(at(offsets_us[3])),
            last_answer: Some(at(offsets_us[4])),
            reply_sent: at(offsets_us[5]),
        }
    }

    #[test]
    fn response_time_decomposes_into_its_components() {
        let s = stamps([0, 10, 110, 120, 420, 450]).sample();
        assert_eq!(s.decode, 10.0);
        assert_eq!(s.queue_wait, 100.0);
        assert_eq!(s.worker_service, 340.0);
        assert_eq!(s.server_service, 300.0);
        assert_eq!(s.worker_processing, 40.0);
        assert_eq!(s.response, 450.0);
        assert_eq!(s.response, s.decode + s.queue_wait + s.worker_service);
        assert_eq!(s.worker_service, s.server_service + s.worker_processing);
    }

    #[test]
    fn a_request_that_reached_no_server_has_zero_server_service() {
        let mut ts = stamps([0, 1, 2, 0, 0, 5]);
        ts.first_sent = None;
        ts.last_answer = None;
        let s = ts.sample();
        assert_eq!(s.server_service, 0.0);
        assert_eq!(s.worker_processing, 3.0);
    }

    #[test]
    fn get_hits_and_misses_count_keys() {
        let mut w = WorkerStats::new(3, Instant::now());
        let ts = stamps([0, 1, 2, 3, 4, 5]);
        w.record(
            OpKind::MultiGet,
            &ts,
            Outcome {
                keys: 5,
                hits: 3,
                error: false,
            },
        );
        let op = w.op(OpKind::MultiGet);
        assert_eq!((op.count, op.hits, op.misses), (1, 3, 2));
        assert_eq!(op.keys.mean, 5.0);
        assert_eq!(op.rt_buckets.trimmed(), &[1]);
    }

    #[test]
    fn merging_workers_adds_counts() {
        let ts = stamps([0, 1, 2, 3, 4, 5]);
        let mut a = WorkerStats::new(1, Instant::now());
        let mut b = WorkerStats::new(1, Instant::now());
        a.record(OpKind::Set, &ts, Outcome::default());
        b.record(OpKind::Set, &ts, Outcome::default());
        b.record_server(OpKind::Set, 0, ts.dequeued, ts.reply_sent);
        a.merge(&b);
        assert_eq!(a.op(OpKind::Set).count, 2);
        assert_eq!(a.op(OpKind::Set).per_server[0].count, 1);
        assert_eq!(a.op(OpKind::Set).rt_hdr.len(), 2);
    }
}
