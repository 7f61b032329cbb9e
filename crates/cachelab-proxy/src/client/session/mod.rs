//! The client engine, [`ClientSession`]: the client side's rules for one connection,
//! without a socket or a clock. The bytes the event loop read (`evloop/clients.rs`)
//! are decoded into requests; local commands and rejections are answered here,
//! everything else is admitted into the FCFS queue with its read targets assigned (or
//! held behind the write barrier), and the replies come out in request order as bytes
//! for the loop to write. Its rules are tested by name in simulated time (`tests.rs`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, BytesMut};
use cachelab_protocol::{Discard, Invalid};
use tracing::{debug, info, warn};

use crate::admission::ClientLimits;
use crate::budget::MemoryBudget;
use crate::client::{ClientConn, Ordered};
use crate::config::Config;
use crate::decode::{binary_error, Class, Decoder, Local, Step};
use crate::job::Job;
use crate::log_limit::LogLimit;
use crate::observed::{NetCounters, Observed, PoolSlot};
use crate::queue::RequestQueue;
use crate::resp_decode::RespDecoder;
use crate::routing::plan::Pool;
use crate::routing::Protocol;

mod forward;
mod redis;
#[cfg(test)]
mod tests;
use cachelab_protocol::Limits;
use std::time::Duration;

/// What the connection tasks run with besides their handles.
#[derive(Debug, Clone, Copy)]
pub struct NetSettings {
    pub limits: Limits,
    pub max_inflight: usize,
    pub idle_timeout: Option<Duration>,
    pub max_pending_bytes: usize,
}

/// The net layer's handles, shared by every loop: the budget requests are charged to,
/// the proxy-wide log limit, its counters, and a read-only view for `stats`.
pub struct NetContext {
    pub settings: NetSettings,
    pub budget: Arc<MemoryBudget>,
    pub log_limit: LogLimit,
    pub net: Arc<NetCounters>,
    pub observed: Arc<Observed>,
}

impl NetContext {
    /// The context `config` asks for, over the budget and counters `observed` shows.
    pub fn new(config: &Config, observed: Arc<Observed>) -> Self {
        NetContext {
            settings: NetSettings {
                limits: config.limits,
                max_inflight: config.max_inflight,
                idle_timeout: config.idle_timeout,
                max_pending_bytes: config.max_pending_bytes,
            },
            budget: Arc::clone(&observed.budget),
            log_limit: LogLimit::new(config.log_lines_per_second),
            net: Arc::clone(&observed.net),
            observed,
        }
    }
}

/// A request the client engine queues: a write holds its connection's later requests
/// back (the write barrier).
impl Ordered for Job {
    fn is_write(&self) -> bool {
        self.request.is_write()
    }
}

/// Bad requests per connection logged individually; after that, one line per 1000.
const LOGGED_ERRORS: u64 = 10;

/// Why a client connection stopped reading.
#[derive(Debug)]
pub enum End {
    Quit,
    Eof,
    Shutdown,
    Error(std::io::Error),
    Dead,
    Idle,
}

impl End {
    /// Whether the client may still be sending: closing with unread input makes the
    /// kernel reset the connection, which can destroy replies still in flight.
    pub fn lingers(&self) -> bool {
        !matches!(self, End::Eof | End::Error(_) | End::Dead | End::Idle)
    }
}

/// The client side's engine for one connection, without its socket or a clock: the
/// event loop (`evloop/clients.rs`) feeds it the bytes it reads (with the time they
/// came), the replies workers completed and how much of its output the kernel took;
/// it decodes, answers locally or rejects, admits requests into the FCFS queue (or
/// holds them behind the write barrier), and orders the replies into
/// [`ClientConn::output`]. Its deadlines are [`crate::client::lifecycle`]'s.
pub struct ClientSession {
    conn: ClientConn<Job>,
    net: Arc<NetContext>,
    /// The reply slots of `stats` requests, for the loop to fill
    /// ([`ClientSession::answer_stats`]).
    stats_owed: Vec<u64>,
    /// The listener's pool as of `generation`; refreshed when a reload bumps it.
    slot: Arc<PoolSlot>,
    pool: Arc<Pool>,
    generation: u64,
    decoder: Decoder,
    /// A Redis pool's decoder (with the client's authentication).
    resp: RespDecoder,
    /// What the client speaks: its pool's protocol when it connected.
    protocol: Protocol,
    rbuf: BytesMut,
    errors: u64,
    /// Decoding stopped before a request the client may not have dispatched yet
    /// ([`crate::admission`]); the rest of `rbuf` is decoded before reading more.
    paused: bool,
}

/// How far `decode_all` got.
#[derive(Debug, PartialEq, Eq)]
enum Decoded {
    /// Every complete request in the buffer was handled.
    All,
    /// Stopped before a request the client may not have dispatched yet.
    Paused,
    /// The client sent `quit` (or must be closed).
    Quit,
}

