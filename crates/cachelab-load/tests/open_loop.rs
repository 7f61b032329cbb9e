//! Open loop: the achieved rate against a real memcached, and coordinated omission
//! against a tiny in-test server that stalls once for 200 ms.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use cachelab_protocol::{parse_request, Limits, ParseError, Request};
use cachelab_stats::LatencyHistogram;
use common::*;

const STALL: Duration = Duration::from_millis(200);

/// The tests in this file measure time: they run one at a time, so that a closed-loop run
/// at full speed does not take the CPU an open-loop run needs to keep its schedule.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A memcached-protocol server that answers at once (`END` to gets, `STORED` to sets),
/// except that when its `stall_after`-th request arrives it stops answering anything for
/// [`STALL`]: every request that arrives meanwhile waits until the stall ends.
struct StallServer {
    addr: SocketAddr,
}

struct StallState {
    requests: AtomicU64,
    stall_after: u64,
    stall_until: Mutex<Option<Instant>>,
}

impl StallServer {
    fn start(stall_after: u64) -> StallServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(StallState {
            requests: AtomicU64::new(0),
            stall_after,
            stall_until: Mutex::new(None),
        });
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let state = state.clone();
                thread::spawn(move || serve(stream, &state));
            }
        });
        StallServer { addr }
    }
}

fn serve(mut stream: TcpStream, state: &StallState) {
    stream.set_nodelay(true).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    loop {
        let n = match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut out = Vec::new();
        let mut used = 0;
        loop {
            match parse_request(&buf[used..], &Limits::default()) {
                Ok((request, len)) => {
                    used += len;
                    let count = state.requests.fetch_add(1, Ordering::SeqCst) + 1;
                    let mut stall = state.stall_until.lock().unwrap();
                    if count == state.stall_after {
                        *stall = Some(Instant::now() + STALL);
                    }
                    let until = *stall;
                    drop(stall);
                    if let Some(until) = until {
                        let now = Instant::now();
                        if now < until {
                            // Answer what is ready first, then hold this request.
                            if !out.is_empty() && stream.write_all(&out).is_err() {
                                return;
                            }
                            out.clear();
                            thread::sleep(until - now);
                        }
                    }
                    out.extend_from_slice(match request {
                        Request::Store(_) => b"STORED\r\n".as_slice(),
                        _ => b"END\r\n",
                    });
                }
                Err(ParseError::Incomplete) => break,
                Err(e) => panic!("stall server got a bad request: {e}"),
            }
        }
        buf.drain(..used);
        if stream.write_all(&out).is_err() {
            return;
        }
    }
}

fn histogram(report: &serde_json::Value) -> LatencyHistogram {
    LatencyHistogram::decode_base64(report["histograms"]["total"].as_str().unwrap()).unwrap()
}

#[test]
fn open_loop_achieves_the_target_rate_within_2_percent() {
    let _serial = exclusive();
    let server = Memcached::start();
    for (arrival, busy_poll) in [("fixed", "0"), ("poisson", "0"), ("poisson", "200")] {
        let run = load(
            server.addr,
            &[
                "-P",
                "memcache_text",
                "-t",
                "1",
                "-c",
                "4",
                "--key-maximum=999",
                "--test-time=2",
                "--rate=2000",
                &format!("--arrival={arrival}"),
                &format!("--busy-poll-us={busy_poll}"),
            ],
        );
        let report = run.ok();
        // busy-polling changes how the wait ends, not what is sent or when it is due
        assert_eq!(
            u(report, "/configuration/busy_poll_us").to_string(),
            busy_poll
        );
        let achieved = f(report, "/open_loop/achieved_rate");
        assert!(
            (achieved / 2000.0 - 1.0).abs() < 0.02,
            "{arrival}: achieved {achieved} ops/s"
        );
        assert_eq!(u(report, "/totals/errors"), 0);
        assert_eq!(u(report, "/totals/sent"), u(report, "/totals/completed"));
        // The send gaps it reports for the arrival check: one thread sending 2000/s
        // leaves gaps of 500 us on average, evenly spaced or exponential.
        let gaps: Vec<f64> = report["send_intervals_ns"]
            .as_array()
            .expect("open loop reports its send gaps")
            .iter()
            .map(|g| g.as_f64().unwrap())
            .collect();
        assert!(gaps.len() > 1000, "{arrival}: {} gaps", gaps.len());
        let mean_us = gaps.iter().sum::<f64>() / gaps.len() as f64 / 1000.0;
        assert!(
            (mean_us / 500.0 - 1.0).abs() < 0.1,
            "{arrival}: mean gap {mean_us} us"
        );
    }
}

