//! A connection's byte stream: TCP or a Unix socket, with or without TLS. The session
//! loop waits for readiness and then reads and writes without blocking, so TLS is driven
//! on the same readiness by the transport crate's sans-I/O functions
//! ([`cachelab_net::stream::session`], which the proxy's loop uses too), rather than
//! behind an async stream: the loop keeps one shape for every transport, and the plain
//! TCP path keeps its kernel timestamps.

use std::io::{self, Read, Write};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use cachelab_net::endpoint::Endpoint;
use cachelab_net::stream::session;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, Connection};
use tokio::net::{TcpStream, UnixStream};

use super::clock::monotonic_ns;
use crate::setup::SetupTimes;

/// Where the server is and how to speak to it; shared by every connection of a run.
#[derive(Debug, Clone)]
pub struct Target {
    /// Where `--server` resolved to (or the `--unix-socket` path), tried in order.
    pub endpoints: Vec<Endpoint>,
    pub tls: Option<TlsTarget>,
    /// How the server is named in errors (`host:port` or the socket's path).
    pub name: String,
}

#[derive(Debug, Clone)]
pub struct TlsTarget {
    pub config: Arc<ClientConfig>,
    pub server_name: ServerName<'static>,
}

/// Why a connection could not be opened.
#[derive(Debug)]
pub enum OpenError {
    Connect(io::Error),
    /// The TLS handshake failed: the one-line reason ([`crate::tls::explain`]).
    Handshake(String),
}

pub enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Socket {
    async fn readable(&self) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.readable().await,
            Socket::Unix(s) => s.readable().await,
        }
    }

    async fn writable(&self) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.writable().await,
            Socket::Unix(s) => s.writable().await,
        }
    }

    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.try_read(buf),
            Socket::Unix(s) => s.try_read(buf),
        }
    }

    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.try_write(buf),
            Socket::Unix(s) => s.try_write(buf),
        }
    }
}

/// `io::Read`/`io::Write` on a non-blocking socket, for rustls's `read_tls`/`write_tls`
/// (a `WouldBlock` also clears tokio's readiness, so the next wait is a real one).
struct Io<'a>(&'a Socket);

impl Read for Io<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }
}

impl Write for Io<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

pub struct Link {
    socket: Socket,
    tls: Option<Connection>,
    /// The last TLS read filled the caller's buffer: rustls may hold more decrypted
    /// bytes, so the link is readable whatever the socket says until a read finds none.
    plaintext_left: bool,
}

async fn connect_one(endpoint: &Endpoint) -> io::Result<Socket> {
    match endpoint {
        Endpoint::Tcp(addr) => {
            let stream = TcpStream::connect(addr).await?;
            // Requests are written whole; Nagle would hold back a pipelined or open-loop
            // request.
            stream.set_nodelay(true)?;
            Ok(Socket::Tcp(stream))
        }
        Endpoint::Unix(path) => UnixStream::connect(path)
            .await
            .map(Socket::Unix)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    }
}

