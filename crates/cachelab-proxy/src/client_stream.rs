//! A client connection's two halves over TCP, a Unix socket, or TLS over TCP.
//!
//! The read half belongs to the connection task; the write half is shared by the workers,
//! which write replies synchronously with `try_write` under the connection's outbox lock
//! (the outbox of `client/`). For TLS both halves share one rustls session behind a
//! mutex: a worker encrypts and hands the records to the kernel without waiting; records the
//! kernel did not take stay in the session (`flush_backlog` reports them, and the
//! connection task sends them once the socket is writable).

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::ServerConnection;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::{tcp, unix, TcpStream};

use crate::endpoint::Accepted;
use crate::loop_stream::LoopStream;
use crate::tls::ListenerTls;

/// How long a client may take to complete its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A TLS session and its socket, shared by the two halves.
pub struct TlsShared {
    socket: TcpStream,
    session: Mutex<ServerConnection>,
}

impl TlsShared {
    fn lock(&self) -> MutexGuard<'_, ServerConnection> {
        self.session.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Sends the session's pending records without waiting: true if none are left.
fn flush_tls(socket: &TcpStream, session: &mut ServerConnection) -> io::Result<bool> {
    while session.wants_write() {
        match session.write_tls(&mut SocketWriter(socket)) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

struct SocketWriter<'a>(&'a TcpStream);

impl Write for SocketWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

struct SocketReader<'a>(&'a TcpStream);

impl Read for SocketReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }
}

/// Why a client connection could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("TLS handshake failed: {0}")]
    Failed(io::Error),
    #[error("TLS handshake timed out after {} s", HANDSHAKE_TIMEOUT.as_secs())]
    TimedOut,
    #[error("TLS is not served on Unix socket listeners")]
    UnixTls,
}

/// Splits an accepted connection into its halves, after the TLS handshake if the
/// listener has TLS. A failed handshake costs only this connection.
pub async fn establish(
    accepted: Accepted,
    tls: Option<&ListenerTls>,
) -> Result<(ClientReader, ClientWriter), HandshakeError> {
    match (accepted, tls) {
        (Accepted::Tcp(stream), None) => {
            let (r, w) = stream.into_split();
            Ok((ClientReader::Tcp(r), ClientWriter::Tcp(w)))
        }
        (Accepted::Unix(stream), None) => {
            let (r, w) = stream.into_split();
            Ok((ClientReader::Unix(r), ClientWriter::Unix(w)))
        }
        (Accepted::Unix(_), Some(_)) => Err(HandshakeError::UnixTls),
        (Accepted::Tcp(stream), Some(tls)) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.current());
            let done = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream))
                .await
                .map_err(|_| HandshakeError::TimedOut)?
                .map_err(HandshakeError::Failed)?;
            let (socket, session) = done.into_inner();
            let shared = Arc::new(TlsShared {
                socket,
                session: Mutex::new(session),
            });
            Ok((
                ClientReader::Tls(Arc::clone(&shared)),
                ClientWriter::Tls(shared),
            ))
        }
    }
}

/// The write half, used synchronously by whoever completes a reply.
pub enum ClientWriter {
    Tcp(tcp::OwnedWriteHalf),
    Unix(unix::OwnedWriteHalf),
    Tls(Arc<TlsShared>),
    /// A connection of the event loop (`evloop`), which also reads it (TLS
    /// included: records the kernel did not take are sent when the loop sees the
    /// socket writable).
    Loop(Arc<LoopStream>),
}

impl From<tcp::OwnedWriteHalf> for ClientWriter {
    fn from(half: tcp::OwnedWriteHalf) -> Self {
        ClientWriter::Tcp(half)
    }
}

impl ClientWriter {
    /// Writes what the kernel takes now (`WouldBlock` if nothing).
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            ClientWriter::Tcp(w) => w.try_write(buf),
            ClientWriter::Unix(w) => w.try_write(buf),
            ClientWriter::Loop(s) => s.write(buf),
            ClientWriter::Tls(shared) => {
                let mut session = shared.lock();
                // Older records first; while they wait, take no more plaintext.
                if !flush_tls(&shared.socket, &mut session)? {
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                let n = session.writer().write(buf)?;
                if n == 0 && !buf.is_empty() {
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                flush_tls(&shared.socket, &mut session)?;
                Ok(n)
            }
        }
    }