impl ClientSession {
    pub fn new(conn: ClientConn<Job>, net: Arc<NetContext>, slot: Arc<PoolSlot>) -> Self {
        let pool = slot.current();
        ClientSession {
            conn,
            net,
            stats_owed: Vec::new(),
            generation: slot.generation(),
            protocol: pool.protocol,
            pool,
            slot,
            decoder: Decoder::default(),
            resp: RespDecoder::default(),
            rbuf: BytesMut::with_capacity(16 * 1024),
            errors: 0,
            paused: false,
        }
    }

    pub fn conn(&self) -> &ClientConn<Job> {
        &self.conn
    }

    pub fn conn_mut(&mut self) -> &mut ClientConn<Job> {
        &mut self.conn
    }

    pub fn net(&self) -> &Arc<NetContext> {
        &self.net
    }

    /// The per-client limits of admission ([`crate::admission`]).
    pub fn limits(&self) -> ClientLimits {
        ClientLimits {
            max_inflight: self.net.settings.max_inflight,
            max_pending_bytes: self.net.settings.max_pending_bytes,
        }
    }

    /// Whether more may be read now: Ok(false) while the client may not have another
    /// request dispatched (a completion is to be waited for; [`ClientConn::must_wait`]
    /// arms its wake-up), after decoding what a pause left in the buffer. `clock` is
    /// read only then, for the paused requests' arrival.
    pub fn may_read(
        &mut self,
        clock: impl Fn() -> Instant,
        queue: &mut RequestQueue<Job>,
    ) -> Result<bool, End> {
        let limits = self.limits();
        loop {
            if self.conn.is_dead() {
                return Err(End::Dead);
            }
            if self.conn.must_wait(limits) {
                self.net.net.client_pauses.fetch_add(1, Ordering::Relaxed);
                return Ok(false);
            }
            if !self.paused {
                return Ok(true);
            }
            // What was read before the pause arrives now, as if it had waited unread
            // in the socket (the client's own backlog, not the proxy's).
            match self.decode_all(clock(), limits, queue) {
                Decoded::Quit => return Err(End::Quit),
                Decoded::Paused | Decoded::All => {}
            }
        }
    }

    /// The buffer the loop reads the client's bytes into (with room for at least 4 KiB
    /// more); [`ClientSession::after_read`] decodes them.
    pub fn read_buffer(&mut self) -> &mut BytesMut {
        if self.rbuf.capacity() - self.rbuf.len() < 4096 {
            self.rbuf.reserve(16 * 1024);
        }
        &mut self.rbuf
    }

    /// A worker finished request `seq` of this client: its reply (None: noreply) goes
    /// into its slot, and a write's completion releases what the write barrier held.
    pub fn complete(
        &mut self,
        seq: u64,
        reply: Option<&[u8]>,
        write: bool,
        queue: &mut RequestQueue<Job>,
    ) {
        match reply {
            Some(reply) => self.conn.complete(seq, reply),
            None => self.conn.complete_silent(seq),
        }
        self.conn.finished(write, queue);
    }

    /// Decodes what a read that completed at `arrival` brought.
    pub fn after_read(
        &mut self,
        arrival: Instant,
        queue: &mut RequestQueue<Job>,
    ) -> Result<(), End> {
        match self.decode_all(arrival, self.limits(), queue) {
            Decoded::Quit => Err(End::Quit),
            Decoded::Paused | Decoded::All => Ok(()),
        }
    }

    /// Whether `stats` requests wait for the loop's answer
    /// ([`ClientSession::answer_stats`]).
    pub fn owes_stats(&self) -> bool {
        !self.stats_owed.is_empty()
    }

    /// Puts `reply` into the slot of every `stats` request waiting for it.
    pub fn answer_stats(&mut self, reply: &[u8]) {
        for seq in std::mem::take(&mut self.stats_owed) {
            self.conn.complete(seq, reply);
        }
    }

    /// Idle: nothing in flight (only then does the idle timeout run).
    pub fn is_idle(&self) -> bool {
        self.conn.in_flight() == 0
    }

    pub fn log_end(&self, end: &End) {
        let conn = &self.conn;
        match end {
            End::Eof if !self.rbuf.is_empty() && !self.decoder.is_discarding() => {
                info!(conn = conn.id, peer = %conn.peer, bytes = self.rbuf.len(),
                      "client closed the connection in the middle of a request; partial request dropped");
            }
            End::Error(e) => {
                debug!(conn = conn.id, peer = %conn.peer, error = %e, "client read failed")
            }
            End::Idle => {
                debug!(conn = conn.id, peer = %conn.peer, "closing a connection idle past --idle-timeout")
            }
            _ => {}
        }
    }