/// The first of `endpoints` that takes the connection.
async fn connect(endpoints: &[Endpoint]) -> io::Result<Socket> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address to connect to");
    for endpoint in endpoints {
        match connect_one(endpoint).await {
            Ok(socket) => return Ok(socket),
            // With several addresses (a name), say which one failed; with one, the
            // caller's message names it already.
            Err(e) if endpoints.len() > 1 => {
                last = io::Error::new(e.kind(), format!("{endpoint}: {e}"))
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

impl Link {
    /// Connects (and handshakes, with TLS) within `timeout`; returns the link and how
    /// long each step took ([`crate::setup`]).
    pub async fn open(target: &Target, timeout: Duration) -> Result<(Link, SetupTimes), OpenError> {
        match tokio::time::timeout(timeout, Link::open_now(target)).await {
            Ok(result) => result,
            Err(_) => Err(OpenError::Connect(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{}: connection timed out", target.name),
            ))),
        }
    }

    async fn open_now(target: &Target) -> Result<(Link, SetupTimes), OpenError> {
        let start = monotonic_ns();
        let socket = connect(&target.endpoints)
            .await
            .map_err(OpenError::Connect)?;
        let connected = monotonic_ns();
        let mut link = Link {
            socket,
            tls: None,
            plaintext_left: false,
        };
        let handshake_ns = match &target.tls {
            None => None,
            Some(tls) => {
                let conn = ClientConnection::new(tls.config.clone(), tls.server_name.clone())
                    .map_err(|e| OpenError::Handshake(crate::tls::explain(&e)))?;
                link.tls = Some(conn.into());
                link.handshake().await?;
                Some(monotonic_ns() - connected)
            }
        };
        Ok((
            link,
            SetupTimes {
                connect_ns: connected - start,
                handshake_ns,
            },
        ))
    }

    async fn handshake(&mut self) -> Result<(), OpenError> {
        let tls = self.tls.as_mut().expect("a TLS link");
        let io_error = |e: io::Error| OpenError::Handshake(format!("{e} during the TLS handshake"));
        loop {
            match session::handshake(tls, &mut Io(&self.socket)) {
                Ok(true) => return Ok(()),
                // Records to send wait for room in the socket; otherwise the server's
                // next records are awaited.
                Ok(false) if tls.wants_write() => self.socket.writable().await.map_err(io_error)?,
                Ok(false) => self.socket.readable().await.map_err(io_error)?,
                Err(e) => return Err(handshake_error(tls, &self.socket, e)),
            }
        }
    }

    /// The plain TCP socket, when there is no TLS on it (kernel timestamps need it).
    pub fn plain_tcp(&self) -> Option<&TcpStream> {
        match (&self.socket, &self.tls) {
            (Socket::Tcp(s), None) => Some(s),
            _ => None,
        }
    }

    /// Why the kernel's timestamps cannot time this link's requests, if they cannot.
    pub fn unstampable(&self) -> Option<&'static str> {
        match (&self.socket, &self.tls) {
            (Socket::Tcp(_), None) => None,
            (_, Some(_)) => Some(
                "TLS: the kernel stamps encrypted records, not requests and replies; user-space timing used",
            ),
            (Socket::Unix(_), None) => {
                Some("Unix socket: the kernel stamps no Unix stream; user-space timing used")
            }
        }
    }

    /// The TLS version and cipher suite negotiated (`None` without TLS).
    pub fn negotiated(&self) -> (Option<String>, Option<String>) {
        match &self.tls {
            None => (None, None),
            Some(tls) => (
                tls.protocol_version().map(|v| format!("{v:?}")),
                tls.negotiated_cipher_suite()
                    .map(|s| format!("{:?}", s.suite())),
            ),
        }
    }

    /// Ready once the link may have bytes to read.
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.plaintext_left {
            return Poll::Ready(Ok(()));
        }
        match &self.socket {
            Socket::Tcp(s) => s.poll_read_ready(cx),
            Socket::Unix(s) => s.poll_read_ready(cx),
        }
    }

    /// After a read that took less than it asked for, the socket's queue was empty: says so
    /// to the runtime without a system call, so the next wait is for new bytes rather
    /// than a read that would only answer "nothing" (`EAGAIN`). Bytes that arrive later
    /// raise a new readiness event, which this does not clear. Plain sockets only.
    pub fn drained(&self) {
        if self.tls.is_some() {
            return;
        }
        let nothing = || Err::<(), _>(io::Error::from(io::ErrorKind::WouldBlock));
        let _ = match &self.socket {
            Socket::Tcp(s) => s.try_io(tokio::io::Interest::READABLE, nothing),
            Socket::Unix(s) => s.try_io(tokio::io::Interest::READABLE, nothing),
        };
    }

    /// Ready once the socket may take bytes.
    pub fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &self.socket {
            Socket::Tcp(s) => s.poll_write_ready(cx),
            Socket::Unix(s) => s.poll_write_ready(cx),
        }
    }

    /// Encrypted bytes wait to go to the socket.
    pub fn wants_flush(&self) -> bool {
        self.tls.as_ref().is_some_and(|tls| tls.wants_write())
    }

    /// Writes what the socket takes without blocking; returns how many of `data`'s bytes
    /// were taken (with TLS: encrypted, and sent as far as the socket took them; none
    /// while earlier records still wait for the socket).
    pub fn try_send(&mut self, data: &[u8]) -> io::Result<usize> {
        match self.tls.as_mut() {
            None => self.socket.try_write(data),
            Some(tls) => session::write(tls, &mut Io(&self.socket), data),
        }
    }

    /// Sends the encrypted bytes waiting, as far as the socket takes them.
    pub fn flush(&mut self) -> io::Result<()> {
        match self.tls.as_mut() {
            None => Ok(()),
            Some(tls) => session::flush(tls, &mut Io(&self.socket)).map(drop),
        }
    }

    /// Reads without blocking: `Ok(0)` is the end of the stream, `WouldBlock` nothing
    /// yet (with TLS: maybe part of a record, the rest still to come).
    pub fn try_recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(tls) = self.tls.as_mut() else {
            return self.socket.try_read(buf);
        };
        let read = session::read(tls, &mut Io(&self.socket), buf);
        self.plaintext_left = matches!(read, Ok(n) if n == buf.len() && n > 0);
        read
    }
}

/// Why a handshake failed (`e`, from [`session::handshake`]), in one line: rustls's own
/// error (with its hint), the server's alert if one is still there to read after a
/// failed write, or the socket's error.
fn handshake_error(tls: &mut Connection, socket: &Socket, e: io::Error) -> OpenError {
    if let Some(refused) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        return OpenError::Handshake(crate::tls::explain(refused));
    }
    if e.kind() == io::ErrorKind::UnexpectedEof {
        return OpenError::Handshake(
            "the server closed the connection during the TLS handshake (is it speaking TLS on this port?)".into(),
        );
    }
    alert_or(tls, socket, e)
}

/// The handshake failed on the socket (`e`): if the server's alert is still there to be
/// read, the error is the alert's (with its hint); otherwise the socket's.
fn alert_or(tls: &mut Connection, socket: &Socket, e: io::Error) -> OpenError {
    for _ in 0..4 {
        match session::receive(tls, &mut Io(socket)) {
            Ok(session::Received::Records) => {}
            Ok(_) => break,
            Err(refused) => match refused
                .get_ref()
                .and_then(|r| r.downcast_ref::<rustls::Error>())
            {
                Some(alert) => return OpenError::Handshake(crate::tls::explain(alert)),
                None => break,
            },
        }
    }
    OpenError::Handshake(format!("{e} during the TLS handshake"))
}
