//! A connection of the event loop, plain or TLS ([`TlsSocket`]), with one set of
//! nonblocking calls for the clients (owned by their `ClientConn`) and the workers'
//! server links. It sits beside `mio_socket`, below both.

pub mod tls;

use std::io;
use std::os::fd::{AsRawFd, RawFd};

use bytes::BytesMut;
use mio::event::Source;
use mio::{Interest, Registry, Token};

use crate::mio_socket::{MioSocket, ReadOutcome};
use tls::TlsSocket;

pub enum LoopStream {
    Plain(MioSocket),
    Tls(Box<TlsSocket>),
}

impl LoopStream {
    pub fn socket(&self) -> &MioSocket {
        match self {
            LoopStream::Plain(s) => s,
            LoopStream::Tls(t) => t.socket(),
        }
    }

    fn socket_mut(&mut self) -> &mut MioSocket {
        match self {
            LoopStream::Plain(s) => s,
            LoopStream::Tls(t) => t.socket_mut(),
        }
    }

    pub fn is_tls(&self) -> bool {
        matches!(self, LoopStream::Tls(_))
    }

    /// Carries a TLS handshake on: true once done (at once without TLS).
    pub fn handshake(&self) -> io::Result<bool> {
        match self {
            LoopStream::Plain(_) => Ok(true),
            LoopStream::Tls(t) => t.handshake(),
        }
    }

    /// What the peer sent (decrypted) into `buf`'s spare room.
    pub fn read_into(&self, buf: &mut BytesMut) -> io::Result<ReadOutcome> {
        match self {
            LoopStream::Plain(s) => s.read_into(buf),
            LoopStream::Tls(t) => t.read_into(buf),
        }
    }

    /// What the peer sent (decrypted) into a scratch buffer: `Ok(0)` at its end.
    pub fn read_scratch(&self, scratch: &mut [u8]) -> io::Result<usize> {
        match self {
            LoopStream::Plain(s) => s.read_scratch(scratch),
            LoopStream::Tls(t) => t.read_plain(scratch),
        }
    }

    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            LoopStream::Plain(s) => s.write(buf),
            LoopStream::Tls(t) => t.write(buf),
        }
    }

    /// Writes `out` from `offset` on, as far as the kernel takes it, then the TLS
    /// records not yet taken (a write counts as done only once they are out: nothing
    /// else would send them). Ok(true) when everything is out, Ok(false) when the socket
    /// is full.
    pub fn write_from(&self, out: &[u8], offset: &mut usize) -> io::Result<bool> {
        while *offset < out.len() {
            match self.write(&out[*offset..]) {
                Ok(n) => *offset += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.flush()
    }

    /// Sends TLS records the kernel did not take yet; true if none are left (always,
    /// without TLS).
    pub fn flush(&self) -> io::Result<bool> {
        match self {
            LoopStream::Plain(_) => Ok(true),
            LoopStream::Tls(t) => t.flush(),
        }
    }

    /// Ends the sending side after what was written (TLS: close_notify first).
    pub fn shutdown_write(&self) {
        match self {
            LoopStream::Plain(s) => s.shutdown_write(),
            LoopStream::Tls(t) => t.shutdown_write(),
        }
    }
}

impl AsRawFd for LoopStream {
    fn as_raw_fd(&self) -> RawFd {
        self.socket().as_raw_fd()
    }
}

impl Source for LoopStream {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        self.socket_mut().register(r, t, i)
    }

    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        self.socket_mut().reregister(r, t, i)
    }

    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        self.socket_mut().deregister(r)
    }
}
