//! The event loop's client connections: accepting (with the connection limit), reading
//! into each connection's [`ClientSession`], which decodes and queues, writing its
//! output (the replies in request order), and closing gracefully
//! (answer what was received, FIN, then read and drop what the client still sends for a
//! while so that a reset cannot destroy replies in flight). A TLS listener's connection
//! first completes its handshake in the loop (within
//! [`HANDSHAKE_TIMEOUT`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Interest, Registry, Token};
use tracing::{error, warn};

use super::EventLoop;
use crate::client::lifecycle::{AfterDrain, Due, Lifecycle, Phase, HANDSHAKE_TIMEOUT};
use crate::client::session::{ClientSession, End, NetContext};
use crate::client::ClientConn;
use crate::endpoint::Peer;
use crate::job::Job;
use crate::mio_socket::{MioSocket, ReadOutcome};
use crate::observed::PoolSlot;
use crate::queue::RequestQueue;
use crate::tls::ListenerTls;

use crate::loop_stream::tls::TlsSocket;
use crate::loop_stream::LoopStream;

/// Why a TLS client's connection was closed before it was served.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("TLS handshake failed: {0}")]
    Failed(std::io::Error),
    #[error("TLS handshake timed out after {} s", HANDSHAKE_TIMEOUT.as_secs())]
    TimedOut,
}

pub struct Client {
    /// The socket, this loop's alone: read into the session's buffer, written from its
    /// output.
    stream: LoopStream,
    session: ClientSession,
    /// When what is due: the handshake, the idle timeout, the drain and the linger.
    life: Lifecycle,
    /// A readable event has not been read to exhaustion yet (edge-triggered).
    readable: bool,
    /// The peer closed its side: read until EOF whatever a short read says (no
    /// further edge will come).
    hup: bool,
    /// Reading stopped until a reply of this client completes.
    waiting: bool,
    /// The socket did not take all of the output; the rest waits for it to be writable.
    blocked: bool,
    /// Replies completed since the output was last written (see [`Client::on_reply`]).
    replied: bool,
}

/// What became of a client after an event: keep it, or it is gone.
#[derive(Debug, PartialEq, Eq)]
pub enum Fate {
    Keep,
    Gone,
}

impl Client {
    /// A new connection, registered with the loop; with `tls`, its handshake starts
    /// with the listener's current certificate (a reload changes it for later ones).
    #[allow(clippy::too_many_arguments)]
    pub fn accept(
        socket: MioSocket,
        tls: Option<&ListenerTls>,
        peer: Peer,
        id: u64,
        token: Token,
        registry: &Registry,
        net: &Arc<NetContext>,
        slot: Arc<PoolSlot>,
    ) -> std::io::Result<Client> {
        let mut socket = match tls {
            None => LoopStream::Plain(socket),
            Some(tls) => {
                let session =
                    rustls::ServerConnection::new(tls.current()).map_err(std::io::Error::other)?;
                let tls = TlsSocket::new(socket, session);
                LoopStream::Tls(Box::new(tls))
            }
        };
        registry.register(&mut socket, token, Interest::READABLE | Interest::WRITABLE)?;
        let conn = ClientConn::new(id, peer, Arc::clone(&net.budget));
        Ok(Client {
            stream: socket,
            session: ClientSession::new(conn, Arc::clone(net), slot),
            life: Lifecycle::new(Instant::now(), tls.is_some()),
            readable: false,
            hup: false,
            waiting: false,
            blocked: false,
            replied: false,
        })
    }

    pub fn id(&self) -> u64 {
        self.session.conn().id
    }

    /// A socket event.
    pub fn on_event(
        &mut self,
        readable: bool,
        hup: bool,
        writable: bool,
        registry: &Registry,
        queue: &mut RequestQueue<Job>,
        now: Instant,
    ) -> Fate {
        if writable {
            self.blocked = false;
        }
        self.hup |= hup;
        if readable || hup {
            self.readable = true;
        }
        self.advance(registry, queue, now)
    }

    /// A worker finished one of its requests: the reply goes into its slot (into the
    /// output if it is the oldest owed). True if it is the first since the output was
    /// last written: the loop then calls [`Client::after_replies`] once it has handed
    /// out every reply of the worker's batch, so that they leave in one write.
    pub fn on_reply(
        &mut self,
        seq: u64,
        reply: Option<&[u8]>,
        write: bool,
        queue: &mut RequestQueue<Job>,
    ) -> bool {
        self.session.complete(seq, reply, write, queue);
        !std::mem::replace(&mut self.replied, true)
    }

