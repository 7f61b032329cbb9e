//! One client connection's I/O: it owns the sockets (one per server: one, or every
//! server of a `--shard` pool), their buffers and the kernel's timestamps ([`Wire`]),
//! and asks the connection's [`Engine`] what to send and what each reply means. A broken
//! socket counts the connection's outstanding requests as errors, and the connection is
//! re-opened (every socket of it) with a back-off. With `--reconnect-interval N` a
//! connection sends N requests, waits for their answers, closes and re-opens
//! (memtier's `shard_connection::process_response` and `client::hold_pipeline`: no
//! request is outstanding when it closes).

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::io;
use std::rc::Rc;
use std::time::Duration;

use cachelab_net::backoff::Backoff;
use cachelab_protocol::ReplyError;
use tokio::sync::Notify;

use super::clock::{realtime_offset_ns, Clock};
use super::link::{Link, OpenError, Target};
use super::ticker::Ticker;
use super::wire::{poll_ready, Ready, Wire};
use crate::engine::{Engine, Idle, Pending, Rules};
use crate::record::Recorder;
use crate::stamps::{wire_ns, Stamp};
use crate::timing::{Times, Wire as WireTime};

/// Reconnection backoff: first wait and cap.
const BACKOFF_FIRST: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// What a thread's connections share (one thread, so `Rc`/`RefCell`, no locks).
pub struct Shared {
    pub clock: Clock,
    pub recorder: RefCell<Recorder>,
    pub rules: Rules,
    /// Where each connection connects: one server, or every server of a `--shard` pool
    /// in the list's order (the engine's lanes).
    pub targets: Vec<Target>,
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
    /// One write buffer per lane (the engine composes into them).
    wbufs: Vec<Vec<u8>>,
    /// Where the next readiness look starts, so that no socket is starved.
    next_look: usize,
    pub watch: Rc<Watch>,
}

impl Connection {
    /// `slot` numbers the connection within its thread, from 0.
    pub fn new(engine: Engine, slot: usize) -> Connection {
        let lanes = engine.lanes();
        Connection {
            engine,
            slot,
            wbufs: (0..lanes).map(|_| Vec::with_capacity(4096)).collect(),
            next_look: 0,
            watch: Rc::new(Watch::default()),
        }
    }

