//! One worker's connection to one server in the event loop: a nonblocking connect, the
//! TLS handshake if the pool has server TLS ([`TlsSocket`]), the greeting a Redis
//! pool's connection sends first (`AUTH`, `SELECT`), then a usable connection, and the
//! retry policy after a failure ([`Reconnect`]).
//!
//! Every step returns at once; what it waits for (writable to finish a connect or a
//! greeting, readable for the greeting's answer) comes back as the loop's events.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use mio::net::{TcpStream, UnixStream};
use mio::{Interest, Registry, Token};
use tracing::{info, warn};

use crate::dialect::Dialect;
use crate::down::{Down, IdleEnd};
use crate::endpoint::Endpoint;
use crate::health::{FailureKind, Health};
use crate::mio_socket::{MioSocket, ReadOutcome};
use crate::reconnect::Reconnect;
use crate::server_stream::{ConnectError, Connector};

use crate::loop_stream::tls::TlsSocket;
use crate::loop_stream::LoopStream;

enum State {
    Closed,
    /// Connecting, then greeting (`greeting` holds what is left to send, `answer` what
    /// came back so far), until `deadline`.
    Opening {
        socket: LoopStream,
        deadline: Instant,
        connected: bool,
        greeting: Vec<u8>,
        answer: BytesMut,
        dialect: Dialect,
    },
    Ready(LoopStream),
}

/// Starts a nonblocking connect (the TLS session waits for it to complete).
fn start_connect(connector: &Connector) -> Result<LoopStream, ConnectError> {
    let socket = match &connector.endpoint {
        Endpoint::Tcp(addr) => TcpStream::connect(*addr).map(MioSocket::Tcp),
        Endpoint::Unix(_) if connector.tls.is_some() => return Err(ConnectError::UnixTls),
        Endpoint::Unix(path) => UnixStream::connect(path).map(MioSocket::Unix),
    }
    .map_err(ConnectError::Connect)?;
    let Some(tls) = &connector.tls else {
        return Ok(LoopStream::Plain(socket));
    };
    let session = rustls::ClientConnection::new(Arc::clone(&tls.config), tls.name.clone())
        .map_err(|e| ConnectError::Handshake(io::Error::other(e)))?;
    Ok(LoopStream::Tls(Box::new(TlsSocket::new(socket, session))))
}

/// How an opening connection got on.
#[derive(Debug)]
pub enum Opened {
    /// Still connecting or greeting: wait for the socket.
    Pending,
    Ready,
    Failed(Down),
}

pub struct ServerLink {
    pub worker: usize,
    pub server: usize,
    token: Token,
    state: State,
    pub retry: Reconnect,
    /// A readable event has not been read to exhaustion yet (edge-triggered).
    pub readable: bool,
    /// The server closed its side: read until EOF whatever a short read says.
    pub hup: bool,
}

impl ServerLink {
    pub fn new(worker: usize, server: usize, token: Token, backoff_max: Duration) -> Self {
        ServerLink {
            worker,
            server,
            token,
            state: State::Closed,
            retry: Reconnect::new(backoff_max),
            readable: false,
            hup: false,
        }
    }

    /// Notes a socket event: bytes (or the end) to read.
    pub fn note_event(&mut self, readable: bool, hup: bool) {
        self.hup |= hup;
        if readable || hup {
            self.readable = true;
        }
    }

    pub fn is_ready(&self) -> bool {
        matches!(self.state, State::Ready(_))
    }

    pub fn is_opening(&self) -> bool {
        matches!(self.state, State::Opening { .. })
    }

    /// When an opening connection gives up.
    pub fn deadline(&self) -> Option<Instant> {
        match &self.state {
            State::Opening { deadline, .. } => Some(*deadline),
            _ => None,
        }
    }

    pub fn socket(&self) -> Option<&LoopStream> {
        match &self.state {
            State::Ready(s) => Some(s),
            _ => None,
        }
    }

    /// Starts connecting, if the retry policy allows it now; Err says why the server
    /// cannot be used.
    ///
    /// A request that finds the connection still backing off counts as one more
    /// failure of the server, as the connection attempt it would have made in
    /// twemproxy: so `--failure-limit` counts failed requests in a row, whichever
    /// worker's (or the shared) connection they met.
    pub fn open(
        &mut self,
        health: &Health,
        registry: &Registry,
        now: Instant,
        timeout: Duration,
    ) -> Result<Opened, Down> {
        if let Err(down) = self.retry.may_attempt(now, health.restores(self.server)) {
            health.report_failure(self.server, FailureKind::Connection, &down.to_string());
            return Err(down);
        }
        let connector = health.connector(self.server);
        let mut socket = match start_connect(&connector) {
            Ok(s) => s,
            Err(e) => {
                let down = Down::Connect(e.to_string());
                self.failed(health, now, FailureKind::Connection, down.clone());
                return Err(down);
            }
        };
        if let Err(e) = registry.register(
            &mut socket,
            self.token,
            Interest::READABLE | Interest::WRITABLE,
        ) {
            let down = Down::Connect(ConnectError::Connect(e).to_string());
            self.failed(health, now, FailureKind::Connection, down.clone());
            return Err(down);
        }
        self.readable = false;
        self.hup = false;
        self.state = State::Opening {
            socket,
            deadline: now + timeout,
            connected: false,
            greeting: connector.dialect.greeting(),
            answer: BytesMut::new(),
            dialect: connector.dialect,
        };
        Ok(Opened::Pending)
    }

