//! The differential fuzz's parts: a request generator, and a connection that sends one
//! request followed by a sync request and reads everything up to the sync's reply.

pub mod gen;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long one request may take to be answered before the exchange gives up.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(3);

/// A connection whose replies are read request by request: after each request it sends
/// `mg __cachelab_sync O<n>` (a key the generator never uses), whose reply `EN O<n>` is
/// unique, so whatever came before it answers the request, however many replies that
/// was (none for noreply, two when a data block was read as a command).
pub struct SyncedConn {
    stream: TcpStream,
    buf: Vec<u8>,
    next_sync: u64,
}

/// What one request got: the bytes before the sync reply, and whether the sync came.
#[derive(Debug, PartialEq, Eq)]
pub struct Answer {
    pub bytes: Vec<u8>,
    pub synced: bool,
}

impl SyncedConn {
    pub fn connect(addr: SocketAddr, first_sync: u64) -> SyncedConn {
        let stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        SyncedConn {
            stream,
            buf: Vec::new(),
            next_sync: first_sync,
        }
    }

    pub fn exchange(&mut self, request: &[u8]) -> Answer {
        let sync = self.next_sync;
        self.next_sync += 1;
        let mut wire = request.to_vec();
        wire.extend(format!("mg __cachelab_sync O{sync}\r\n").as_bytes());
        self.stream.write_all(&wire).unwrap();
        let marker = format!(" O{sync}\r\n");
        let deadline = Instant::now() + EXCHANGE_TIMEOUT;
        loop {
            if let Some(end) = find(&self.buf, marker.as_bytes()) {
                let line_start = self.buf[..end]
                    .iter()
                    .rposition(|b| *b == b'\n')
                    .map_or(0, |i| i + 1);
                let bytes = self.buf[..line_start].to_vec();
                self.buf.drain(..end + marker.len());
                return Answer {
                    bytes,
                    synced: true,
                };
            }
            if Instant::now() > deadline {
                return Answer {
                    bytes: std::mem::take(&mut self.buf),
                    synced: false,
                };
            }
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    return Answer {
                        bytes: std::mem::take(&mut self.buf),
                        synced: false,
                    }
                }
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(_) => {} // read timeout: look again until the deadline
            }
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Replies as compared: `me`'s clock fields (`exp=`, `la=`) masked, and its `fetch=`:
/// memcached looks an item up before refusing some requests (an `mg` whose opaque is
/// too long), which the proxy refuses without asking the server.
pub fn normalize(reply: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(reply.len());
    for line in reply.split_inclusive(|b| *b == b'\n') {
        if line.starts_with(b"ME ") {
            let text = String::from_utf8_lossy(line);
            let masked: Vec<String> = text
                .split(' ')
                .map(|field| match field.split_once('=') {
                    Some((name @ ("exp" | "la" | "fetch"), _)) => format!("{name}=#"),
                    _ => field.to_string(),
                })
                .collect();
            out.extend(masked.join(" ").as_bytes());
        } else {
            out.extend_from_slice(line);
        }
    }
    out
}

/// A stat of the proxy's (or memcached's) `stats`, read over a fresh connection.
pub fn stat(addr: SocketAddr, name: &str) -> u64 {
    let mut conn = SyncedConn::connect(addr, 0);
    let answer = conn.exchange(b"stats\r\n");
    let text = String::from_utf8_lossy(&answer.bytes).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("STAT {name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no stat {name} in {text}"))
}
