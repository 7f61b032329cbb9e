//! One server's socket of a client connection, and its buffers: the write buffer's
//! progress, the read buffer, and the kernel's timestamps. A connection to one server
//! has one wire; a sharded one (`--shard`) one per server, each the I/O of the engine's
//! lane of the same index.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::task::{Context, Poll};

use tokio::io::Interest;

use super::link::Link;
use super::stamping;
use crate::engine::Engine;
use crate::record::Recorder;
use crate::stamps::{assign_transmit, unwrap_key, Stamp};
use crate::timing::TimestampMode;

/// Read buffer size to start with; it grows for large multi-get replies.
const READ_BUFFER: usize = 64 * 1024;
/// Free space kept before each read, so a read is never tiny.
const MIN_READ_SPACE: usize = 16 * 1024;
/// Writes whose transmit stamps may wait on the error queue before it is drained. The
/// queue is charged to the socket's receive buffer: left to grow (a server that stalls
/// while requests go on being sent) it would shrink the window the server may send in.
const STAMPS_QUEUED_MAX: u32 = 16;

pub struct Wire {
    pub link: Link,
    /// The engine's lane this wire carries.
    lane: usize,
    /// The kernel stamps this socket.
    pub stamping: bool,
    fd: RawFd,
    /// Writes since the error queue was last drained.
    pub stamps_queued: u32,
    /// How much of the lane's write buffer went to the socket.
    pub written: usize,
    pub rbuf: Vec<u8>,
    pub rstart: usize,
    pub rend: usize,
}

/// What a wire is ready for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ready {
    Read(usize),
    Write(usize),
}

impl Wire {
    /// A new socket for `lane`; with `mode` kernel, the kernel is asked to stamp it (a
    /// plain TCP socket only, see [`Link::unstampable`]) and the outcome recorded.
    pub fn new(link: Link, lane: usize, mode: TimestampMode, recorder: &mut Recorder) -> Wire {
        let fd = link.plain_tcp().map_or(-1, AsRawFd::as_raw_fd);
        let mut stamping = false;
        if mode == TimestampMode::Kernel {
            let refused = match link.unstampable() {
                Some(why) => Some(why.to_string()),
                None => stamping::enable(fd)
                    .err()
                    .map(|e| format!("SO_TIMESTAMPING: {e}")),
            };
            stamping = refused.is_none();
            recorder.timing.connection(refused.as_deref());
        }
        Wire {
            link,
            lane,
            stamping,
            fd,
            stamps_queued: 0,
            written: 0,
            rbuf: vec![0; READ_BUFFER],
            rstart: 0,
            rend: 0,
        }
    }

