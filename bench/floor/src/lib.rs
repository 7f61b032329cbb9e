//! The floor of CPU per request on this machine, for `make bench`: `cachelab-floor`, a
//! bare epoll proxy, and `cachelab-floor-load`, a bare closed-loop client. Each does
//! nothing but move requests and replies, so what it costs is what the kernel's
//! loopback TCP path and the wake-ups cost any program of its kind here. Not products.

pub mod frames;

use std::io::{self, ErrorKind, Read, Write};

/// Reads what `stream` holds now into `into`, through `scratch`; true when the peer has
/// closed. A read that returns less than it asked for has taken everything the socket
/// held, so the loop stops there instead of reading again for `EAGAIN` (one system call
/// per event saved, as tokio does). That is safe with edge-triggered epoll on Linux,
/// because every arrival of data on a TCP socket raises a new edge.
pub fn read_available(
    stream: &mut impl Read,
    scratch: &mut [u8],
    into: &mut Vec<u8>,
) -> io::Result<bool> {
    loop {
        match stream.read(scratch) {
            Ok(0) => return Ok(true),
            Ok(n) => {
                into.extend_from_slice(&scratch[..n]);
                if n < scratch.len() {
                    return Ok(false);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Writes as much of `bytes` as the socket takes now; how much that was.
pub fn write_some(stream: &mut impl Write, bytes: &[u8]) -> io::Result<usize> {
    let mut at = 0;
    while at < bytes.len() {
        match stream.write(&bytes[at..]) {
            Ok(n) => at += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(at)
}
