//! One connection's load engine, without I/O: what to send next and when, what each
//! reply means, and what to record. The runner's connection (`runner::conn`) owns the
//! socket and the clock and only moves bytes; everything it decides is asked of this
//! engine with the time passed in, so the rules are tested in simulated time
//! (`tests.rs`).
//!
//! The rules, by name:
//! - **closed loop**: keep `pipeline` requests outstanding; new requests are composed
//!   only once everything composed before has gone to the kernel, so the requests that
//!   refill a pipeline after one read leave together, in one write;
//! - **open loop**: each request is composed at its scheduled time (the [`Schedule`]),
//!   whatever is outstanding; its latency runs from that time;
//! - **budget**: a run bounded by count stops composing when the connection's share is
//!   sent; **session**: with `--reconnect-interval N` a connection sends N requests,
//!   waits for their answers and is re-opened;
//! - **lookaside**: a single-key GET that misses is followed by a SET of that key (the
//!   value size from the size distribution), sent before the next request of the stream,
//!   as an application's cache client does after reading the database. Its latency runs
//!   from its own send. It is an extra request: it is not in the budget or the schedule;
//! - **replies** are framed with the protocol crate's [`ReplyScan`], which resumes where
//!   the last read stopped, and parsed once, when complete, in request order;
//! - **failures**: a broken connection or a reply timeout fails what is outstanding; an
//!   open loop counts what it could not send as scheduled, so the shortfall shows.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use cachelab_protocol::{Expect, ReplyError, ReplyScan};

use crate::config::Protocol;
use crate::record::Recorder;
use crate::schedule::Schedule;
use crate::stamps::{AwaitsTransmit, Stamp};
use crate::timing::{Times, TimestampMode};
use crate::workload::{read_reply, Generator, Op, Outcome, Sent};

pub mod replay;
#[cfg(test)]
mod replay_tests;
#[cfg(test)]
mod tests;

use crate::trace::compose::expect;
use crate::trace::{read_reply as read_trace_reply, Composer, Record, TraceOp};
use replay::Feed;

/// What a connection's engine is told once, for the whole run.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    pub protocol: Protocol,
    /// Closed loop: requests kept outstanding.
    pub pipeline: usize,
    /// No request starts (closed loop) or is scheduled (open loop) at or after this time.
    pub stop_issuing_ns: u64,
    /// Requests a connection sends before it is closed and re-opened.
    pub reconnect_interval: Option<u64>,
    /// Set a key after its GET missed.
    pub lookaside: bool,
    pub timestamps: TimestampMode,
}

/// A request sent and not yet answered.
#[derive(Debug)]
pub struct Pending {
    pub sent: Sent,
    /// The intended send time: the scheduled time (open loop), or just before the write
    /// that carries the request (closed loop).
    pub start_ns: u64,
    /// The offset of the request's last byte in the connection's stream.
    pub last_byte: u64,
    /// The offset of the last byte of the write that carried it (None until written).
    pub write_end: Option<u64>,
    /// The kernel's transmit stamp of that byte, once read from the error queue.
    pub transmitted: Stamp,
    /// A replayed request: the trace's operation, which says what its reply means.
    pub replayed: Option<TraceOp>,
    /// A lookaside SET: sent outside the stream's schedule, at once.
    pub extra: bool,
}

impl AwaitsTransmit for Pending {
    fn write_end(&self) -> Option<u64> {
        self.write_end
    }
    fn transmitted(&mut self) -> &mut Stamp {
        &mut self.transmitted
    }
}

/// Why a session ends, when nothing is left to do on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// Nothing more to send and nothing outstanding.
    Done,
    /// `--reconnect-interval` requests sent and answered: close and re-open.
    Recycle,
}

pub struct Engine {
    rules: Rules,
    gen: Generator,
    /// Requests left to send, when the run is bounded by count.
    budget: Option<u64>,
    /// Requests left on this session before it is re-opened.
    session_left: Option<u64>,
    schedule: Option<Schedule>,
    pending: VecDeque<Pending>,
    /// Keys whose GET missed, waiting for their lookaside SET.
    to_set: VecDeque<u64>,
    /// Bytes composed on this session (the transmit stamps' keys count them).
    composed: u64,
    /// Bytes written on this session.
    written: u64,
    /// The framing of the reply at the front of the read buffer, across reads.
    scan: Option<ReplyScan>,
    /// Replaying a trace instead of generating requests.
    replay: Option<Replay>,
}

