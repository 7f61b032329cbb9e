//! A byte stream over a nonblocking socket, plain or TLS, with one set of calls for
//! both: the event loops read when the socket is readable and write until it is not,
//! and never learn which transport is under them. No runtime and no waiting: every call
//! returns `WouldBlock` when it cannot go on, and the caller decides when to call again.
//!
//! The socket is any `Read + Write` that does not block (a std or mio TCP or Unix
//! stream, or a tokio one behind `try_read`/`try_write`); TLS is rustls's sans-I/O
//! session driven by the functions of [`session`], which owners that keep the session
//! and the socket apart use directly.

pub mod session;

use std::io::{self, Read, Write};
use std::net::{Shutdown as How, TcpStream};
use std::os::unix::net::UnixStream;

use rustls::Connection;

/// A socket whose sending side can be ended (FIN) while it still reads.
pub trait Shutdown {
    fn shutdown_write(&self) -> io::Result<()>;
}

impl Shutdown for TcpStream {
    fn shutdown_write(&self) -> io::Result<()> {
        self.shutdown(How::Write)
    }
}

impl Shutdown for UnixStream {
    fn shutdown_write(&self) -> io::Result<()> {
        self.shutdown(How::Write)
    }
}

/// A socket and the TLS session over it.
#[derive(Debug)]
pub struct TlsStream<S> {
    socket: S,
    session: Connection,
}

/// A connection's bytes, plain or TLS.
#[derive(Debug)]
pub enum Stream<S> {
    Plain(S),
    Tls(Box<TlsStream<S>>),
}

impl<S: Read + Write> Stream<S> {
    /// TLS over `socket`: a `ClientConnection` to a server, a `ServerConnection` for a
    /// client accepted. The handshake is carried on by [`Stream::handshake`].
    pub fn tls(socket: S, session: impl Into<Connection>) -> Self {
        Stream::Tls(Box::new(TlsStream {
            socket,
            session: session.into(),
        }))
    }

    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }

    pub fn socket(&self) -> &S {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => &t.socket,
        }
    }

    pub fn socket_mut(&mut self) -> &mut S {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => &mut t.socket,
        }
    }

    /// The TLS session (the version and cipher suite negotiated, the peer's
    /// certificates), if any.
    pub fn session(&self) -> Option<&Connection> {
        match self {
            Stream::Plain(_) => None,
            Stream::Tls(t) => Some(&t.session),
        }
    }

    /// Carries a TLS handshake on: true once done (at once without TLS).
    pub fn handshake(&mut self) -> io::Result<bool> {
        match self {
            Stream::Plain(_) => Ok(true),
            Stream::Tls(t) => session::handshake(&mut t.session, &mut t.socket),
        }
    }

    /// Sends TLS records the kernel did not take yet: true if none are left (always,
    /// without TLS).
    pub fn flush_records(&mut self) -> io::Result<bool> {
        match self {
            Stream::Plain(_) => Ok(true),
            Stream::Tls(t) => session::flush(&mut t.session, &mut t.socket),
        }
    }

    /// Ends the sending side after what was written (TLS: close_notify first).
    pub fn shutdown_write(&mut self) -> io::Result<()>
    where
        S: Shutdown,
    {
        if let Stream::Tls(t) = self {
            session::close_notify(&mut t.session, &mut t.socket);
        }
        self.socket().shutdown_write()
    }
}

/// Decrypted bytes (with TLS): `Ok(0)` at the end of the stream, `WouldBlock` when
/// there are none now.
impl<S: Read + Write> Read for Stream<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(t) => session::read(&mut t.session, &mut t.socket, buf),
        }
    }
}

/// With TLS, `write` takes no more plaintext while older records wait (`WouldBlock`),
/// and `flush` is `WouldBlock` until they are all out.
impl<S: Read + Write> Write for Stream<S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(t) => session::write(&mut t.session, &mut t.socket, buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.flush_records()? {
            true => self.socket_mut().flush(),
            false => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

#[cfg(test)]
mod tests;