    /// Whether the client's `stats` requests wait for [`Client::answer_stats`].
    pub fn owes_stats(&self) -> bool {
        self.session.owes_stats()
    }

    /// Answers the client's waiting `stats` requests with `reply`; the loop then calls
    /// [`Client::after_replies`].
    pub fn answer_stats(&mut self, reply: &[u8]) {
        self.session.answer_stats(reply);
    }

    /// Writes the replies completed since the last write; reading may resume, or the
    /// drain be done.
    pub fn after_replies(
        &mut self,
        registry: &Registry,
        queue: &mut RequestQueue<Job>,
        now: Instant,
    ) -> Fate {
        self.replied = false;
        if self.waiting || self.life.phase() != Phase::Open {
            self.advance(registry, queue, now)
        } else {
            self.flush();
            Fate::Keep
        }
    }

    /// Writes the session's output until it is all written or the socket is full (the
    /// rest then waits for a writable event); a failed write drops the output.
    fn flush(&mut self) {
        let conn = self.session.conn_mut();
        if self.blocked || conn.is_dead() {
            return;
        }
        while !conn.output().is_empty() {
            match self.stream.write(conn.output()) {
                Ok(n) => conn.wrote(n),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    self.blocked = true;
                    return;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return conn.write_failed(),
            }
        }
        // TLS records encrypted but not yet taken by the kernel: sent when writable.
        match self.stream.flush() {
            Ok(true) => {}
            Ok(false) => self.blocked = true,
            Err(_) => conn.write_failed(),
        }
    }

    /// `now`: when the loop's turn began (bytes read now arrived by then).
    fn advance(
        &mut self,
        registry: &Registry,
        queue: &mut RequestQueue<Job>,
        now: Instant,
    ) -> Fate {
        if self.life.is_handshaking() {
            match self.stream.handshake() {
                Ok(true) => {
                    self.life.handshake_done(Instant::now());
                    // The client's first requests may have come with its last
                    // handshake records.
                    self.readable = true;
                }
                Ok(false) => return Fate::Keep,
                Err(e) => return self.handshake_failed(HandshakeError::Failed(e), registry),
            }
        }
        match self.life.phase() {
            // `read` leaves nothing unwritten that the socket would take.
            Phase::Open => match self.read(queue, now) {
                Ok(()) => Fate::Keep,
                Err(end) => self.stop_reading(end, registry),
            },
            Phase::Draining { .. } => self.drained(registry),
            Phase::Lingering { until } => self.linger(until, registry),
            Phase::Handshaking { .. } => Fate::Keep,
        }
    }

    /// Reads and decodes while the client may have more dispatched.
    fn read(&mut self, queue: &mut RequestQueue<Job>, now: Instant) -> Result<(), End> {
        loop {
            // What is owed leaves before more is read: what the client has not taken
            // counts against what it may have dispatched.
            self.flush();
            self.waiting = !self.session.may_read(Instant::now, queue)?;
            if self.waiting || !self.readable {
                return Ok(());
            }
            let outcome = self.stream.read_into(self.session.read_buffer());
            match outcome {
                Ok(ReadOutcome::Data { drained, .. }) => {
                    self.life.read(now);
                    self.readable = !drained || self.hup;
                    self.session.after_read(now, queue)?;
                }
                Ok(ReadOutcome::WouldBlock) => {
                    self.readable = false;
                    return Ok(());
                }
                Ok(ReadOutcome::Eof) => return Err(End::Eof),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(End::Error(e)),
            }
        }
    }

    /// A handshake that failed or timed out: counted and logged; the connection is
    /// closed without a reply.
    fn handshake_failed(&mut self, e: HandshakeError, registry: &Registry) -> Fate {
        let net = self.session.net();
        net.net.tls_handshake_errors.fetch_add(1, Ordering::Relaxed);
        if net.log_limit.allow() {
            let conn = self.session.conn();
            warn!(conn = conn.id, peer = %conn.peer, error = %e, "client connection closed");
        }
        self.close(registry)
    }