/// A connection's share of a trace being replayed (see [`replay`]).
pub struct Replay {
    pub feed: Rc<RefCell<Feed>>,
    /// This connection's index among its thread's.
    pub conn: usize,
    /// Timed replay: trace time is divided by this; 0 (or a rate) ignores trace time.
    pub speed: f64,
    composer: Composer,
    /// The next record, read and not yet sent.
    next: Option<Record>,
}

impl Replay {
    pub fn new(feed: Rc<RefCell<Feed>>, conn: usize, speed: f64, protocol: Protocol) -> Replay {
        Replay {
            feed,
            conn,
            speed,
            composer: Composer::new(protocol),
            next: None,
        }
    }

    fn peek(&mut self) -> Option<&Record> {
        if self.next.is_none() {
            self.next = self.feed.borrow_mut().next_for(self.conn);
        }
        self.next.as_ref()
    }

    /// When the record of trace time `time_ns` is due in timed replay (`None` when
    /// trace time is not kept).
    fn due(&self, time_ns: u64) -> Option<u64> {
        (self.speed > 0.0).then(|| (time_ns as f64 / self.speed) as u64)
    }

    /// The next record's due time, if it has one; `Err` at the end of the trace.
    fn next_due(&mut self) -> Result<Option<u64>, ()> {
        let time = self.peek().ok_or(())?.time_ns;
        Ok(self.due(time))
    }
}

impl Engine {
    pub fn new(
        rules: Rules,
        gen: Generator,
        budget: Option<u64>,
        schedule: Option<Schedule>,
    ) -> Engine {
        Engine {
            rules,
            gen,
            budget,
            session_left: None,
            schedule,
            pending: VecDeque::new(),
            to_set: VecDeque::new(),
            composed: 0,
            written: 0,
            scan: None,
            replay: None,
        }
    }

    /// The engine of a connection that replays a trace instead of generating requests;
    /// `schedule` paces it (`--rate`) when trace time is not kept.
    pub fn replaying(mut self, replay: Replay) -> Engine {
        self.replay = Some(replay);
        self
    }

    /// A new socket: its stream offsets start again, and so does the session's count.
    pub fn start_session(&mut self) {
        self.session_left = self.rules.reconnect_interval;
        self.composed = 0;
        self.written = 0;
        self.scan = None;
    }

    /// Requests are sent at due times (a schedule, or a trace's own timing).
    pub fn is_open_loop(&self) -> bool {
        self.schedule.is_some() || self.replay.as_ref().is_some_and(|r| r.speed > 0.0)
    }

    pub fn pending(&self) -> &VecDeque<Pending> {
        &self.pending
    }

    pub fn pending_mut(&mut self) -> &mut VecDeque<Pending> {
        &mut self.pending
    }

    /// Bytes composed on this session.
    pub fn composed(&self) -> u64 {
        self.composed
    }

    /// When the oldest outstanding request started (for the reply timeout).
    pub fn waiting_since(&self) -> Option<u64> {
        self.pending.front().map(|p| p.start_ns)
    }

    /// When the newest outstanding request started (for the busy-poll ticker).
    pub fn newest_start(&self) -> Option<u64> {
        self.pending.back().map(|p| p.start_ns)
    }

    /// A lookaside SET waits and may go at `now`.
    fn lookaside_due(&self, now: u64) -> bool {
        !self.to_set.is_empty() && self.session_left != Some(0) && now < self.rules.stop_issuing_ns
    }

    fn may_send(&self) -> bool {
        self.budget != Some(0) && self.session_left != Some(0)
    }

    /// Whether the stream has requests left to start at `now`.
    pub fn more_to_issue(&mut self, now: u64) -> bool {
        if self.budget == Some(0) {
            return false;
        }
        if let Some(replay) = &mut self.replay {
            let stop = self.rules.stop_issuing_ns;
            let Ok(due) = replay.next_due() else {
                return false;
            };
            return match (due, &self.schedule) {
                (Some(due), _) => due < stop,
                (None, Some(schedule)) => schedule.peek() < stop,
                (None, None) => now < stop,
            };
        }
        match &self.schedule {
            Some(schedule) => schedule.peek() < self.rules.stop_issuing_ns,
            None => now < self.rules.stop_issuing_ns,
        }
    }

