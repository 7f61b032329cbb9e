//! One client connection: composes requests, writes them in batches, parses replies in
//! order and records each one. Closed loop keeps `--pipeline` requests outstanding; open
//! loop sends each request at its scheduled time whatever is outstanding. A broken
//! connection counts its outstanding requests as errors and is re-opened. With
//! `--reconnect-interval N` a connection sends N requests, waits for their answers, closes
//! and re-opens (memtier's `shard_connection::process_response` and
//! `client::hold_pipeline`: no request is outstanding when it closes).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::time::Duration;

use cachelab_protocol::ReplyError;
use tokio::io::Interest;
use tokio::sync::Notify;

use super::clock::{realtime_offset_ns, Clock};
use super::link::{Link, OpenError, Target};
use super::stamping;
use super::ticker::Ticker;
use crate::config::Protocol;
use crate::record::Recorder;
use crate::schedule::Schedule;
use crate::stamps::{assign_transmit, unwrap_key, wire_ns, AwaitsTransmit, Stamp};
use crate::timing::{Times, TimestampMode, Wire};
use crate::workload::{read_reply, Generator, Sent};

/// Read buffer size to start with; it grows for large multi-get replies.
const READ_BUFFER: usize = 64 * 1024;
/// Free space kept before each read, so a read is never tiny.
const MIN_READ_SPACE: usize = 16 * 1024;
/// Writes whose transmit stamps may wait on the error queue before it is drained. The
/// queue is charged to the socket's receive buffer: left to grow (a server that stalls
/// while requests go on being sent) it would shrink the window the server may send in.
const STAMPS_QUEUED_MAX: u32 = 16;
/// Reconnection backoff: first wait and cap.
const BACKOFF_FIRST: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// What a thread's connections share (one thread, so `Rc`/`RefCell`, no locks).
pub struct Shared {
    pub clock: Clock,
    pub recorder: RefCell<Recorder>,
    pub protocol: Protocol,
    pub target: Target,
    pub pipeline: usize,
    /// No request starts (closed loop) or is scheduled (open loop) at or after this time.
    pub stop_issuing_ns: u64,
    pub connect_timeout: Duration,
    /// Runs bounded only by count give up reconnecting after this long.
    pub reply_timeout: Duration,
    /// Requests a connection sends before it is closed and re-opened.
    pub reconnect_interval: Option<u64>,
    /// Open loop: the thread's one timer, which wakes each connection when it is due; with
    /// `--busy-poll-us` (either loop) it also spins while replies are awaited.
    pub ticker: Option<Ticker>,
    /// `--timestamps`: kernel timestamps are switched on for every connection.
    pub timestamps: TimestampMode,
}

/// Why the watchdog interrupted a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kill {
    /// The oldest outstanding request has waited longer than `--reply-timeout`.
    ReplyTimeout,
    /// The run's hard deadline passed: give up on what is outstanding and stop.
    Deadline,
}

/// The watchdog's view of a connection and its way to interrupt it.
#[derive(Default)]
pub struct Watch {
    /// Start time of the oldest outstanding request, or `None` when nothing waits.
    pub waiting_since: Cell<Option<u64>>,
    pub kill: Notify,
    pub reason: Cell<Option<Kill>>,
}

impl Watch {
    pub fn interrupt(&self, reason: Kill) {
        self.reason.set(Some(reason));
        self.kill.notify_one();
    }
}

struct Pending {
    sent: Sent,
    /// The intended send time: the scheduled time (open loop), or just before the write
    /// that carries the request (closed loop).
    start_ns: u64,
    /// The offset of the request's last byte in the connection's stream.
    last_byte: u64,
    /// The offset of the last byte of the write that carried it (None until written).
    write_end: Option<u64>,
    /// The kernel's transmit stamp of that byte, once read from the error queue.
    transmitted: Stamp,
}

impl AwaitsTransmit for Pending {
    fn write_end(&self) -> Option<u64> {
        self.write_end
    }
    fn transmitted(&mut self) -> &mut Stamp {
        &mut self.transmitted
    }
}

