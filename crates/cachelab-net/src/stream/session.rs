//! TLS over a nonblocking socket with rustls's sans-I/O session: records are read from
//! the socket only when the caller says it may be readable, decrypted into the caller's
//! buffer, and encrypted records are handed to the kernel as far as it takes them; the
//! rest stay in the session until the socket is writable again.
//!
//! The functions take the session and the socket apart (any `Read + Write` that returns
//! `WouldBlock`: a std, mio or tokio socket behind `try_read`/`try_write`), so an owner
//! that keeps them apart (behind a lock, or a borrowed socket) uses them as they are;
//! [`super::TlsStream`] is the owner that keeps both.

use std::io::{self, Read, Write};

use rustls::Connection;

/// What one read of records brought.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    Records,
    /// Nothing now (`WouldBlock`).
    Nothing,
    /// The peer closed its side.
    Eof,
}

/// Sends the session's pending records without waiting: true if none are left.
pub fn flush(session: &mut Connection, socket: &mut impl Write) -> io::Result<bool> {
    while session.wants_write() {
        match session.write_tls(socket) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Reads the records the socket has and processes them. Alerts and handshake messages
/// the records call for are sent at once if the kernel takes them; a record rustls
/// refuses is `InvalidData` with rustls's error inside.
pub fn receive(session: &mut Connection, socket: &mut (impl Read + Write)) -> io::Result<Received> {
    let received = loop {
        match session.read_tls(socket) {
            Ok(0) => break Received::Eof,
            Ok(_) => break Received::Records,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Received::Nothing),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    };
    let processed = session.process_new_packets();
    let _ = flush(session, socket);
    processed.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    Ok(received)
}

/// Carries the handshake on as far as the socket allows: true once it is done and its
/// last records are out. Call on every readiness until then.
pub fn handshake(session: &mut Connection, socket: &mut (impl Read + Write)) -> io::Result<bool> {
    loop {
        if !flush(session, socket)? {
            return Ok(false);
        }
        if !session.is_handshaking() {
            return Ok(true);
        }
        match receive(session, socket)? {
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

/// Decrypted bytes into `buf`: `Ok(0)` at the end of the stream (with or without
/// close_notify), `WouldBlock` when neither the session nor the socket has any now.
pub fn read(
    session: &mut Connection,
    socket: &mut (impl Read + Write),
    buf: &mut [u8],
) -> io::Result<usize> {
    let mut eof = false;
    loop {
        match session.reader().read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            // A peer that closed without close_notify: a plain EOF to the caller.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
            Err(e) => return Err(e),
        }
        if eof {
            return Ok(0);
        }
        match receive(session, socket)? {
            Received::Records => {}
            Received::Nothing => return Err(io::ErrorKind::WouldBlock.into()),
            Received::Eof => eof = true,
        }
    }
}

/// Encrypts what the session takes of `buf` and sends what the kernel takes of the
/// records (`WouldBlock` while older records wait: no more plaintext until they are
/// out, so the session's buffer stays bounded).
pub fn write(session: &mut Connection, socket: &mut impl Write, buf: &[u8]) -> io::Result<usize> {
    if !flush(session, socket)? {
        return Err(io::ErrorKind::WouldBlock.into());
    }
    let n = session.writer().write(buf)?;
    if n == 0 && !buf.is_empty() {
        return Err(io::ErrorKind::WouldBlock.into());
    }
    flush(session, socket)?;
    Ok(n)
}

/// Queues close_notify and sends it as far as the kernel takes it; the caller ends the
/// socket's sending side after it.
pub fn close_notify(session: &mut Connection, socket: &mut impl Write) {
    session.send_close_notify();
    let _ = flush(session, socket);
}
