//! The net layer's per-connection task: reads bytes, decodes requests, answers local
//! commands and rejections itself, and puts everything else into the FCFS queue with
//! its read targets assigned.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, BytesMut};
use cachelab_protocol::{Discard, Invalid};
use tokio::io::AsyncReadExt;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::admission::ClientLimits;
use crate::budget::MemoryBudget;
use crate::client::ClientConn;
use crate::client_stream::ClientReader;
use crate::decode::{binary_error, Class, Decoder, Local, Step};
use crate::job::Job;
use crate::log_limit::LogLimit;
use crate::observed::{NetCounters, Observed, PoolSlot};
use crate::queue::RequestQueue;
use crate::resp_decode::RespDecoder;
use crate::routing::plan::Pool;
use crate::routing::Protocol;
use crate::stats_command::compose_stats;

mod forward;
mod redis;
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

/// The net layer's handles: the queue it feeds, the budget requests are charged to,
/// the proxy-wide log limit, its counters, and a read-only view for `stats`.
pub struct NetContext {
    pub settings: NetSettings,
    pub queue: Arc<RequestQueue<Job>>,
    pub budget: Arc<MemoryBudget>,
    pub log_limit: LogLimit,
    pub net: Arc<NetCounters>,
    pub observed: Arc<Observed>,
}

/// Bad requests per connection logged individually; after that, one line per 1000.
const LOGGED_ERRORS: u64 = 10;

/// How long a closing connection keeps reading (and dropping) client input.
const LINGER: std::time::Duration = std::time::Duration::from_secs(1);

/// Why a client connection stopped reading.
#[derive(Debug)]
pub enum End {
    Quit,
    Eof,
    Shutdown,
    Error(io::Error),
    Dead,
    Idle,
}

pub async fn serve(
    conn: Arc<ClientConn<Job>>,
    reader: impl Into<ClientReader>,
    net: Arc<NetContext>,
    slot: Arc<PoolSlot>,
    mut stop: watch::Receiver<bool>,
) {
    let mut reader = reader.into();
    let mut session = Session::new(Arc::clone(&conn), Arc::clone(&net), slot);
    let end = session.read_loop(&mut reader, &mut stop).await;
    session.log_end(&end);
    // Answer everything already received, then close gracefully.
    conn.drain().await;
    conn.shutdown_write();
    if end.lingers() {
        linger(&mut reader).await;
    }
    session.close();
}

impl End {
    /// Whether the client may still be sending: closing with unread input makes the
    /// kernel reset the connection, which can destroy replies still in flight.
    pub fn lingers(&self) -> bool {
        !matches!(self, End::Eof | End::Error(_) | End::Dead | End::Idle)
    }
}

/// Reads and drops what the client still sends until it closes or LINGER passes.
/// Closing a socket with unread input makes the kernel send RST, which can destroy
/// replies still in flight to the client; lingering like this avoids that.
async fn linger(reader: &mut ClientReader) {
    let mut scratch = [0u8; 4096];
    let _ = tokio::time::timeout(LINGER, async {
        while let Ok(n) = reader.read(&mut scratch).await {
            if n == 0 {
                return;
            }
        }
    })
    .await;
}

/// Sleeps until `at`, or forever.
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A client connection's decoding state, without its socket: the tokio shell's task
/// ([`serve`]) and the event loop (`evloop`) feed it the bytes they read.
pub struct Session {
    conn: Arc<ClientConn<Job>>,
    net: Arc<NetContext>,
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

impl Session {
    pub fn new(conn: Arc<ClientConn<Job>>, net: Arc<NetContext>, slot: Arc<PoolSlot>) -> Self {
        let pool = slot.current();
        Session {
            conn,
            net,
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

    pub fn conn(&self) -> &Arc<ClientConn<Job>> {
        &self.conn
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
    /// arms its wake-up), after decoding what a pause left in the buffer.
    pub fn may_read(&mut self) -> Result<bool, End> {
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
            match self.decode_all(Instant::now(), limits) {
                Decoded::Quit => return Err(End::Quit),
                Decoded::Paused | Decoded::All => {}
            }
        }
    }

    /// The buffer to read into, with room for at least 4 KiB more.
    pub fn read_buf(&mut self) -> &mut BytesMut {
        if self.rbuf.capacity() - self.rbuf.len() < 4096 {
            self.rbuf.reserve(16 * 1024);
        }
        &mut self.rbuf
    }

    /// Decodes what a read that completed at `arrival` brought.
    pub fn after_read(&mut self, arrival: Instant) -> Result<(), End> {
        crate::busy_poll::touch();
        match self.decode_all(arrival, self.limits()) {
            Decoded::Quit => Err(End::Quit),
            Decoded::Paused | Decoded::All => Ok(()),
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

    async fn read_loop(
        &mut self,
        reader: &mut ClientReader,
        stop: &mut watch::Receiver<bool>,
    ) -> End {
        let idle_timeout = self.net.settings.idle_timeout;
        let mut last_read = tokio::time::Instant::now();
        loop {
            if *stop.borrow() {
                return End::Shutdown;
            }
            // Runs to completion (never inside select!), so a flush is never abandoned
            // half-way with the outbox marked blocked.
            self.conn.flush_when_blocked().await;
            match self.may_read() {
                Err(end) => return end,
                Ok(false) => {
                    tokio::select! {
                        _ = self.conn.woken() => {}
                        _ = stop.changed() => return End::Shutdown,
                    }
                    continue;
                }
                Ok(true) => {}
            }
            // `read_buf` is cancel-safe, and clears the socket's readiness after a short
            // read, so a drained socket costs no extra `recv` returning EAGAIN.
            let idle_at = idle_timeout
                .filter(|_| self.is_idle())
                .map(|t| last_read + t);
            self.read_buf();
            let (conn, rbuf) = (&self.conn, &mut self.rbuf);
            let read = tokio::select! {
                biased;
                _ = stop.changed() => return End::Shutdown,
                _ = conn.woken() => continue,
                read = reader.read_buf(rbuf) => read,
                _ = sleep_until_some(idle_at) => return End::Idle,
            };
            match read {
                Ok(0) => return End::Eof,
                Ok(_) => {
                    last_read = tokio::time::Instant::now();
                    if let Err(end) = self.after_read(Instant::now()) {
                        return end;
                    }
                }
                Err(e) => return End::Error(e),
            }
        }
    }

    /// Handles every complete request in the buffer, stopping before a request to
    /// forward while the client may not have more dispatched.
    fn decode_all(&mut self, arrival: Instant, limits: ClientLimits) -> Decoded {
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
            return self.decode_all_resp(arrival, limits);
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
                    if self.reject(invalid, arrival) {
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
                        Class::Forward(forward) => self.enqueue(len, forward, spans, arrival),
                    }
                }
            }
        }
    }

    /// Answers a rejected request as memcached would (or not at all, where memcached
    /// is silent); true if the connection is to be closed, as memcached closes it.
    fn reject(&mut self, invalid: Invalid, arrival: Instant) -> bool {
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
            self.unlink(unlink, arrival);
        }
        self.rbuf.advance(len);
        invalid.then == Discard::Close
    }

    fn answer_local(&mut self, local: Local) {
        match local {
            Local::Version => self.conn.reply_now(
                concat!("VERSION cachelab-proxy-", env!("CARGO_PKG_VERSION"), "\r\n").as_bytes(),
            ),
            Local::Stats => {
                let mut out = BytesMut::with_capacity(2048);
                compose_stats(&self.net.observed, &mut out);
                self.conn.reply_now(&out);
            }
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
