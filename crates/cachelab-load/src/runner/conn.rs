//! One client connection's I/O: it owns the socket, the buffers and the kernel's
//! timestamps, and asks the connection's [`Engine`] what to send and what each reply
//! means. A broken connection counts its outstanding requests as errors and is re-opened
//! with a back-off. With `--reconnect-interval N` a connection sends N requests, waits
//! for their answers, closes and re-opens (memtier's `shard_connection::process_response`
//! and `client::hold_pipeline`: no request is outstanding when it closes).

use std::cell::{Cell, RefCell};
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
use crate::engine::{Engine, Idle, Pending, Rules};
use crate::record::Recorder;
use crate::stamps::{assign_transmit, unwrap_key, wire_ns, Stamp};
use crate::timing::{Times, TimestampMode, Wire};

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
    pub rules: Rules,
    pub target: Target,
    pub connect_timeout: Duration,
    /// Runs bounded only by count give up reconnecting after this long.
    pub reply_timeout: Duration,
    /// Open loop: the thread's one timer, which wakes each connection when it is due; with
    /// `--busy-poll-us` (either loop) it also spins while replies are awaited.
    pub ticker: Option<Ticker>,
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
    engine: Engine,
    /// This connection's slot in the thread's ticker.
    slot: usize,
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
    pub fn new(engine: Engine, slot: usize) -> Connection {
        Connection {
            engine,
            slot,
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
            {
                let mut recorder = shared.recorder.borrow_mut();
                let timed_out = matches!(end, End::Killed(_));
                self.engine.fail_outstanding(now, timed_out, &mut recorder);
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
        self.engine
            .account_unsent(&mut shared.recorder.borrow_mut());
    }

    async fn reconnect(&mut self, shared: &Shared) -> Option<Link> {
        let give_up = shared.clock.now() + shared.reply_timeout.as_nanos() as u64;
        let mut backoff = BACKOFF_FIRST;
        loop {
            let now = shared.clock.now();
            if !self.engine.more_to_issue(now) || now >= give_up {
                return None;
            }
            // Never wait past the end of the run: --test-time is always honoured.
            let left = Duration::from_nanos(shared.rules.stop_issuing_ns.min(give_up) - now);
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
        // that must wait for a full socket to drain waits in the schedule, not in our
        // buffer; and the requests composed together leave in one write.
        if self.written < self.wbuf.len() {
            return;
        }
        let mut recorder = shared.recorder.borrow_mut();
        self.engine
            .issue(now, &mut self.wbuf, &mut recorder, || shared.clock.now());
    }

    /// `n` more bytes went to the socket in one write.
    fn wrote(&mut self, n: usize) {
        self.written += n;
        if n == 0 {
            return;
        }
        self.engine.wrote(n);
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
        let last = self.engine.composed().saturating_sub(1);
        let pending = self.engine.pending_mut();
        stamping::drain_transmit_stamps(self.fd, |key, stamp| {
            assign_transmit(pending.iter_mut(), unwrap_key(key, last), stamp);
        });
        self.stamps_queued = 0;
    }

    /// Switches kernel timestamps on for a new socket, before anything is written on it:
    /// a plain TCP socket only (see [`Link::unstampable`] for the others).
    fn start_stamping(&mut self, shared: &Shared, link: &Link) {
        self.stamping = false;
        self.fd = link.plain_tcp().map_or(-1, AsRawFd::as_raw_fd);
        self.stamps_queued = 0;
        if shared.rules.timestamps == TimestampMode::Kernel {
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
        self.engine.start_session();
        self.start_stamping(shared, &link);
        let fd = self.fd;
        self.wbuf.clear();
        self.written = 0;
        self.rstart = 0;
        self.rend = 0;
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
            match self.engine.idle(now) {
                Some(Idle::Done) => return End::Done,
                Some(Idle::Recycle) => return End::Recycle,
                None => {}
            }
            self.watch.waiting_since.set(self.engine.waiting_since());
            let want_write = self.written < self.wbuf.len() || link.wants_flush();
            // While the socket is full the next send waits for it, not for the clock.
            let due = self.engine.next_due(want_write);
            if self.rbuf.len() - self.rend < MIN_READ_SPACE {
                self.make_read_space();
            }
            let ticker = shared.ticker.as_ref();
            let slot = self.slot;
            if let Some(ticker) = ticker {
                ticker.awaiting_reply(slot, self.engine.newest_start());
            }
            tokio::select! {
                biased;
                _ = self.watch.kill.notified() => {
                    if let Some(kill) = self.watch.reason.take() {
                        if kill == Kill::Deadline || !self.engine.pending().is_empty() {
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
                            tcp.try_io(Interest::READABLE, || self.read_stamped(fd))
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
    /// it took bytes from. In the open loop, where a second reply may be queued behind the
    /// first (more than one request outstanding), the queued bytes are peeked at and only
    /// the first reply is read, so its stamp is its own, not a later reply's. The closed
    /// loop reads all that is there: a pipeline's replies mostly arrive together, and
    /// reading them one by one would cost three system calls a reply.
    fn read_stamped(&mut self, fd: RawFd) -> io::Result<(usize, Stamp)> {
        let mut want = self.rbuf.len() - self.rend;
        if self.engine.is_open_loop() && self.engine.pending().len() > 1 {
            let (peeked, _) = stamping::peek(fd, &mut self.rbuf[self.rend..])?;
            if let Some(used) = self
                .engine
                .first_reply_len(&self.rbuf[self.rstart..self.rend + peeked])
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
        let clock = shared.clock;
        let times = |p: &Pending| Times {
            intended_ns: p.start_ns,
            transmitted_ns: p
                .transmitted
                .software_ns
                .map(|ns| clock.at_realtime(ns, offset)),
            received_ns,
            wire: wire_ns(p.transmitted, received).map(|(ns, hardware)| Wire { ns, hardware }),
            read_ns: done_ns,
        };
        let used = self.engine.replies(
            &self.rbuf[self.rstart..self.rend],
            &mut shared.recorder.borrow_mut(),
            times,
        )?;
        self.rstart += used;
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