    /// Drives the connection until its requests are done or the run's time is up.
    pub async fn run(mut self, shared: Rc<Shared>, first: Vec<Link>) {
        let mut links = Some(first);
        loop {
            let Some(l) = links.take() else { break };
            let end = self.session(&shared, l).await;
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
                    links = self.reconnect(&shared).await
                }
            }
        }
        self.engine
            .account_unsent(&mut shared.recorder.borrow_mut());
    }

    async fn reconnect(&mut self, shared: &Shared) -> Option<Vec<Link>> {
        let give_up = shared.clock.now() + shared.reply_timeout.as_nanos() as u64;
        let mut backoff = Backoff::new(BACKOFF_FIRST, BACKOFF_MAX);
        loop {
            let now = shared.clock.now();
            if !self.engine.more_to_issue(now) || now >= give_up {
                return None;
            }
            // Never wait past the end of the run: --test-time is always honoured.
            let left = Duration::from_nanos(shared.rules.stop_issuing_ns.min(give_up) - now);
            match open_all(shared, shared.connect_timeout.min(left)).await {
                Ok(links) => return Some(links),
                Err(error) => {
                    let mut recorder = shared.recorder.borrow_mut();
                    if matches!(error, OpenError::Handshake(_)) {
                        recorder.setup.handshake_failed();
                    }
                    recorder.connection_error();
                }
            }
            tokio::time::sleep(backoff.failed().min(left)).await;
        }
    }

    /// Composes every request that may go now into the write buffers and records it sent.
    fn issue(&mut self, shared: &Shared, wires: &[Wire], now: u64) {
        // Compose only when everything composed before has gone to the kernel: a request
        // counts as sent (and its send lag stops) when it is handed to the socket, so one
        // that must wait for a full socket to drain waits in the schedule, not in our
        // buffer; and the requests composed together leave in one write per socket.
        // With TLS, encrypted bytes still waiting hold back new requests the same way.
        if wires
            .iter()
            .zip(&self.wbufs)
            .any(|(w, wbuf)| w.wants_write(wbuf))
        {
            return;
        }
        let mut recorder = shared.recorder.borrow_mut();
        self.engine
            .issue_lanes(now, &mut self.wbufs, &mut recorder, || shared.clock.now());
    }

    async fn session(&mut self, shared: &Shared, links: Vec<Link>) -> End {
        self.engine.start_session();
        let mut wires: Vec<Wire> = {
            let mut recorder = shared.recorder.borrow_mut();
            links
                .into_iter()
                .enumerate()
                .map(|(lane, link)| Wire::new(link, lane, shared.rules.timestamps, &mut recorder))
                .collect()
        };
        self.wbufs.iter_mut().for_each(Vec::clear);
        let mut wants_write = vec![false; wires.len()];
        loop {
            let now = shared.clock.now();
            self.issue(shared, &wires, now);
            for (wire, wbuf) in wires.iter_mut().zip(&mut self.wbufs) {
                if wire.send(wbuf, &mut self.engine).is_err() {
                    return End::Broken;
                }
            }
            match self.engine.idle(now) {
                Some(Idle::Done) => return End::Done,
                Some(Idle::Recycle) => return End::Recycle,
                None => {}
            }
            self.watch.waiting_since.set(self.engine.waiting_since());
            for ((want, wire), wbuf) in wants_write.iter_mut().zip(&wires).zip(&self.wbufs) {
                *want = wire.wants_write(wbuf);
            }
            // While a socket is full the next send waits for it, not for the clock.
            let due = self.engine.next_due(wants_write.contains(&true));
            let ticker = shared.ticker.as_ref();
            let slot = self.slot;
            if let Some(ticker) = ticker {
                ticker.awaiting_reply(slot, self.engine.newest_start());
            }
            let from = self.next_look;
            tokio::select! {
                biased;
                _ = self.watch.kill.notified() => {
                    if let Some(kill) = self.watch.reason.take() {
                        if kill == Kill::Deadline || self.engine.outstanding() > 0 {
                            return End::Killed(kill);
                        }
                    }
                }
                ready = poll_fn(|cx| poll_ready(&wires, &wants_write, from, cx)) => {
                    match ready {
                        Err(_) => return End::Broken,
                        Ok(Ready::Write(i)) => {
                            self.next_look = (i + 1) % wires.len();
                            if wires[i].send(&mut self.wbufs[i], &mut self.engine).is_err() {
                                return End::Broken;
                            }
                        }
                        Ok(Ready::Read(i)) => {
                            self.next_look = (i + 1) % wires.len();
                            match wires[i].read(&self.engine) {
                                Ok((0, _)) => return End::Broken,
                                Ok((_, received)) => {
                                    if self.parse_replies(shared, &mut wires[i], i, received).is_err() {
                                        return End::Broken;
                                    }
                                }
                                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                                Err(_) => return End::Broken,
                            }
                        }
                    }
                },
                _ = async {
                    ticker.expect("an open loop has a ticker").until(slot, due.unwrap_or(0)).await
                }, if due.is_some() => {}
            }
        }
    }

    /// Parses every complete reply in `wire`'s read buffer, in request order. `received`
    /// is the kernel's stamp of the read that brought the last bytes.
    fn parse_replies(
        &mut self,
        shared: &Shared,
        wire: &mut Wire,
        lane: usize,
        received: Stamp,
    ) -> Result<(), ReplyError> {
        // Every reply in this read arrived together: one clock reading serves them all.
        let done_ns = shared.clock.now();
        let mut offset = 0;
        let mut received_ns = None;
        if wire.stamping {
            // The transmit stamps of the requests answered here are on the error queue
            // (queued when their segments went to the device, before any answer).
            if wire.stamps_queued > 0 {
                wire.drain_transmit_stamps(&mut self.engine);
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
            wire: wire_ns(p.transmitted, received).map(|(ns, hardware)| WireTime { ns, hardware }),
            read_ns: done_ns,
        };
        let used = self.engine.replies_on(
            lane,
            wire.unparsed(),
            &mut shared.recorder.borrow_mut(),
            times,
        )?;
        wire.consumed(used);
        Ok(())
    }
}

/// Opens the connection's socket to every target, in order (one server, or each of a
/// `--shard` pool), and records each one's set-up.
pub async fn open_all(shared: &Shared, timeout: Duration) -> Result<Vec<Link>, OpenError> {
    let mut links = Vec::with_capacity(shared.targets.len());
    for target in &shared.targets {
        let (link, times) = Link::open(target, timeout).await?;
        opened(&mut shared.recorder.borrow_mut(), &link, times);
        links.push(link);
    }
    Ok(links)
}

/// Records a new connection's set-up (and what its TLS handshake agreed on).
pub fn opened(recorder: &mut Recorder, link: &Link, times: crate::setup::SetupTimes) {
    recorder.setup.opened(times);
    let (version, suite) = link.negotiated();
    recorder.setup.negotiated(version, suite);
}
