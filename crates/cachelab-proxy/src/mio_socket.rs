//! A nonblocking stream socket (TCP or Unix) as the event loop (`evloop`) uses
//! it: reads go straight into a buffer's spare room, writes take what the kernel takes,
//! and readiness comes from the loop's `mio::Poll`, never from a runtime.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::fd::{AsRawFd, RawFd};

use bytes::BytesMut;
use mio::event::Source;
use mio::net::{TcpStream, UnixStream};
use mio::{Interest, Registry, Token};

#[derive(Debug)]
pub enum MioSocket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

/// What a read brought.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadOutcome {
    /// `n` bytes; fewer than there was room for means the socket is drained for now
    /// (edge-triggered readiness fires again when more arrives).
    Data { n: usize, drained: bool },
    /// Nothing to read now.
    WouldBlock,
    /// The peer closed its side.
    Eof,
}

impl MioSocket {
    /// Reads what is there into `buf`'s spare room (which the caller made non-empty).
    pub fn read_into(&self, buf: &mut BytesMut) -> io::Result<ReadOutcome> {
        let spare = buf.spare_capacity_mut();
        let room = spare.len();
        debug_assert!(room > 0);
        // SAFETY: the descriptor is open for `self`'s lifetime, and `read` writes at
        // most `room` bytes into the spare capacity, which `set_len` then covers only
        // as far as the kernel wrote.
        let n = unsafe { libc::read(self.as_raw_fd(), spare.as_mut_ptr().cast(), room) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock => Ok(ReadOutcome::WouldBlock),
                io::ErrorKind::Interrupted => self.read_into(buf),
                _ => Err(e),
            };
        }
        let n = n as usize;
        if n == 0 {
            return Ok(ReadOutcome::Eof);
        }
        // SAFETY: the kernel initialised the first `n` bytes of the spare room.
        unsafe { buf.set_len(buf.len() + n) };
        Ok(ReadOutcome::Data {
            n,
            drained: n < room,
        })
    }

    /// Reads into a scratch buffer (for input that is dropped).
    pub fn read_scratch(&self, scratch: &mut [u8]) -> io::Result<usize> {
        match self {
            MioSocket::Tcp(s) => (&*s).read(scratch),
            MioSocket::Unix(s) => (&*s).read(scratch),
        }
    }

    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            MioSocket::Tcp(s) => (&*s).write(buf),
            MioSocket::Unix(s) => (&*s).write(buf),
        }
    }

    /// Ends the sending side after what was written.
    pub fn shutdown_write(&self) {
        let _ = match self {
            MioSocket::Tcp(s) => s.shutdown(Shutdown::Write),
            MioSocket::Unix(s) => s.shutdown(Shutdown::Write),
        };
    }

    /// A pending connect's outcome: Ok once established, the error if it failed
    /// (`WouldBlock`-free: call on writable readiness).
    pub fn connect_result(&self) -> io::Result<()> {
        let error = match self {
            MioSocket::Tcp(s) => s.take_error()?,
            MioSocket::Unix(s) => s.take_error()?,
        };
        if let Some(e) = error {
            return Err(e);
        }
        match self {
            MioSocket::Tcp(s) => s.peer_addr().map(drop),
            MioSocket::Unix(s) => s.peer_addr().map(drop),
        }
    }
}

impl AsRawFd for MioSocket {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            MioSocket::Tcp(s) => s.as_raw_fd(),
            MioSocket::Unix(s) => s.as_raw_fd(),
        }
    }
}

impl Source for MioSocket {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            MioSocket::Tcp(s) => s.register(r, t, i),
            MioSocket::Unix(s) => s.register(r, t, i),
        }
    }

    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            MioSocket::Tcp(s) => s.reregister(r, t, i),
            MioSocket::Unix(s) => s.reregister(r, t, i),
        }
    }

    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        match self {
            MioSocket::Tcp(s) => s.deregister(r),
            MioSocket::Unix(s) => s.deregister(r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fill_the_spare_room_and_report_a_drained_socket_and_eof() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        let a = MioSocket::Unix(UnixStream::from_std(a));
        let b = MioSocket::Unix(UnixStream::from_std(b));
        let mut buf = BytesMut::with_capacity(64);
        assert_eq!(a.read_into(&mut buf).unwrap(), ReadOutcome::WouldBlock);
        assert_eq!(b.write(b"hello").unwrap(), 5);
        assert_eq!(
            a.read_into(&mut buf).unwrap(),
            ReadOutcome::Data {
                n: 5,
                drained: true
            }
        );
        assert_eq!(&buf[..], b"hello");
        b.shutdown_write();
        assert_eq!(a.read_into(&mut buf).unwrap(), ReadOutcome::Eof);
    }
}