#[test]
fn open_loop_counts_the_stall_against_every_request_scheduled_during_it() {
    let _serial = exclusive();
    // 1000 requests/s at fixed intervals; the stall starts at the 600th request.
    let server = StallServer::start(600);
    let run = load(
        server.addr,
        &[
            "-P",
            "memcache_text",
            "-t",
            "1",
            "-c",
            "2",
            "--test-time=2",
            "--rate=1000",
            "--arrival=fixed",
            "--ratio=0:1",
        ],
    );
    let report = run.ok();
    let h = histogram(report);
    // The requests scheduled in the stall's first 195 ms waited at least 5 ms: 1000/s x
    // 0.195 s = 195 of them. Fewer means the stall was charged only to the requests in
    // flight (coordinated omission: 2 here). A busy machine adds a few: the replies held
    // by the stall come back in a burst, and a scheduling hiccup of a few tens of ms
    // right after it delays the requests due then too (223 was seen on a loaded CI
    // machine). Far more would mean the schedule itself slipped for the rest of the run
    // (about 1,400 requests after the stall).
    let stalled = h.count_at_or_above(5_000);
    eprintln!("open loop: {stalled} requests waited 5 ms or more");
    assert!(
        (180..=300).contains(&stalled),
        "{stalled} requests waited 5 ms or more"
    );
    // The deep part of the stall is immune to such hiccups: the requests scheduled in
    // its first 100 ms waited at least 100 ms.
    let deep = h.count_at_or_above(100_000);
    assert!(
        (90..=150).contains(&deep),
        "{deep} requests waited 100 ms or more"
    );
    assert!(f(report, "/summary/total/latency_ms/max") >= 190.0);
    assert!(f(report, "/summary/total/latency_ms/p999") >= 150.0);
    assert!(f(report, "/summary/total/latency_ms/p99") >= 100.0);
}

#[test]
fn closed_loop_shows_the_stall_once_per_client() {
    let _serial = exclusive();
    let clients = 4;
    let server = StallServer::start(2000);
    let run = load(
        server.addr,
        &[
            "-P",
            "memcache_text",
            "-t",
            "1",
            "-c",
            &clients.to_string(),
            "--test-time=1.5",
            "--ratio=0:1",
        ],
    );
    let report = run.ok();
    let h = histogram(report);
    // Each client had one request outstanding when the stall began, and sent nothing
    // more until it was answered: the stall is seen exactly once per client.
    assert_eq!(h.count_at_or_above(100_000), clients);
    assert!(f(report, "/summary/total/latency_ms/max") >= 190.0);
    assert!(u(report, "/summary/total/ops") > 2000);
    assert!(
        f(report, "/summary/total/latency_ms/p99") < 100.0,
        "4 stalled requests of thousands stay out of p99"
    );
}

#[test]
fn an_open_loop_client_that_cannot_send_on_schedule_warns_loudly() {
    let _serial = exclusive();
    // A server that accepts but never reads: once the socket buffers are full, no request
    // can be written at its scheduled time.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let _hold = thread::spawn(move || {
        let stream = listener.accept();
        thread::sleep(Duration::from_secs(10));
        drop(stream);
    });
    let run = load(
        addr,
        &[
            "-P",
            "memcache_text",
            "-t",
            "1",
            "-c",
            "1",
            "--test-time=1",
            "--rate=20000",
            "--ratio=1:0",
            "-d",
            "10000",
        ],
    );
    let report = run.report.as_ref().expect("the report is written");
    assert_eq!(report["open_loop"]["fell_behind"], true);
    assert!(f(report, "/open_loop/achieved_rate") < 0.99 * f(report, "/open_loop/scheduled_rate"));
    assert!(run.stderr.contains("FELL BEHIND"), "{}", run.stderr);
}
