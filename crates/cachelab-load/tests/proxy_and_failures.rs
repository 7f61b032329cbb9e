//! Through the cachelab middleware, and the ways a run can go wrong: a refused
//! connection, a server that goes away, a server that stops answering.

mod common;

use std::net::TcpListener;
use std::time::Duration;

use common::*;

#[test]
fn a_run_through_the_middleware_has_no_errors() {
    let servers = start_servers(2);
    let proxy = Proxy::start(
        proxy_binary().to_str().unwrap(),
        &[&servers[0], &servers[1]],
        &["-t", "4"],
    );
    let keys = "--key-maximum=499";
    load(
        proxy.addr,
        &[
            "-P",
            "memcache_text",
            "-t",
            "1",
            "-c",
            "4",
            keys,
            "--populate",
        ],
    )
    .ok();
    // Writes were replicated to both servers.
    assert_eq!(servers[0].stat("curr_items"), 500);
    assert_eq!(servers[1].stat("curr_items"), 500);
    let run = load(
        proxy.addr,
        &[
            "-P",
            "memcache_text",
            "-t",
            "2",
            "-c",
            "4",
            keys,
            "--test-time=1",
            "--ratio=1:10",
            "--multiget-keys=3",
        ],
    );
    let report = run.ok();
    assert_eq!(u(report, "/totals/errors"), 0);
    assert_eq!(u(report, "/totals/connection_errors"), 0);
    assert_eq!(u(report, "/summary/multiget/misses"), 0);
    assert!(u(report, "/summary/multiget/ops") > 100);
}

#[test]
fn a_refused_connection_fails_the_run_with_a_clear_message() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let run = load(
        port,
        &["-P", "memcache_text", "-t", "2", "-c", "2", "--test-time=1"],
    );
    assert_eq!(run.code, Some(1));
    assert!(
        run.stderr.contains("cannot connect to 127.0.0.1:"),
        "{}",
        run.stderr
    );
    // One line, the cause said once.
    assert_eq!(run.stderr.matches("refused").count(), 1, "{}", run.stderr);
    assert_eq!(run.stderr.trim_end().lines().count(), 1, "{}", run.stderr);
    assert!(run.report.is_none());
}

#[test]
fn bad_options_exit_2_naming_the_option() {
    let run = load("127.0.0.1:1".parse().unwrap(), &["--ratio=0:0"]);
    assert_eq!(run.code, Some(2));
    assert!(run.stderr.contains("--ratio"), "{}", run.stderr);
}

#[test]
fn a_server_that_goes_away_is_counted_and_the_test_time_is_honoured() {
    let mut server = Memcached::start();
    let addr = server.addr;
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        server.stop();
        server
    });
    let run = load(
        addr,
        &[
            "-P",
            "memcache_text",
            "-t",
            "1",
            "-c",
            "3",
            "--test-time=2",
            "--ratio=1:1",
        ],
    );
    let _server = killer.join().unwrap();
    let report = run.ok();
    assert!(u(report, "/totals/completed") > 0);
    assert!(
        u(report, "/totals/connection_errors") >= 3,
        "every connection broke"
    );
    assert!(
        run.elapsed < Duration::from_secs(6),
        "ran {:?} for a 2 s test",
        run.elapsed
    );
    assert!(run.stderr.contains("connection errors"), "{}", run.stderr);
}

#[test]
fn a_server_that_stops_answering_times_out_without_hanging() {
    // Accepts connections but never reads or answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let _hold = std::thread::spawn(move || {
        let streams: Vec<_> = listener.incoming().take(2).collect();
        std::thread::sleep(Duration::from_secs(10));
        drop(streams);
    });
    let run = load(
        addr,
        &[
            "-P",
            "memcache_text",
            "-t",
            "1",
            "-c",
            "2",
            "--requests=5",
            "--reply-timeout=0.5",
        ],
    );
    assert_eq!(run.code, Some(1), "nothing was answered: {}", run.stderr);
    assert!(
        run.stderr.contains("no request was answered"),
        "{}",
        run.stderr
    );
    assert!(run.elapsed < Duration::from_secs(8), "{:?}", run.elapsed);
    let report = run.report.expect("the report is still written");
    // Each timed-out request closes its connection; the next request goes on a new one
    // (the kernel still completes the handshakes) and times out in turn: 2 x 5 timeouts.
    assert_eq!(u(&report, "/totals/timeouts"), 10);
}