    /// Hands `wbuf`'s unsent bytes (and, with TLS, encrypted bytes waiting) to the socket,
    /// as far as it takes them without blocking.
    pub fn send(&mut self, wbuf: &mut Vec<u8>, engine: &mut Engine) -> io::Result<()> {
        if self.written < wbuf.len() {
            match self.link.try_send(&wbuf[self.written..]) {
                Ok(n) => self.wrote(n, engine),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            if self.written == wbuf.len() {
                wbuf.clear();
                self.written = 0;
            }
        } else {
            self.link.flush()?;
        }
        Ok(())
    }

    /// `n` more bytes went to the socket in one write.
    fn wrote(&mut self, n: usize, engine: &mut Engine) {
        self.written += n;
        if n == 0 {
            return;
        }
        engine.wrote_on(self.lane, n);
        if self.stamping {
            self.stamps_queued += 1;
            if self.stamps_queued >= STAMPS_QUEUED_MAX {
                self.drain_transmit_stamps(engine);
            }
        }
    }

    /// Bytes of `wbuf` (or encrypted ones) still wait for the socket.
    pub fn wants_write(&self, wbuf: &[u8]) -> bool {
        self.written < wbuf.len() || self.link.wants_flush()
    }

    /// Reads the transmit stamps queued on the error queue and gives each to the requests
    /// its write carried. A stamp not there yet stays expected, so the next drain looks
    /// for it too.
    pub fn drain_transmit_stamps(&mut self, engine: &mut Engine) {
        let last = engine.composed(self.lane).saturating_sub(1);
        let pending = engine.pending_on_mut(self.lane);
        let read = stamping::drain_transmit_stamps(self.fd, self.stamps_queued, |key, stamp| {
            assign_transmit(pending.iter_mut(), unwrap_key(key, last), stamp);
        });
        self.stamps_queued = self.stamps_queued.saturating_sub(read as u32);
    }

    /// Reads what the socket has, with the kernel's receive stamp when it stamps:
    /// `Ok((0, _))` is the end of the stream.
    pub fn read(&mut self, engine: &Engine) -> io::Result<(usize, Stamp)> {
        if self.rbuf.len() - self.rend < MIN_READ_SPACE {
            self.make_read_space();
        }
        let mut want = self.rbuf.len() - self.rend;
        let read = if self.stamping && self.link.plain_tcp().is_some() {
            let fd = self.fd;
            want = self.stamped_read_len(fd, engine)?;
            let (rbuf, rend) = (&mut self.rbuf, self.rend);
            let tcp = self.link.plain_tcp().expect("a plain TCP socket");
            tcp.try_io(Interest::READABLE, || {
                stamping::recv(fd, &mut rbuf[rend..rend + want])
            })
        } else {
            self.link
                .try_recv(&mut self.rbuf[self.rend..])
                .map(|n| (n, Stamp::default()))
        }?;
        self.rend += read.0;
        if read.0 > 0 && read.0 < want {
            self.link.drained();
        }
        Ok(read)
    }

    /// How much to read with the kernel's receive stamp. A read's stamp is that of the
    /// last segment it took bytes from. In the open loop, where a second reply may be
    /// queued behind the first (more than one request outstanding), the queued bytes are
    /// peeked at and only the first reply is read, so its stamp is its own, not a later
    /// reply's. The closed loop reads all that is there: a pipeline's replies mostly
    /// arrive together, and reading them one by one would cost three system calls a reply.
    fn stamped_read_len(&mut self, fd: RawFd, engine: &Engine) -> io::Result<usize> {
        let mut want = self.rbuf.len() - self.rend;
        if engine.is_open_loop() && engine.pending_on(self.lane).len() > 1 {
            let (peeked, _) = match stamping::peek(fd, &mut self.rbuf[self.rend..]) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(want),
                other => other?,
            };
            if let Some(used) =
                engine.first_reply_len_on(self.lane, &self.rbuf[self.rstart..self.rend + peeked])
            {
                // rstart..rend holds only an incomplete reply: the first reply ends in
                // the peeked bytes.
                want = (self.rstart + used).saturating_sub(self.rend).max(1);
            }
        }
        Ok(want)
    }

    /// The read buffer's bytes not parsed yet.
    pub fn unparsed(&self) -> &[u8] {
        &self.rbuf[self.rstart..self.rend]
    }

    /// `used` bytes of the unparsed ones were parsed.
    pub fn consumed(&mut self, used: usize) {
        self.rstart += used;
        if self.rstart == self.rend {
            self.rstart = 0;
            self.rend = 0;
        }
    }

    fn make_read_space(&mut self) {
        if self.rstart > 0 {
            self.rbuf.copy_within(self.rstart..self.rend, 0);
            self.rend -= self.rstart;
            self.rstart = 0;
        }
        if self.rbuf.len() - self.rend < MIN_READ_SPACE {
            let grown = self.rbuf.len() * 2;
            self.rbuf.resize(grown, 0);
        }
    }
}

/// The first wire ready for something, looking from `from` round the list so that no
/// server's socket is starved by a busier one; writes are looked for only where
/// `wants_write` says bytes wait.
pub fn poll_ready(
    wires: &[Wire],
    wants_write: &[bool],
    from: usize,
    cx: &mut Context<'_>,
) -> Poll<io::Result<Ready>> {
    let n = wires.len();
    for step in 0..n {
        let i = (from + step) % n;
        if let Poll::Ready(r) = wires[i].link.poll_read_ready(cx) {
            return Poll::Ready(r.map(|()| Ready::Read(i)));
        }
        if wants_write[i] {
            if let Poll::Ready(r) = wires[i].link.poll_write_ready(cx) {
                return Poll::Ready(r.map(|()| Ready::Write(i)));
            }
        }
    }
    Poll::Pending
}