enum End {
    /// Nothing more to send and nothing outstanding.
    Done,
    /// Reset, closed by the server, unreadable reply, or failed write.
    Broken,
    /// `--reconnect-interval` requests sent and answered: close and re-open.
    Recycle,
    Killed(Kill),
}

pub struct Connection {
    gen: Generator,
    /// Requests left to send, when the run is bounded by count.
    budget: Option<u64>,
    /// Requests left to send on this connection before it is re-opened
    /// (`--reconnect-interval`).
    session_left: Option<u64>,
    schedule: Option<Schedule>,
    /// This connection's slot in the thread's ticker.
    slot: usize,
    pending: VecDeque<Pending>,
    /// Bytes composed on this session's socket (the transmit stamps' keys count them).
    composed: u64,
    /// Bytes written on this session's socket.
    written_total: u64,
    /// The kernel stamps this session's socket.
    stamping: bool,
    /// This session's socket.
    fd: RawFd,
    /// Writes since the error queue was last drained.
    stamps_queued: u32,
    wbuf: Vec<u8>,
    written: usize,
    rbuf: Vec<u8>,
    rstart: usize,
    rend: usize,
    pub watch: Rc<Watch>,
}

impl Connection {
    /// `slot` numbers the connection within its thread, from 0.
    pub fn new(
        gen: Generator,
        budget: Option<u64>,
        schedule: Option<Schedule>,
        slot: usize,
    ) -> Connection {
        Connection {
            gen,
            budget,
            session_left: None,
            schedule,
            slot,
            pending: VecDeque::new(),
            composed: 0,
            written_total: 0,
            stamping: false,
            fd: -1,
            stamps_queued: 0,
            wbuf: Vec::with_capacity(4096),
            written: 0,
            rbuf: vec![0; READ_BUFFER],
            rstart: 0,
            rend: 0,
            watch: Rc::new(Watch::default()),
        }
    }

    /// Drives the connection until its requests are done or the run's time is up.
    pub async fn run(mut self, shared: Rc<Shared>, first: Link) {
        let mut stream = Some(first);
        loop {
            let Some(s) = stream.take() else { break };
            let end = self.session(&shared, s).await;
            let now = shared.clock.now();
            let timed_out = matches!(end, End::Killed(_));
            {
                let mut recorder = shared.recorder.borrow_mut();
                for p in self.pending.drain(..) {
                    recorder.failed(p.sent.op, now, timed_out);
                }
                if matches!(end, End::Broken) {
                    recorder.connection_error();
                }
            }
            self.watch.waiting_since.set(None);
            match end {
                End::Done | End::Killed(Kill::Deadline) => break,
                End::Broken | End::Recycle | End::Killed(Kill::ReplyTimeout) => {
                    stream = self.reconnect(&shared).await
                }
            }
        }
        self.account_unsent(&shared);
    }

    /// Open loop: requests still due before the end that the connection could not send
    /// (its server was gone) count as scheduled, so the shortfall shows in the report.
    fn account_unsent(&mut self, shared: &Shared) {
        let Some(schedule) = &mut self.schedule else {
            return;
        };
        let mut recorder = shared.recorder.borrow_mut();
        while self.budget != Some(0) && schedule.peek() < shared.stop_issuing_ns {
            recorder.scheduled(schedule.advance(self.gen.rng()));
            self.budget = self.budget.map(|n| n - 1);
        }
    }

    fn more_to_issue(&self, shared: &Shared, now: u64) -> bool {
        if self.budget == Some(0) {
            return false;
        }
        match &self.schedule {
            Some(schedule) => schedule.peek() < shared.stop_issuing_ns,
            None => now < shared.stop_issuing_ns,
        }
    }