    /// Whether the session is over: `Some` once nothing is outstanding and nothing is
    /// left to send on it.
    pub fn idle(&mut self, now: u64) -> Option<Idle> {
        if !self.pending.is_empty() || self.lookaside_due(now) {
            return None;
        }
        if !self.more_to_issue(now) {
            Some(Idle::Done)
        } else if self.session_left == Some(0) {
            Some(Idle::Recycle)
        } else {
            None
        }
    }

    /// Open loop: when the next request is due, if the connection may send it (and is
    /// not waiting for the socket, `socket_full`, which the next send waits for instead).
    pub fn next_due(&mut self, socket_full: bool) -> Option<u64> {
        let due = match (&mut self.replay, &self.schedule) {
            (Some(replay), None) => replay.next_due().ok()??,
            (_, schedule) => schedule.as_ref()?.peek(),
        };
        (!socket_full && self.may_send() && due < self.rules.stop_issuing_ns).then_some(due)
    }

    /// Composes into `out` every request that may go at `now`, records them sent at the
    /// instant `write_ns()` gives (read just before the write that carries them), and
    /// returns how many. `out` must hold nothing unsent.
    pub fn issue(
        &mut self,
        now: u64,
        out: &mut Vec<u8>,
        recorder: &mut Recorder,
        write_ns: impl FnOnce() -> u64,
    ) -> usize {
        let first_new = self.pending.len();
        let open = self.schedule.is_some();
        loop {
            // A lookaside SET goes first, at once; in a closed loop it takes a slot.
            let room = open || self.pending.len() < self.rules.pipeline;
            if room && self.lookaside_due(now) {
                if let Some(key) = self.to_set.pop_front() {
                    let sent = self.compose(out, |gen, out| gen.compose_set_of(key, out));
                    self.count_sent(sent, recorder);
                    self.push(sent, now);
                    if let Some(p) = self.pending.back_mut() {
                        p.extra = true;
                    }
                    continue;
                }
            }
            if !self.may_send() {
                break;
            }
            if self.replay.is_some() {
                if !self.issue_replayed(now, out, recorder) {
                    break;
                }
                continue;
            }
            let start = match &mut self.schedule {
                None if self.pending.len() < self.rules.pipeline
                    && now < self.rules.stop_issuing_ns =>
                {
                    0
                }
                Some(schedule)
                    if schedule.peek() <= now && schedule.peek() < self.rules.stop_issuing_ns =>
                {
                    let due = schedule.advance(self.gen.rng());
                    recorder.scheduled(due);
                    due
                }
                _ => break,
            };
            let sent = self.compose(out, |gen, out| gen.compose(out));
            self.count_sent(sent, recorder);
            self.push(sent, start);
            self.budget = self.budget.map(|n| n - 1);
        }
        let new = self.pending.len() - first_new;
        if new == 0 {
            return 0;
        }
        let open = open || self.is_open_loop();
        // The closed loop's timer starts here, just before the write that carries them.
        let write_ns = write_ns();
        for p in self.pending.range_mut(first_new..) {
            if p.extra {
                p.start_ns = write_ns;
                recorder.sent_extra();
            } else if open {
                recorder.sent(write_ns, Some(write_ns.saturating_sub(p.start_ns)));
            } else {
                p.start_ns = write_ns;
                recorder.sent(write_ns, None);
            }
        }
        new
    }

    fn compose(
        &mut self,
        out: &mut Vec<u8>,
        how: impl FnOnce(&mut Generator, &mut Vec<u8>) -> Sent,
    ) -> Sent {
        let before = out.len();
        let sent = how(&mut self.gen, out);
        self.composed += (out.len() - before) as u64;
        sent
    }

    /// Counts what a generated request sent (its key, the sizes) for the report.
    fn count_sent(&self, sent: Sent, recorder: &mut Recorder) {
        let (key_len, value_len) = self.gen.last_sizes();
        recorder.sent_counts.record(sent.key, key_len, value_len);
    }

    fn push(&mut self, sent: Sent, start_ns: u64) {
        self.pending.push_back(Pending {
            sent,
            start_ns,
            last_byte: self.composed - 1,
            write_end: None,
            transmitted: Stamp::default(),
            replayed: None,
            extra: false,
        });
        self.session_left = self.session_left.map(|n| n - 1);
    }

