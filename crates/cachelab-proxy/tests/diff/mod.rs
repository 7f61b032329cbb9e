//! The differential fuzz's parts: connections that send each request followed by a
//! sync request and read everything up to the sync's reply, and for each protocol a
//! request generator (memcached text and meta: `gen`; RESP: `resp_gen`, with the
//! proxy's documented differences from Redis in `resp_rules`).

mod conn;
pub mod gen;
pub mod resp_frames;
pub mod resp_gen;
pub mod resp_rules;

use std::net::SocketAddr;

#[allow(unused_imports)] // the memcached fuzz reads answers one at a time, with the meta sync
pub use conn::{Answer, Sync, SyncedConn};

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