    async fn reconnect(&mut self, shared: &Shared) -> Option<Link> {
        let give_up = shared.clock.now() + shared.reply_timeout.as_nanos() as u64;
        let mut backoff = BACKOFF_FIRST;
        loop {
            let now = shared.clock.now();
            if !self.more_to_issue(shared, now) || now >= give_up {
                return None;
            }
            // Never wait past the end of the run: --test-time is always honoured.
            let left = Duration::from_nanos(shared.stop_issuing_ns.min(give_up) - now);
            match Link::open(&shared.target, shared.connect_timeout.min(left)).await {
                Ok((link, times)) => {
                    opened(&mut shared.recorder.borrow_mut(), &link, times);
                    return Some(link);
                }
                Err(error) => {
                    let mut recorder = shared.recorder.borrow_mut();
                    if matches!(error, OpenError::Handshake(_)) {
                        recorder.setup.handshake_failed();
                    }
                    recorder.connection_error();
                }
            }
            tokio::time::sleep(backoff.min(left)).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    /// Composes every request that may go now into the write buffer and records it sent.
    fn issue(&mut self, shared: &Shared, now: u64) {
        // Compose only when everything composed before has gone to the kernel: a request
        // counts as sent (and its send lag stops) when it is handed to the socket, so one
        // that must wait for a full socket to drain waits in the schedule, not in our buffer.
        if self.written < self.wbuf.len() {
            return;
        }
        let first_new = self.pending.len();
        match &mut self.schedule {
            None => {
                while self.pending.len() < shared.pipeline
                    && self.budget != Some(0)
                    && self.session_left != Some(0)
                    && now < shared.stop_issuing_ns
                {
                    let before = self.wbuf.len();
                    let sent = self.gen.compose(&mut self.wbuf);
                    self.composed += (self.wbuf.len() - before) as u64;
                    self.pending.push_back(Pending {
                        sent,
                        start_ns: 0,
                        last_byte: self.composed - 1,
                        write_end: None,
                        transmitted: Stamp::default(),
                    });
                    self.budget = self.budget.map(|n| n - 1);
                    self.session_left = self.session_left.map(|n| n - 1);
                }
            }
            Some(schedule) => {
                while self.budget != Some(0)
                    && self.session_left != Some(0)
                    && schedule.peek() <= now
                    && schedule.peek() < shared.stop_issuing_ns
                {
                    let due = schedule.advance(self.gen.rng());
                    shared.recorder.borrow_mut().scheduled(due);
                    let before = self.wbuf.len();
                    let sent = self.gen.compose(&mut self.wbuf);
                    self.composed += (self.wbuf.len() - before) as u64;
                    self.pending.push_back(Pending {
                        sent,
                        start_ns: due,
                        last_byte: self.composed - 1,
                        write_end: None,
                        transmitted: Stamp::default(),
                    });
                    self.budget = self.budget.map(|n| n - 1);
                    self.session_left = self.session_left.map(|n| n - 1);
                }
            }
        }
        if self.pending.len() == first_new {
            return;
        }
        // The closed-loop timer starts here, just before the write that carries the batch.
        let write_ns = shared.clock.now();
        let open = self.schedule.is_some();
        let mut recorder = shared.recorder.borrow_mut();
        for p in self.pending.range_mut(first_new..) {
            if open {
                recorder.sent(write_ns, Some(write_ns.saturating_sub(p.start_ns)));
            } else {
                p.start_ns = write_ns;
                recorder.sent(write_ns, None);
            }
        }
    }

    /// `n` more bytes went to the socket in one write: the requests whose last byte they
    /// hold were carried by it (its transmit stamp is theirs).
    fn wrote(&mut self, n: usize) {
        self.written += n;
        if n == 0 {
            return;
        }
        self.written_total += n as u64;
        let end = self.written_total - 1;
        for p in self.pending.iter_mut().rev() {
            if p.write_end.is_some() {
                break;
            }
            if p.last_byte <= end {
                p.write_end = Some(end);
            }
        }
        if self.stamping {
            self.stamps_queued += 1;
            if self.stamps_queued >= STAMPS_QUEUED_MAX {
                self.drain_transmit_stamps();
            }
        }
    }

    /// Reads the transmit stamps queued on the error queue and gives each to the requests
    /// its write carried.
    fn drain_transmit_stamps(&mut self) {
        let last = self.composed.saturating_sub(1);
        let pending = &mut self.pending;
        stamping::drain_transmit_stamps(self.fd, |key, stamp| {
            assign_transmit(pending.iter_mut(), unwrap_key(key, last), stamp);
        });
        self.stamps_queued = 0;
    }

    /// Switches kernel timestamps on for a new socket, before anything is written on it:
    /// a plain TCP socket only (see [`Link::unstampable`] for the others).
    fn start_stamping(&mut self, shared: &Shared, link: &Link) {
        self.composed = 0;
        self.written_total = 0;
        self.stamping = false;
        self.fd = link.plain_tcp().map_or(-1, AsRawFd::as_raw_fd);
        self.stamps_queued = 0;
        if shared.timestamps == TimestampMode::Kernel {
            let refused = match link.unstampable() {
                Some(why) => Some(why.to_string()),
                None => stamping::enable(self.fd)
                    .err()
                    .map(|e| format!("SO_TIMESTAMPING: {e}")),
            };
            self.stamping = refused.is_none();
            shared
                .recorder
                .borrow_mut()
                .timing
                .connection(refused.as_deref());
        }
    }

    async fn session(&mut self, shared: &Shared, mut link: Link) -> End {
        self.start_stamping(shared, &link);
        let fd = self.fd;
        self.wbuf.clear();
        self.written = 0;
        self.rstart = 0;
        self.rend = 0;
        self.session_left = shared.reconnect_interval;
        loop {
            let now = shared.clock.now();
            // With TLS, encrypted bytes still waiting for the socket hold back new
            // requests as unwritten plain bytes do (see `issue`).
            if !link.wants_flush() {
                self.issue(shared, now);
            }
            if self.send(&mut link).is_err() {
                return End::Broken;
            }
            if self.pending.is_empty() && !self.more_to_issue(shared, now) {
                return End::Done;
            }
            if self.pending.is_empty() && self.session_left == Some(0) {
                return End::Recycle;
            }
            self.watch
                .waiting_since
                .set(self.pending.front().map(|p| p.start_ns));
            let want_write = self.written < self.wbuf.len() || link.wants_flush();
            // While the socket is full the next send waits for it, not for the clock.
            let due = match &self.schedule {
                Some(schedule)
                    if !want_write
                        && self.budget != Some(0)
                        && self.session_left != Some(0)
                        && schedule.peek() < shared.stop_issuing_ns =>
                {
                    Some(schedule.peek())
                }
                _ => None,
            };
            if self.rbuf.len() - self.rend < MIN_READ_SPACE {
                self.make_read_space();
            }
            let ticker = shared.ticker.as_ref();
            let slot = self.slot;
            if let Some(ticker) = ticker {
                ticker.awaiting_reply(slot, self.pending.back().map(|p| p.start_ns));
            }
            tokio::select! {
                biased;
                _ = self.watch.kill.notified() => {
                    if let Some(kill) = self.watch.reason.take() {
                        if kill == Kill::Deadline || !self.pending.is_empty() {
                            return End::Killed(kill);
                        }
                    }
                }
                ready = link.readable() => {
                    if ready.is_err() {
                        return End::Broken;
                    }
                    let read = match link.plain_tcp() {
                        Some(tcp) if self.stamping => {
                            let protocol = shared.protocol;
                            tcp.try_io(Interest::READABLE, || self.read_stamped(protocol, fd))
                        }
                        _ => link.try_recv(&mut self.rbuf[self.rend..]).map(|n| (n, Stamp::default())),
                    };
                    match read {
                        Ok((0, _)) => return End::Broken,
                        Ok((n, received)) => {
                            self.rend += n;
                            if self.parse_replies(shared, received).is_err() {
                                return End::Broken;
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(_) => return End::Broken,
                    }
                },
                ready = link.writable(), if want_write => {
                    if ready.is_err() || self.send(&mut link).is_err() {
                        return End::Broken;
                    }
                },
                _ = async {
                    ticker.expect("an open loop has a ticker").until(slot, due.unwrap_or(0)).await
                }, if due.is_some() => {}
            }
        }
    }

    /// Hands the write buffer's unsent bytes (and, with TLS, encrypted bytes waiting) to
    /// the socket, as far as it takes them without blocking.
    fn send(&mut self, link: &mut Link) -> io::Result<()> {
        if self.written < self.wbuf.len() {
            match link.try_send(&self.wbuf[self.written..]) {
                Ok(n) => self.wrote(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            if self.written == self.wbuf.len() {
                self.wbuf.clear();
                self.written = 0;
            }
        } else {
            link.flush()?;
        }
        Ok(())
    }

    /// Reads with the kernel's receive stamp. A read's stamp is that of the last segment
    /// it took bytes from, so when a second reply may be queued behind the first (more
    /// than one request outstanding), the queued bytes are peeked at and only the first
    /// reply is read: its stamp is then its own, not a later reply's.
    fn read_stamped(&mut self, protocol: Protocol, fd: RawFd) -> io::Result<(usize, Stamp)> {
        let mut want = self.rbuf.len() - self.rend;
        if self.pending.len() > 1 {
            let front = self.pending.front().expect("pending").sent;
            let (peeked, _) = stamping::peek(fd, &mut self.rbuf[self.rend..])?;
            if let Ok((_, used)) =
                read_reply(protocol, front, &self.rbuf[self.rstart..self.rend + peeked])
            {
                // rstart..rend holds only an incomplete reply: the first reply ends in
                // the peeked bytes.
                want = (self.rstart + used).saturating_sub(self.rend).max(1);
            }
        }
        stamping::recv(fd, &mut self.rbuf[self.rend..self.rend + want])
    }

    /// Parses every complete reply in the read buffer, in request order. `received` is
    /// the kernel's stamp of the read that brought the last bytes.
    fn parse_replies(&mut self, shared: &Shared, received: Stamp) -> Result<(), ReplyError> {
        // Every reply in this read arrived together: one clock reading serves them all.
        let done_ns = shared.clock.now();
        let mut offset = 0;
        let mut received_ns = None;
        if self.stamping {
            // The transmit stamps of the requests answered here are on the error queue
            // (queued when their segments went to the device, before any answer).
            if self.stamps_queued > 0 {
                self.drain_transmit_stamps();
            }
            offset = realtime_offset_ns();
            received_ns = received
                .software_ns
                .map(|ns| shared.clock.at_realtime(ns, offset));
        }
        let mut recorder = shared.recorder.borrow_mut();
        while self.rstart < self.rend {
            let Some(front) = self.pending.front() else {
                return Err(ReplyError::Malformed("reply to no request"));
            };
            match read_reply(
                shared.protocol,
                front.sent,
                &self.rbuf[self.rstart..self.rend],
            ) {
                Ok((outcome, used)) => {
                    let times = Times {
                        intended_ns: front.start_ns,
                        transmitted_ns: front
                            .transmitted
                            .software_ns
                            .map(|ns| shared.clock.at_realtime(ns, offset)),
                        received_ns,
                        wire: wire_ns(front.transmitted, received)
                            .map(|(ns, hardware)| Wire { ns, hardware }),
                        read_ns: done_ns,
                    };
                    recorder.answered(front.sent.op, &times, shared.timestamps, outcome);
                    self.pending.pop_front();
                    self.rstart += used;
                }
                Err(ReplyError::Incomplete) => break,
                Err(e) => return Err(e),
            }
        }
        if self.rstart == self.rend {
            self.rstart = 0;
            self.rend = 0;
        }
        Ok(())
    }

    fn make_read_space(&mut self) {
        if self.rstart > 0 {
            self.rbuf.copy_within(self.rstart..self.rend, 0);
            self.rend -= self.rstart;
            self.rstart = 0;
        }
        if self.rbuf.len() - self.rend < MIN_READ_SPACE {
            let grown = self.rbuf.len() * 2;
            self.rbuf.resize(grown, 0);
        }
    }
}

/// Records a new connection's set-up (and what its TLS handshake agreed on).
pub fn opened(recorder: &mut Recorder, link: &Link, times: crate::setup::SetupTimes) {
    recorder.setup.opened(times);
    let (version, suite) = link.negotiated();
    recorder.setup.negotiated(version, suite);
}
