//! A connection whose replies are read request by request: after each request it sends a
//! sync request whose reply is unique on the connection, so whatever came before that
//! reply answers the request, however many replies that was (none for memcached's
//! noreply or an empty RESP command, two when a data block was read as a command).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long one request may take to be answered before the exchange gives up.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(3);

/// The sync request of each protocol: a command the generators never send, answered
/// with its own number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sync {
    /// `mg __cachelab_sync O<n>`: `EN O<n>` (a miss, the opaque echoed).
    Meta,
    /// `ECHO __cachelab_sync_<n>` as an array: the bulk string back. Through the proxy it
    /// is answered by the proxy itself, after every reply the connection was owed.
    Resp,
}

impl Sync {
    fn request(self, n: u64) -> Vec<u8> {
        match self {
            Sync::Meta => format!("mg __cachelab_sync O{n}\r\n").into_bytes(),
            Sync::Resp => {
                let word = format!("__cachelab_sync_{n}");
                format!("*2\r\n$4\r\nECHO\r\n${}\r\n{word}\r\n", word.len()).into_bytes()
            }
        }
    }

    /// Where the sync reply starts in `buf` (the answer ends there) and where it ends.
    fn locate(self, buf: &[u8], n: u64) -> Option<(usize, usize)> {
        match self {
            Sync::Meta => {
                let marker = format!(" O{n}\r\n");
                let end = find(buf, marker.as_bytes())?;
                let line_start = buf[..end]
                    .iter()
                    .rposition(|b| *b == b'\n')
                    .map_or(0, |i| i + 1);
                Some((line_start, end + marker.len()))
            }
            Sync::Resp => {
                let word = format!("__cachelab_sync_{n}");
                let reply = format!("${}\r\n{word}\r\n", word.len());
                let start = find(buf, reply.as_bytes())?;
                Some((start, start + reply.len()))
            }
        }
    }
}

/// One connection's stream of requests, each followed by its sync request.
pub struct SyncedConn {
    stream: TcpStream,
    sync: Sync,
    buf: Vec<u8>,
    /// The sync number of the next request sent, and of the next answer read.
    next_sent: u64,
    next_read: u64,
    /// The peer closed the connection (or reset it): nothing more will come.
    closed: bool,
    /// The sync number of a request sent with `send_last`, whose answer is all that
    /// comes until the peer closes.
    last_sent: Option<u64>,
}

/// What one request got: the bytes before the sync reply, and whether the sync came
/// (if not, the bytes are all that came before the peer closed).
#[derive(Debug, PartialEq, Eq)]
pub struct Answer {
    pub bytes: Vec<u8>,
    pub synced: bool,
}

impl SyncedConn {
    /// A memcached connection (the meta sync).
    pub fn connect(addr: SocketAddr, first_sync: u64) -> SyncedConn {
        SyncedConn::with_sync(addr, first_sync, Sync::Meta)
    }

    pub fn with_sync(addr: SocketAddr, first_sync: u64, sync: Sync) -> SyncedConn {
        let stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        SyncedConn {
            stream,
            sync,
            buf: Vec::new(),
            next_sent: first_sync,
            next_read: first_sync,
            closed: false,
            last_sent: None,
        }
    }

    /// Sends one request and reads its answer.
    pub fn exchange(&mut self, request: &[u8]) -> Answer {
        self.send(request);
        self.receive()
    }

    /// Sends `request` and its sync request without reading (a pipelined burst).
    pub fn send(&mut self, request: &[u8]) {
        let mut wire = request.to_vec();
        wire.extend(self.sync.request(self.next_sent));
        self.next_sent += 1;
        // A peer that closed after an earlier request of the burst refuses the rest.
        let _ = self.stream.write_all(&wire);
    }

    /// The answer to the oldest request sent and not yet read. When no sync comes
    /// within the timeout, the connection's writing is ended and what came until the
    /// peer closed is the answer (a request that left the server waiting for more).
    pub fn receive(&mut self) -> Answer {
        let sync = self.next_read;
        self.next_read += 1;
        if self.last_sent == Some(sync) {
            self.read_to_end();
            return Answer {
                bytes: std::mem::take(&mut self.buf),
                synced: false,
            };
        }
        let deadline = Instant::now() + EXCHANGE_TIMEOUT;
        loop {
            if let Some((start, end)) = self.sync.locate(&self.buf, sync) {
                let bytes = self.buf[..start].to_vec();
                self.buf.drain(..end);
                return Answer {
                    bytes,
                    synced: true,
                };
            }
            if self.closed {
                return Answer {
                    bytes: std::mem::take(&mut self.buf),
                    synced: false,
                };
            }
            if Instant::now() > deadline {
                let _ = self.stream.shutdown(Shutdown::Write);
                self.read_to_end();
                continue;
            }
            self.read_some();
        }
    }

    /// Sends `request` without a sync and ends the connection's writing (an unfinished
    /// frame, or one that would swallow a sync); its answer is what comes until the peer
    /// closes.
    pub fn send_last(&mut self, request: &[u8]) {
        let _ = self.stream.write_all(request);
        let _ = self.stream.shutdown(Shutdown::Write);
        self.last_sent = Some(self.next_sent);
        self.next_sent += 1;
    }

    /// Whether a request sent has not been answered yet.
    pub fn owes(&self) -> bool {
        self.next_read < self.next_sent
    }

    /// Whether the peer has closed the connection (a new one is needed).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    fn read_some(&mut self) {
        let mut chunk = [0u8; 65536];
        match self.stream.read(&mut chunk) {
            Ok(0) => self.closed = true,
            Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => self.closed = true, // reset: written after the peer closed
        }
    }

    /// Reads until the peer closes, for at most the exchange timeout.
    fn read_to_end(&mut self) {
        let deadline = Instant::now() + EXCHANGE_TIMEOUT;
        while !self.closed && Instant::now() < deadline {
            self.read_some();
        }
        self.closed = true;
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