    /// Sends records already encrypted but not yet taken by the kernel; true if none
    /// are left (always, without TLS).
    pub fn flush_backlog(&self) -> io::Result<bool> {
        match self {
            ClientWriter::Tcp(_) | ClientWriter::Unix(_) => Ok(true),
            ClientWriter::Loop(s) => s.flush(),
            ClientWriter::Tls(shared) => flush_tls(&shared.socket, &mut shared.lock()),
        }
    }

    /// Waits until the socket can take more bytes.
    pub async fn writable(&self) -> io::Result<()> {
        match self {
            ClientWriter::Tcp(w) => w.writable().await,
            ClientWriter::Unix(w) => w.writable().await,
            ClientWriter::Tls(shared) => shared.socket.writable().await,
            // The event loop waits for writability itself and calls
            // `ClientConn::flush_blocked`; nothing awaits this.
            ClientWriter::Loop(_) => Err(io::ErrorKind::Unsupported.into()),
        }
    }

    /// Ends the sending side after what was written: TLS sends close_notify first.
    pub fn shutdown_write(&self) {
        let fd = match self {
            ClientWriter::Tcp(w) => w.as_ref().as_raw_fd(),
            ClientWriter::Unix(w) => w.as_ref().as_raw_fd(),
            ClientWriter::Loop(s) => return s.shutdown_write(),
            ClientWriter::Tls(shared) => {
                let mut session = shared.lock();
                session.send_close_notify();
                let _ = flush_tls(&shared.socket, &mut session);
                shared.socket.as_raw_fd()
            }
        };
        // SAFETY: the descriptor is owned by the stream, open for `self`'s lifetime.
        unsafe {
            libc::shutdown(fd, libc::SHUT_WR);
        }
    }
}

/// The read half, owned by the connection task.
pub enum ClientReader {
    Tcp(tcp::OwnedReadHalf),
    Unix(unix::OwnedReadHalf),
    Tls(Arc<TlsShared>),
}

impl From<tcp::OwnedReadHalf> for ClientReader {
    fn from(half: tcp::OwnedReadHalf) -> Self {
        ClientReader::Tcp(half)
    }
}

impl AsyncRead for ClientReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientReader::Tcp(r) => Pin::new(r).poll_read(cx, buf),
            ClientReader::Unix(r) => Pin::new(r).poll_read(cx, buf),
            ClientReader::Tls(shared) => poll_read_tls(shared, cx, buf),
        }
    }
}

/// Plaintext the session holds, else records from the socket; registers for the
/// socket's readiness when it has nothing.
fn poll_read_tls(
    shared: &TlsShared,
    cx: &mut Context<'_>,
    buf: &mut ReadBuf<'_>,
) -> Poll<io::Result<()>> {
    loop {
        let mut session = shared.lock();
        match session.reader().read(buf.initialize_unfilled()) {
            Ok(n) => {
                buf.advance(n);
                return Poll::Ready(Ok(()));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            // A peer that closed without close_notify: a plain EOF to the caller.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Poll::Ready(Ok(())),
            Err(e) => return Poll::Ready(Err(e)),
        }
        match session.read_tls(&mut SocketReader(&shared.socket)) {
            Ok(_) => {
                let processed = session.process_new_packets();
                // Alerts, key updates: sent now if the socket takes them, else with
                // the next reply.
                let _ = flush_tls(&shared.socket, &mut session);
                if let Err(e) = processed {
                    return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e)));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                drop(session);
                match shared.socket.poll_read_ready(cx) {
                    Poll::Ready(Ok(())) => continue,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => return Poll::Pending,
                }
            }
            Err(e) => return Poll::Ready(Err(e)),
        }
    }
}
