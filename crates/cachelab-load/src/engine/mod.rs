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
//!   open loop counts what it could not send as scheduled, so the shortfall shows;
//! - **sharding** (`--shard`): each request goes to its key's server, placed as
//!   twemproxy places it ([`Placement`]), on that server's lane ([`lane`]); the
//!   pipeline counts what is outstanding on every lane, and each lane's replies come
//!   back in its own order.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use cachelab_placement::Placement;
use cachelab_protocol::{Expect, ReplyError, ReplyScan};
use rand::RngExt;

use crate::config::Protocol;
use crate::record::Recorder;
use crate::schedule::Schedule;
use crate::stamps::{AwaitsTransmit, Stamp};
use crate::timing::{Times, TimestampMode};
use crate::workload::{read_reply, Generator, Op, Outcome, Sent};

mod lane;
pub mod replay;
#[cfg(test)]
mod replay_tests;
#[cfg(test)]
mod shard_tests;
#[cfg(test)]
mod tests;

use crate::trace::compose::expect;
use crate::trace::{read_reply as read_trace_reply, Composer, Record, TraceOp};
use lane::Lane;
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
    /// One per server: a single one unless sharded.
    lanes: Vec<Lane>,
    /// Requests outstanding on every lane together.
    outstanding: usize,
    /// Keys whose GET missed, waiting for their lookaside SET.
    to_set: VecDeque<u64>,
    /// Replaying a trace instead of generating requests.
    replay: Option<Replay>,
    /// Sharded: where each key lives.
    placement: Option<Rc<Placement>>,
    /// Sharded: a request is composed here, then moved to its key's lane.
    scratch: Vec<u8>,
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
            lanes: vec![Lane::default()],
            outstanding: 0,
            to_set: VecDeque::new(),
            replay: None,
            placement: None,
            scratch: Vec::new(),
        }
    }

    /// The engine of a connection to every server of a pool, one lane each, sending each
    /// request to its key's server.
    pub fn sharded(mut self, placement: Rc<Placement>) -> Engine {
        self.lanes = (0..placement.servers()).map(|_| Lane::default()).collect();
        self.placement = Some(placement);
        self
    }

    /// How many servers (lanes) the connection sends to.
    pub fn lanes(&self) -> usize {
        self.lanes.len()
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
        self.lanes.iter_mut().for_each(Lane::restart);
    }

    /// Requests are sent at due times (a schedule, or a trace's own timing).
    pub fn is_open_loop(&self) -> bool {
        self.schedule.is_some() || self.replay.as_ref().is_some_and(|r| r.speed > 0.0)
    }

    /// The requests outstanding on `lane`, oldest first.
    pub fn pending_on(&self, lane: usize) -> &VecDeque<Pending> {
        &self.lanes[lane].pending
    }

    pub fn pending_on_mut(&mut self, lane: usize) -> &mut VecDeque<Pending> {
        &mut self.lanes[lane].pending
    }

    /// Requests outstanding on every lane.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// Bytes composed for `lane` on this session.
    pub fn composed(&self, lane: usize) -> u64 {
        self.lanes[lane].composed
    }

    /// When the oldest outstanding request started (for the reply timeout).
    pub fn waiting_since(&self) -> Option<u64> {
        self.lanes
            .iter()
            .filter_map(|l| l.pending.front().map(|p| p.start_ns))
            .min()
    }

    /// When the newest outstanding request started (for the busy-poll ticker).
    pub fn newest_start(&self) -> Option<u64> {
        self.lanes
            .iter()
            .filter_map(|l| l.pending.back().map(|p| p.start_ns))
            .max()
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
        if self.outstanding > 0 || self.lookaside_due(now) {
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

    /// Composes into `outs` (one buffer per lane) every request that may go at `now`,
    /// records them sent at the instant `write_ns()` gives (read just before the writes
    /// that carry them), and returns how many. `outs` must hold nothing unsent.
    pub fn issue_lanes(
        &mut self,
        now: u64,
        outs: &mut [Vec<u8>],
        recorder: &mut Recorder,
        write_ns: impl FnOnce() -> u64,
    ) -> usize {
        for lane in &mut self.lanes {
            lane.fresh_from = lane.pending.len();
        }
        let first_outstanding = self.outstanding;
        let open = self.schedule.is_some();
        loop {
            // A lookaside SET goes first, at once; in a closed loop it takes a slot.
            let room = open || self.outstanding < self.rules.pipeline;
            if room && self.lookaside_due(now) {
                if let Some(key) = self.to_set.pop_front() {
                    let (lane, sent) = self.compose(outs, |gen, out| gen.compose_set_of(key, out));
                    self.count_sent(sent, recorder);
                    self.push(lane, sent, now);
                    if let Some(p) = self.lanes[lane].pending.back_mut() {
                        p.extra = true;
                    }
                    continue;
                }
            }
            if !self.may_send() {
                break;
            }
            if self.replay.is_some() {
                if !self.issue_replayed(now, outs, recorder) {
                    break;
                }
                continue;
            }
            let start = match &mut self.schedule {
                None if self.outstanding < self.rules.pipeline
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
            let (lane, sent) = self.compose(outs, |gen, out| gen.compose(out));
            self.count_sent(sent, recorder);
            self.push(lane, sent, start);
            self.budget = self.budget.map(|n| n - 1);
        }
        let new = self.outstanding - first_outstanding;
        if new == 0 {
            return 0;
        }
        let open = open || self.is_open_loop();
        // The closed loop's timer starts here, just before the write that carries them.
        let write_ns = write_ns();
        let sharded = self.placement.is_some();
        for (index, lane) in self.lanes.iter_mut().enumerate() {
            for p in lane.pending.range_mut(lane.fresh_from..) {
                if sharded {
                    recorder.servers.sent(index);
                }
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
        }
        new
    }

    /// Composes a generated request into its lane's buffer and returns the lane.
    fn compose(
        &mut self,
        outs: &mut [Vec<u8>],
        how: impl FnOnce(&mut Generator, &mut Vec<u8>) -> Sent,
    ) -> (usize, Sent) {
        if self.placement.is_none() {
            let before = outs[0].len();
            let sent = how(&mut self.gen, &mut outs[0]);
            self.lanes[0].composed += (outs[0].len() - before) as u64;
            return (0, sent);
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let sent = how(&mut self.gen, &mut scratch);
        let (key, rng) = self.gen.last_key_and_rng();
        let lane = home(self.placement.as_deref(), key, rng);
        outs[lane].extend_from_slice(&scratch);
        self.lanes[lane].composed += scratch.len() as u64;
        self.scratch = scratch;
        (lane, sent)
    }

    /// Counts what a generated request sent (its key, the sizes) for the report.
    fn count_sent(&self, sent: Sent, recorder: &mut Recorder) {
        let (key_len, value_len) = self.gen.last_sizes();
        recorder.sent_counts.record(sent.key, key_len, value_len);
    }

    fn push(&mut self, lane: usize, sent: Sent, start_ns: u64) {
        let lane = &mut self.lanes[lane];
        lane.pending.push_back(Pending {
            sent,
            start_ns,
            last_byte: lane.composed - 1,
            write_end: None,
            transmitted: Stamp::default(),
            replayed: None,
            extra: false,
        });
        self.outstanding += 1;
        self.session_left = self.session_left.map(|n| n - 1);
    }

    /// `n` more bytes went to `lane`'s socket in one write.
    pub fn wrote_on(&mut self, lane: usize, n: usize) {
        self.lanes[lane].wrote(n);
    }

    /// The length of the first reply in `buf` (the read buffer's unparsed bytes), if it
    /// is all there; it does not move the framing on.
    pub fn first_reply_len_on(&self, lane: usize, buf: &[u8]) -> Option<usize> {
        let front = self.lanes[lane].pending.front()?;
        read_one(self.rules.protocol, front, buf)
            .ok()
            .map(|(_, used)| used)
    }

    /// Takes every complete reply at the front of `buf` (read from `lane`'s socket), in
    /// request order: records each with the instants `times` gives it and returns the
    /// bytes they took. A reply that cannot answer its request is an error (the
    /// connection is then broken).
    pub fn replies_on(
        &mut self,
        lane: usize,
        buf: &[u8],
        recorder: &mut Recorder,
        mut times: impl FnMut(&Pending) -> Times,
    ) -> Result<usize, ReplyError> {
        let mut offset = 0;
        let protocol = self.rules.protocol;
        while offset < buf.len() {
            let state = &mut self.lanes[lane];
            let Some(front) = state.pending.front() else {
                return Err(ReplyError::Malformed("reply to no request"));
            };
            let rest = &buf[offset..];
            let expect = match front.replayed {
                Some(op) => replay_scan(protocol, op),
                None => scan_expect(protocol, front.sent.op),
            };
            let framed = match expect {
                Some(expect) => {
                    let scan = state.scan.get_or_insert_with(|| ReplyScan::new(expect));
                    match scan.advance(rest)? {
                        Some(len) => &rest[..len],
                        None => break,
                    }
                }
                None => rest,
            };
            let (outcome, used) = match read_one(protocol, front, framed) {
                Ok(read) => read,
                Err(ReplyError::Incomplete) => break,
                Err(e) => return Err(e),
            };
            let lane_state = &mut self.lanes[lane];
            lane_state.scan = None;
            let front = lane_state.pending.pop_front().expect("a request to answer");
            self.outstanding -= 1;
            let times = times(&front);
            recorder.answered(front.sent.op, &times, self.rules.timestamps, outcome);
            if self.placement.is_some() {
                let end = times.latency_end(self.rules.timestamps);
                recorder
                    .servers
                    .answered(lane, times.intended_ns, end, outcome);
            }
            self.after_reply(front.sent, outcome);
            offset += used;
        }
        Ok(offset)
    }

    /// The lookaside rule: a single-key GET that missed sets its key.
    fn after_reply(&mut self, sent: Sent, outcome: Outcome) {
        if self.rules.lookaside && sent.op == Op::Get && outcome.misses == 1 && !outcome.error {
            self.to_set.push_back(sent.key);
        }
    }

    /// The connection broke or timed out at `now`: what is outstanding failed.
    pub fn fail_outstanding(&mut self, now: u64, timed_out: bool, recorder: &mut Recorder) {
        let sharded = self.placement.is_some();
        for (index, lane) in self.lanes.iter_mut().enumerate() {
            for p in lane.pending.drain(..) {
                recorder.failed(p.sent.op, now, timed_out);
                if sharded {
                    recorder.servers.failed(index, now);
                }
            }
            lane.scan = None;
        }
        self.outstanding = 0;
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

/// The lane of a request whose key is `key`: its server's, or the one lane unsharded;
/// `rng` draws for the `random` distribution.
fn home(placement: Option<&Placement>, key: &[u8], rng: &mut impl rand::Rng) -> usize {
    placement.map_or(0, |p| p.home(key, || rng.random()))
}

/// Reads the reply to `request` at the front of `buf`: what it said and its length.
fn read_one(
    protocol: Protocol,
    request: &Pending,
    buf: &[u8],
) -> Result<(Outcome, usize), ReplyError> {
    match request.replayed {
        Some(op) => read_trace_reply(protocol, op, buf),
        None => read_reply(protocol, request.sent, buf),
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