    /// The connection is gone: its last log line and the connection count.
    pub fn close(&self) {
        if self.errors > LOGGED_ERRORS {
            warn!(conn = self.conn.id, peer = %self.conn.peer, bad_requests = self.errors,
                  "connection closed after many bad requests");
        }
        self.net
            .net
            .curr_connections
            .fetch_sub(1, Ordering::Relaxed);
    }

    /// Handles every complete request in the buffer, stopping before a request to
    /// forward while the client may not have more dispatched.
    fn decode_all(
        &mut self,
        arrival: Instant,
        limits: ClientLimits,
        queue: &mut RequestQueue<Job>,
    ) -> Decoded {
        self.paused = false;
        let parse_limits = self.net.settings.limits;
        let generation = self.slot.generation();
        if generation != self.generation {
            self.pool = self.slot.current();
            self.generation = generation;
            if self.pool.protocol != self.protocol {
                info!(conn = self.conn.id, peer = %self.conn.peer,
                      from = self.protocol.name(), to = self.pool.protocol.name(),
                      "the pool's protocol changed on reload: closing the connection");
                self.rbuf.clear();
                return Decoded::Quit;
            }
        }
        if self.protocol == Protocol::Redis {
            return self.decode_all_resp(arrival, limits, queue);
        }
        loop {
            match self.decoder.step(&self.rbuf, &parse_limits) {
                Step::Incomplete => return Decoded::All,
                Step::Skipped(n) => self.rbuf.advance(n),
                Step::Binary => {
                    self.net.net.bad_requests.fetch_add(1, Ordering::Relaxed);
                    if self.net.log_limit.allow() {
                        warn!(conn = self.conn.id, peer = %self.conn.peer,
                              "binary-protocol request: answered with an error, closing");
                    }
                    self.conn.reply_now(&binary_error(&self.rbuf));
                    self.rbuf.clear();
                    return Decoded::Quit;
                }
                Step::Reject(invalid) => {
                    if self.reject(invalid, arrival, queue) {
                        return Decoded::Quit;
                    }
                }
                Step::Request { len, class, spans } => {
                    if matches!(class, Class::Forward(_)) && self.conn.must_wait(limits) {
                        // Decoded again when the client may have it dispatched.
                        self.paused = true;
                        return Decoded::Paused;
                    }
                    self.net.net.arrivals.fetch_add(1, Ordering::Relaxed);
                    match class {
                        Class::Local(Local::Quit) => {
                            self.rbuf.advance(len);
                            return Decoded::Quit;
                        }
                        Class::Local(local) => {
                            self.rbuf.advance(len);
                            self.answer_local(local);
                        }
                        Class::Forward(forward) => {
                            self.enqueue(len, forward, spans, arrival, queue)
                        }
                    }
                }
            }
        }
    }

    /// Answers a rejected request as memcached would (or not at all, where memcached
    /// is silent); true if the connection is to be closed, as memcached closes it.
    fn reject(
        &mut self,
        invalid: Invalid,
        arrival: Instant,
        queue: &mut RequestQueue<Job>,
    ) -> bool {
        let len = invalid.consumed;
        self.errors += 1;
        self.net.net.bad_requests.fetch_add(1, Ordering::Relaxed);
        let per_connection = self.errors <= LOGGED_ERRORS || self.errors.is_multiple_of(1000);
        if per_connection && self.net.log_limit.allow() {
            let shown = &self.rbuf[..len.min(80)];
            warn!(conn = self.conn.id, peer = %self.conn.peer, error = %invalid.error,
                  silent = invalid.silent,
                  request = %String::from_utf8_lossy(shown).escape_debug(),
                  count = self.errors, "bad request");
        }
        if let Some(reply) = invalid.reply() {
            self.conn.reply_now(reply);
        }
        if let Some(unlink) = invalid.unlink {
            self.unlink(unlink, arrival, queue);
        }
        self.rbuf.advance(len);
        invalid.then == Discard::Close
    }

    fn answer_local(&mut self, local: Local) {
        match local {
            Local::Version => self.conn.reply_now(
                concat!("VERSION cachelab-proxy-", env!("CARGO_PKG_VERSION"), "\r\n").as_bytes(),
            ),
            // Its slot is filled by the loop, which holds its workers' latencies.
            Local::Stats => self.stats_owed.push(self.conn.reserve()),
            Local::StatsUnsupported => self
                .conn
                .reply_now(b"CLIENT_ERROR only the general stats are served by the proxy\r\n"),
            Local::Verbosity { noreply } => {
                if !noreply {
                    self.conn.reply_now(b"OK\r\n");
                }
            }
            Local::MetaNoop => self.conn.reply_now(b"MN\r\n"),
            Local::Quit => unreachable!("quit ends the read loop"),
        }
    }
}
