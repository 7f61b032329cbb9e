//! TLS over one of the event loop's nonblocking sockets, with rustls's sans-I/O API:
//! records are read from the socket only when the loop says it is readable, decrypted
//! into the caller's buffer, and encrypted records are handed to the kernel as far as it
//! takes them; the rest stay in the session until the socket is writable again.
//!
//! One type for both ends: a client's connection to a TLS listener (a
//! `ServerConnection`) and a worker's connection to a TLS server (a
//! `ClientConnection`). The session sits behind a mutex because a client connection's
//! write half ([`crate::client_stream::ClientWriter`]) is shared; the loop is its only
//! user, so it is never contended.

use std::io::{self, Read, Write};
use std::sync::{Mutex, MutexGuard};

use bytes::BytesMut;
use rustls::Connection;

use crate::mio_socket::{MioSocket, ReadOutcome};

pub struct TlsSocket {
    socket: MioSocket,
    session: Mutex<Connection>,
}

/// The socket as rustls's `read_tls`/`write_tls` want it.
struct Wire<'a>(&'a MioSocket);

impl Read for Wire<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read_scratch(buf)
    }
}

impl Write for Wire<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Sends the session's pending records without waiting: true if none are left.
fn flush_session(socket: &MioSocket, session: &mut Connection) -> io::Result<bool> {
    while session.wants_write() {
        match session.write_tls(&mut Wire(socket)) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// What one read of records brought.
#[derive(Debug, PartialEq, Eq)]
enum Received {
    Records,
    /// Nothing now (`WouldBlock`).
    Nothing,
    /// The peer closed its side.
    Eof,
}

/// Reads the records the socket has and processes them. Alerts and handshake messages
/// the records call for are sent at once if the kernel takes them.
fn receive(socket: &MioSocket, session: &mut Connection) -> io::Result<Received> {
    let received = loop {
        match session.read_tls(&mut Wire(socket)) {
            Ok(0) => break Received::Eof,
            Ok(_) => break Received::Records,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Received::Nothing),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    };
    let processed = session.process_new_packets();
    let _ = flush_session(socket, session);
    processed.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    Ok(received)
}

impl TlsSocket {
    pub fn new(socket: MioSocket, session: impl Into<Connection>) -> Self {
        TlsSocket {
            socket,
            session: Mutex::new(session.into()),
        }
    }

    pub fn socket(&self) -> &MioSocket {
        &self.socket
    }

    pub fn socket_mut(&mut self) -> &mut MioSocket {
        &mut self.socket
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.session.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Carries the handshake on as far as the socket allows: true once it is done and
    /// its last records are out. Call on every event until then.
    pub fn handshake(&self) -> io::Result<bool> {
        let mut session = self.lock();
        loop {
            if !flush_session(&self.socket, &mut session)? {
                return Ok(false);
            }
            if !session.is_handshaking() {
                return Ok(true);
            }
            match receive(&self.socket, &mut session)? {
                Received::Records => {}
                Received::Nothing => return Ok(false),
                Received::Eof => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the peer closed the connection during the handshake",
                    ))
                }
            }
        }
    }

    /// Decrypted bytes into `scratch`: `Ok(0)` at the end of the stream (with or
    /// without close_notify), `WouldBlock` when neither the session nor the socket has
    /// any now.
    pub fn read_plain(&self, scratch: &mut [u8]) -> io::Result<usize> {
        let mut session = self.lock();
        let mut eof = false;
        loop {
            match session.reader().read(scratch) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // A peer that closed without close_notify: a plain EOF to the caller.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            if eof {
                return Ok(0);
            }
            match receive(&self.socket, &mut session)? {
                Received::Records => {}
                Received::Nothing => return Err(io::ErrorKind::WouldBlock.into()),
                Received::Eof => eof = true,
            }
        }
    }

    /// Decrypted bytes into `buf`'s spare room (which the caller made non-empty). Never
    /// reports the socket drained with data: the session may hold more plaintext than
    /// there was room for, so the caller reads until `WouldBlock`.
    pub fn read_into(&self, buf: &mut BytesMut) -> io::Result<ReadOutcome> {
        let start = buf.len();
        let room = buf.capacity() - start;
        debug_assert!(room > 0);
        buf.resize(start + room, 0);
        let read = self.read_plain(&mut buf[start..]);
        buf.truncate(start + *read.as_ref().unwrap_or(&0));
        match read {
            Ok(0) => Ok(ReadOutcome::Eof),
            Ok(n) => Ok(ReadOutcome::Data { n, drained: false }),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(ReadOutcome::WouldBlock),
            Err(e) => Err(e),
        }
    }

    /// Encrypts what the session takes of `buf` and sends what the kernel takes of the
    /// records (`WouldBlock` while older records wait: no more plaintext until they
    /// are out).
    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        let mut session = self.lock();
        if !flush_session(&self.socket, &mut session)? {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = session.writer().write(buf)?;
        if n == 0 && !buf.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        flush_session(&self.socket, &mut session)?;
        Ok(n)
    }

    /// Sends records already encrypted but not yet taken by the kernel; true if none
    /// are left.
    pub fn flush(&self) -> io::Result<bool> {
        flush_session(&self.socket, &mut self.lock())
    }

    /// close_notify (as far as the kernel takes it), then FIN.
    pub fn shutdown_write(&self) {
        let mut session = self.lock();
        session.send_close_notify();
        let _ = flush_session(&self.socket, &mut session);
        self.socket.shutdown_write();
    }
}
