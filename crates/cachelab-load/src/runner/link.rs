//! A connection's byte stream: TCP or a Unix socket, with or without TLS. The session
//! loop waits for readiness and then reads and writes without blocking, so TLS is driven
//! here with rustls's `ClientConnection` directly (`read_tls`, `process_new_packets`,
//! `write_tls`) on the same readiness, rather than behind an async stream: the loop keeps
//! one shape for every transport, and the plain TCP path keeps its kernel timestamps.

use std::io::{self, Read, Write};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use cachelab_net::endpoint::Endpoint;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection};
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
    tls: Option<ClientConnection>,
    /// Decrypted bytes rustls holds that have not been read yet: while there are some,
    /// the link is readable whatever the socket says.
    plaintext_left: usize,
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

fn invalid_data(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
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
            plaintext_left: 0,
        };
        let handshake_ns = match &target.tls {
            None => None,
            Some(tls) => {
                let conn = ClientConnection::new(tls.config.clone(), tls.server_name.clone())
                    .map_err(|e| OpenError::Handshake(crate::tls::explain(&e)))?;
                link.tls = Some(conn);
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
            if tls.wants_write() {
                self.socket.writable().await.map_err(io_error)?;
                match tls.write_tls(&mut Io(&self.socket)) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    // A server that refuses us sends an alert and closes, and our next
                    // write can fail first: read the alert, so the error says why.
                    Err(e) => return Err(alert_or(tls, &self.socket, e)),
                }
                continue;
            }
            if !tls.is_handshaking() {
                return Ok(());
            }
            self.socket.readable().await.map_err(io_error)?;
            match tls.read_tls(&mut Io(&self.socket)) {
                Ok(0) => {
                    return Err(OpenError::Handshake(
                        "the server closed the connection during the TLS handshake (is it speaking TLS on this port?)".into(),
                    ))
                }
                Ok(_) => {
                    if let Err(e) = tls.process_new_packets() {
                        // Tell the server why (the alert rustls queued), then give up.
                        let _ = tls.write_tls(&mut Io(&self.socket));
                        return Err(OpenError::Handshake(crate::tls::explain(&e)));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(alert_or(tls, &self.socket, e)),
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
        if self.plaintext_left > 0 {
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
    /// were taken (with TLS: encrypted, and sent as far as the socket took them).
    pub fn try_send(&mut self, data: &[u8]) -> io::Result<usize> {
        let Some(tls) = self.tls.as_mut() else {
            return self.socket.try_write(data);
        };
        let n = tls.writer().write(data)?;
        self.flush()?;
        Ok(n)
    }

    /// Sends the encrypted bytes waiting, as far as the socket takes them.
    pub fn flush(&mut self) -> io::Result<()> {
        let Some(tls) = self.tls.as_mut() else {
            return Ok(());
        };
        while tls.wants_write() {
            match tls.write_tls(&mut Io(&self.socket)) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads without blocking: `Ok(0)` is the end of the stream, `WouldBlock` nothing
    /// yet (with TLS: maybe part of a record, the rest still to come).
    pub fn try_recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(tls) = self.tls.as_mut() else {
            return self.socket.try_read(buf);
        };
        if self.plaintext_left == 0 {
            if tls.read_tls(&mut Io(&self.socket))? == 0 {
                return Ok(0);
            }
            let state = tls.process_new_packets().map_err(invalid_data)?;
            self.plaintext_left = state.plaintext_bytes_to_read();
            let closed = state.peer_has_closed();
            // Anything the records called for (an alert, a key update) goes out now.
            self.flush()?;
            if self.plaintext_left == 0 {
                return if closed {
                    Ok(0)
                } else {
                    Err(io::ErrorKind::WouldBlock.into())
                };
            }
        }
        let tls = self.tls.as_mut().expect("a TLS link");
        let n = tls.reader().read(buf)?;
        self.plaintext_left -= n;
        Ok(n)
    }
}

/// The handshake failed on the socket (`e`): if the server's alert is still there to be
/// read, the error is the alert's (with its hint); otherwise the socket's.
fn alert_or(tls: &mut ClientConnection, socket: &Socket, e: io::Error) -> OpenError {
    for _ in 0..4 {
        match tls.read_tls(&mut Io(socket)) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if let Err(alert) = tls.process_new_packets() {
                    return OpenError::Handshake(crate::tls::explain(&alert));
                }
            }
        }
    }
    OpenError::Handshake(format!("{e} during the TLS handshake"))
}
