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
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[allow(unused_imports)] // the memcached fuzz reads answers one at a time, with the meta sync
pub use conn::{Answer, Sync, SyncedConn};

/// Which seeds a run takes, from the environment: `CACHELAB_DIFF_SECONDS` runs fresh
/// seeds (from the clock) for that long, stopping early at 5 failures (`make fuzz`);
/// without it a bounded number of seeds from 1 (`make test`); `CACHELAB_DIFF_SEED`
/// starts at that seed instead (to replay a failure).
pub struct Seeds {
    pub first: u64,
    seconds: Option<u64>,
    bounded: u64,
    pub started: Instant,
}

impl Seeds {
    pub fn from_env(bounded: u64) -> Seeds {
        let var = |name: &str| std::env::var(name).ok().and_then(|s| s.parse::<u64>().ok());
        let seconds = var("CACHELAB_DIFF_SECONDS");
        let first = match (var("CACHELAB_DIFF_SEED"), seconds) {
            (Some(seed), _) => seed,
            (None, Some(_)) => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs(),
            (None, None) => 1,
        };
        Seeds {
            first,
            seconds,
            bounded,
            started: Instant::now(),
        }
    }

    /// Whether the run is over after `done` seeds, `failed` of them failed.
    pub fn finished(&self, done: u64, failed: usize) -> bool {
        match self.seconds {
            Some(s) => self.started.elapsed() >= Duration::from_secs(s) || failed >= 5,
            None => done >= self.bounded,
        }
    }
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