    /// Stops reading: answers what was received, then closes.
    pub fn stop_reading(&mut self, end: End, registry: &Registry) -> Fate {
        self.session.log_end(&end);
        self.life.stop(end.lingers());
        self.drained(registry)
    }

    fn drained(&mut self, registry: &Registry) -> Fate {
        self.flush();
        if !self.session.conn().is_drained() {
            return Fate::Keep;
        }
        self.stream.shutdown_write();
        match self.life.drained(Instant::now()) {
            Some(AfterDrain::Linger { until }) => {
                self.readable = true;
                self.linger(until, registry)
            }
            Some(AfterDrain::Close) | None => self.close(registry),
        }
    }

    fn linger(&mut self, until: Instant, registry: &Registry) -> Fate {
        let mut scratch = [0u8; 4096];
        while self.readable {
            match self.stream.read_scratch(&mut scratch) {
                Ok(0) => return self.close(registry),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => self.readable = false,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return self.close(registry),
            }
        }
        if Instant::now() >= until {
            return self.close(registry);
        }
        Fate::Keep
    }

    fn close(&mut self, registry: &Registry) -> Fate {
        // Its events must not reach the token's next owner. The socket closes when the
        // client is dropped.
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.stream);
        let _ = registry.deregister(&mut mio::unix::SourceFd(&fd));
        self.session.close();
        Fate::Gone
    }

    /// Whether its deadline counts without an idle timeout: lingering after its close
    /// (dropping input until EOF or the time), or handshaking.
    pub fn lingers(&self) -> bool {
        self.life.lingers()
    }

    /// When time must be checked for this client: the end of its handshake or linger,
    /// or of its idle timeout.
    pub fn deadline(&self, idle_timeout: Option<Duration>) -> Option<Instant> {
        self.life.deadline(idle_timeout, self.session.is_idle())
    }

    /// Time passed: a handshake times out, an idle connection is closed, a linger ends.
    pub fn on_time(
        &mut self,
        now: Instant,
        idle_timeout: Option<Duration>,
        registry: &Registry,
    ) -> Fate {
        match self.life.due(now, idle_timeout, self.session.is_idle()) {
            Due::Nothing => Fate::Keep,
            Due::HandshakeTimedOut => self.handshake_failed(HandshakeError::TimedOut, registry),
            Due::Idle => self.stop_reading(End::Idle, registry),
            Due::Close => self.close(registry),
        }
    }

    /// Shutdown: stop reading, answer what was received.
    pub fn shut_down(&mut self, registry: &Registry) -> Fate {
        match self.life.phase() {
            // Nothing was received: nothing to answer.
            Phase::Handshaking { .. } => self.close(registry),
            Phase::Open => self.stop_reading(End::Shutdown, registry),
            Phase::Draining { .. } | Phase::Lingering { .. } => Fate::Keep,
        }
    }
}

/// Answers a connection past the limit as memcached does, and closes it. A TLS
/// listener's client would not understand a plain line: it is closed without one.
pub fn refuse(socket: MioSocket, tls: bool, net: &NetContext, peer: &Peer, limit: usize) {
    let refused = net.net.rejected_connections.fetch_add(1, Ordering::Relaxed);
    if refused.is_multiple_of(1000) {
        warn!(%peer, limit, refused = refused + 1, "too many open connections: refusing");
    }
    if !tls {
        let _ = socket.write(b"ERROR Too many open connections\r\n");
    }
    socket.shutdown_write();
}

/// An accept error (typically out of file descriptors): logged; the loop retries later.
pub fn accept_failed(e: &std::io::Error) {
    error!(error = %e, "accept failed");
}

/// Clients leaving the loop.
impl EventLoop {
    /// Removes a client that is gone; remembers one that lingers (its deadline counts).
    pub(super) fn settle_client(&mut self, key: usize, fate: Fate) {
        match fate {
            Fate::Gone => self.remove(key),
            Fate::Keep => {
                if self.clients[key].owes_stats() {
                    return self.answer_stats(key);
                }
                if self.clients[key].lingers() && !self.lingering.contains(&key) {
                    self.lingering.push(key);
                }
            }
        }
    }

    fn remove(&mut self, key: usize) {
        let client = self.clients.remove(key);
        self.by_id.remove(&client.id());
        self.lingering.retain(|&k| k != key);
    }
}