    /// Carries an opening connection on after an event (or a deadline) at `now`.
    pub fn advance(
        &mut self,
        health: &Health,
        registry: &Registry,
        now: Instant,
        timeout: Duration,
    ) -> Opened {
        let State::Opening {
            socket,
            deadline,
            connected,
            greeting,
            answer,
            dialect,
        } = &mut self.state
        else {
            return Opened::Pending;
        };
        let step = (|| -> Result<bool, ConnectError> {
            if !*connected {
                match socket.socket().connect_result() {
                    Ok(()) => *connected = true,
                    Err(e)
                        if e.kind() == io::ErrorKind::NotConnected
                            || e.kind() == io::ErrorKind::WouldBlock =>
                    {
                        return Ok(false)
                    }
                    Err(e) => return Err(ConnectError::Connect(e)),
                }
                if let MioSocket::Tcp(s) = socket.socket() {
                    let _ = s.set_nodelay(true);
                }
            }
            if !socket.handshake().map_err(ConnectError::Handshake)? {
                return Ok(false);
            }
            while !greeting.is_empty() {
                match socket.write(greeting) {
                    Ok(n) => drop(greeting.drain(..n)),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                    Err(e) => return Err(ConnectError::GreetingIo(e)),
                }
            }
            loop {
                if dialect.check_greeting(answer)?.is_some() {
                    return Ok(true);
                }
                if answer.capacity() - answer.len() < 512 {
                    answer.reserve(512);
                }
                match socket.read_into(answer) {
                    Ok(ReadOutcome::Data { .. }) => {}
                    Ok(ReadOutcome::WouldBlock) => return Ok(false),
                    Ok(ReadOutcome::Eof) => {
                        return Err(ConnectError::GreetingIo(
                            io::ErrorKind::UnexpectedEof.into(),
                        ))
                    }
                    Err(e) => return Err(ConnectError::GreetingIo(e)),
                }
            }
        })();
        match step {
            Ok(true) => {
                let State::Opening { socket, .. } =
                    std::mem::replace(&mut self.state, State::Closed)
                else {
                    unreachable!("matched above")
                };
                self.state = State::Ready(socket);
                if self.retry.connected() {
                    info!(worker = self.worker, server = %health.addr(self.server), "reconnected to server");
                }
                Opened::Ready
            }
            Ok(false) if now >= *deadline => {
                let down = Down::ConnectTimeout(timeout.as_millis());
                self.close(registry);
                self.failed(health, now, FailureKind::Timeout, down.clone());
                Opened::Failed(down)
            }
            Ok(false) => Opened::Pending,
            Err(e) => {
                let down = Down::Connect(e.to_string());
                self.close(registry);
                self.failed(health, now, FailureKind::Connection, down.clone());
                Opened::Failed(down)
            }
        }
    }

    /// Reports a failure to the shared health and waits out the backoff.
    fn failed(&mut self, health: &Health, now: Instant, kind: FailureKind, down: Down) {
        let restores = health.restores(self.server);
        health.report_failure(self.server, kind, &down.to_string());
        self.retry.failed(now, restores, down);
    }

    /// An error on an established connection: closed, counted, retried with backoff.
    pub fn fail(
        &mut self,
        health: &Health,
        registry: &Registry,
        now: Instant,
        kind: FailureKind,
        down: Down,
    ) {
        if self.close(registry) {
            warn!(worker = self.worker, server = %health.addr(self.server), reason = %down,
                  "server connection failed; reconnecting with backoff");
        }
        self.failed(health, now, kind, down);
    }

    /// Closed without counting it against the server (ejected, or closed while idle).
    pub fn drop_connection(&mut self, health: &Health, registry: &Registry, down: Down) {
        if self.close(registry) {
            info!(worker = self.worker, server = %health.addr(self.server), reason = %down,
                  "server connection closed");
        }
        self.retry.down = down;
    }

    /// True if there was a connection.
    fn close(&mut self, registry: &Registry) -> bool {
        match std::mem::replace(&mut self.state, State::Closed) {
            State::Closed => false,
            State::Opening { mut socket, .. } | State::Ready(mut socket) => {
                let _ = registry.deregister(&mut socket);
                self.readable = false;
                self.hup = false;
                true
            }
        }
    }

    /// Why an idle connection must go, if the server closed it or sent bytes nobody
    /// asked for; reads only when a readable event is pending.
    pub fn idle_end(&mut self) -> Option<IdleEnd> {
        if !self.readable {
            return None;
        }
        let socket = self.socket()?;
        let mut probe = [0u8; 64];
        let end = match socket.read_scratch(&mut probe) {
            Ok(0) => Some(IdleEnd::Closed),
            Ok(_) => Some(IdleEnd::UnaskedBytes),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
            Err(_) => Some(IdleEnd::Failed),
        };
        if end.is_none() {
            self.readable = false;
        }
        end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Requests that find the connection backing off each count a failure, so a server
    /// is ejected after `--failure-limit` failed requests in a row, however few
    /// connections (one worker's, or the shared one) they met.
    #[test]
    fn a_request_that_finds_the_connection_backing_off_counts_a_failure() {
        let addr = Endpoint::Tcp("127.0.0.1:1".parse().unwrap());
        let health = Health::new(&[addr], 3);
        let poll = mio::Poll::new().unwrap();
        let mut link = ServerLink::new(0, 0, Token(7), Duration::from_secs(60));
        let now = Instant::now();
        link.fail(
            &health,
            poll.registry(),
            now,
            FailureKind::Connection,
            Down::Closed,
        );
        assert_eq!(health.report()[0].failures, 1);
        let timeout = Duration::from_secs(1);
        assert!(link.open(&health, poll.registry(), now, timeout).is_err());
        assert!(!health.is_ejected(0));
        assert!(link.open(&health, poll.registry(), now, timeout).is_err());
        assert!(health.is_ejected(0), "the third failure in a row ejects");
        assert_eq!(health.reason(0), Down::Closed.to_string());
    }
}
