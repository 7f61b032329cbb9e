//! cachelab-wirecap: the ground truth of `make bench`'s wire-time comparison. Captures on
//! the loopback device the memcached exchanges with one server port until its standard
//! input closes, then prints one JSON object: the number of exchanges, the frames the
//! kernel dropped, and the wire time's (request's last byte captured to the reply's last
//! byte captured) p50 and p99 in microseconds. Needs root (CAP_NET_RAW).
//!
//!     cachelab-wirecap PORT    # prints "ready" once capturing

use std::io::{Read, Write};
use std::process::ExitCode;

use cachelab_testkit::capture::Capture;
use cachelab_testkit::wire::{exchanges, quantile};

fn main() -> ExitCode {
    let Some(port) = std::env::args().nth(1).and_then(|p| p.parse::<u16>().ok()) else {
        eprintln!("usage: cachelab-wirecap PORT (then close standard input to stop)");
        return ExitCode::from(2);
    };
    let capture = match Capture::start(port) {
        Ok(capture) => capture,
        Err(e) => {
            eprintln!("cachelab-wirecap: cannot capture on lo: {e}");
            return ExitCode::from(1);
        }
    };
    println!("ready");
    let _ = std::io::stdout().flush();
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    let captured = match capture.stop() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cachelab-wirecap: the capture failed: {e}");
            return ExitCode::from(1);
        }
    };
    let found = match exchanges(&captured.segments) {
        Ok(found) => found,
        Err(e) => {
            eprintln!("cachelab-wirecap: cannot pair requests and replies: {e:?}");
            return ExitCode::from(1);
        }
    };
    if std::env::var_os("CACHELAB_DEBUG").is_some() {
        for e in &found {
            eprintln!("C {} {}", e.sent_ns, e.answered_ns);
        }
    }
    let mut wire_ns: Vec<u64> = found.iter().map(|e| e.wire_ns()).collect();
    let us = |q: f64, v: &mut [u64]| quantile(v, q).map(|ns| ns as f64 / 1000.0);
    let out = serde_json::json!({
        "exchanges": found.len(),
        "drops": captured.drops,
        "wire_us": {"p50": us(0.5, &mut wire_ns), "p99": us(0.99, &mut wire_ns)},
    });
    println!("{out}");
    ExitCode::SUCCESS
}