    /// `n` more bytes went to the socket in one write: the requests whose last byte it
    /// holds were carried by it (its transmit stamp is theirs).
    pub fn wrote(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        self.written += n as u64;
        let end = self.written - 1;
        for p in self.pending.iter_mut().rev() {
            if p.write_end.is_some() {
                break;
            }
            if p.last_byte <= end {
                p.write_end = Some(end);
            }
        }
    }

    /// The length of the first reply in `buf` (the read buffer's unparsed bytes), if it
    /// is all there; it does not move the framing on.
    pub fn first_reply_len(&self, buf: &[u8]) -> Option<usize> {
        let front = self.pending.front()?;
        self.read(front, buf).ok().map(|(_, used)| used)
    }

    /// Takes every complete reply at the front of `buf`, in request order: records each
    /// with the instants `times` gives it and returns the bytes they took. A reply that
    /// cannot answer its request is an error (the connection is then broken).
    pub fn replies(
        &mut self,
        buf: &[u8],
        recorder: &mut Recorder,
        mut times: impl FnMut(&Pending) -> Times,
    ) -> Result<usize, ReplyError> {
        let mut offset = 0;
        while offset < buf.len() {
            let Some(front) = self.pending.front() else {
                return Err(ReplyError::Malformed("reply to no request"));
            };
            let rest = &buf[offset..];
            let expect = match front.replayed {
                Some(op) => replay_scan(self.rules.protocol, op),
                None => scan_expect(self.rules.protocol, front.sent.op),
            };
            let framed = match expect {
                Some(expect) => {
                    let scan = self.scan.get_or_insert_with(|| ReplyScan::new(expect));
                    match scan.advance(rest)? {
                        Some(len) => &rest[..len],
                        None => break,
                    }
                }
                None => rest,
            };
            let (outcome, used) = match self.read(front, framed) {
                Ok(read) => read,
                Err(ReplyError::Incomplete) => break,
                Err(e) => return Err(e),
            };
            self.scan = None;
            let front = self.pending.pop_front().expect("a request to answer");
            recorder.answered(
                front.sent.op,
                &times(&front),
                self.rules.timestamps,
                outcome,
            );
            self.after_reply(front.sent, outcome);
            offset += used;
        }
        Ok(offset)
    }

    fn read(&self, request: &Pending, buf: &[u8]) -> Result<(Outcome, usize), ReplyError> {
        match request.replayed {
            Some(op) => read_trace_reply(self.rules.protocol, op, buf),
            None => read_reply(self.rules.protocol, request.sent, buf),
        }
    }

    /// The lookaside rule: a single-key GET that missed sets its key.
    fn after_reply(&mut self, sent: Sent, outcome: Outcome) {
        if self.rules.lookaside && sent.op == Op::Get && outcome.misses == 1 && !outcome.error {
            self.to_set.push_back(sent.key);
        }
    }

    /// The connection broke or timed out at `now`: what is outstanding failed.
    pub fn fail_outstanding(&mut self, now: u64, timed_out: bool, recorder: &mut Recorder) {
        for p in self.pending.drain(..) {
            recorder.failed(p.sent.op, now, timed_out);
        }
        self.scan = None;
    }

    /// Open loop, at the end: requests still due that the connection could not send (its
    /// server was gone) count as scheduled, so the shortfall shows in the report.
    pub fn account_unsent(&mut self, recorder: &mut Recorder) {
        if self.replay.is_some() {
            return self.account_unsent_records(recorder);
        }
        let Some(schedule) = &mut self.schedule else {
            return;
        };
        while self.budget != Some(0) && schedule.peek() < self.rules.stop_issuing_ns {
            recorder.scheduled(schedule.advance(self.gen.rng()));
            self.budget = self.budget.map(|n| n - 1);
        }
    }
}

/// How the reply to a replayed `op` is framed (binary replies carry their length).
fn replay_scan(protocol: Protocol, op: TraceOp) -> Option<Expect> {
    match protocol {
        Protocol::MemcacheText => Some(expect(op)),
        Protocol::Redis => Some(Expect::Resp),
        Protocol::MemcacheBinary => None,
    }
}

/// How a reply to `op` is framed across reads (binary replies carry their length).
fn scan_expect(protocol: Protocol, op: Op) -> Option<Expect> {
    match (protocol, op) {
        (Protocol::MemcacheText, Op::Set) => Some(Expect::Store),
        (Protocol::MemcacheText, _) => Some(Expect::Values),
        (Protocol::Redis, _) => Some(Expect::Resp),
        (Protocol::MemcacheBinary, _) => None,
    }
}
