//! Fault injection against real memcached: a stalled server, a server killed and
//! restarted under load, a server restarted while the proxy is idle. Every phase is
//! bounded in time; the load comes from a few blocking client threads.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{start_servers, values_reply, Memcached};

/// What the load threads saw: completion times of good replies, and bad replies.
#[derive(Default)]
struct Tally {
    done: Mutex<Vec<Instant>>,
    /// Reads answered with an error line (a miss is not an error).
    failed_reads: AtomicU64,
    missed_reads: AtomicU64,
    failed_writes: AtomicU64,
    /// Writes that failed after `writes_must_succeed` was set.
    late_failed_writes: AtomicU64,
    writes_must_succeed: AtomicBool,
}

impl Tally {
    fn completed(&self) -> usize {
        self.done.lock().unwrap().len()
    }

    /// Waits (bounded) until `more` requests beyond the `from`th have completed.
    fn wait_for(&self, from: usize, more: usize) {
        let done = common::wait_until(Duration::from_secs(20), || self.completed() >= from + more);
        assert!(
            done,
            "{} of {more} more requests completed",
            self.completed() - from
        );
    }

    fn between(&self, from: Instant, to: Instant) -> f64 {
        let done = self.done.lock().unwrap();
        let n = done.iter().filter(|t| **t >= from && **t < to).count();
        n as f64 / (to - from).as_secs_f64()
    }
}

/// `threads` clients, each alternating `writes_every`-th request as a set (0: reads only),
/// until `stop`.
fn load(
    proxy: &common::Proxy,
    threads: usize,
    writes_every: u64,
    tally: &Arc<Tally>,
    stop: &Arc<AtomicBool>,
) -> Vec<thread::JoinHandle<()>> {
    (0..threads)
        .map(|_| {
            let mut client = proxy.client();
            let (tally, stop) = (Arc::clone(tally), Arc::clone(stop));
            thread::spawn(move || {
                let expected = values_reply(&[("k", "v")]);
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    if writes_every > 0 && i.is_multiple_of(writes_every) {
                        let must = tally.writes_must_succeed.load(Ordering::Relaxed);
                        if client.set("k", "v") != "STORED\r\n" {
                            tally.failed_writes.fetch_add(1, Ordering::Relaxed);
                            if must {
                                tally.late_failed_writes.fetch_add(1, Ordering::Relaxed);
                            }
                            continue;
                        }
                    } else {
                        let reply = client.get(&["k"]);
                        if reply == "END\r\n" {
                            tally.missed_reads.fetch_add(1, Ordering::Relaxed);
                            continue;
                        } else if reply != expected {
                            tally.failed_reads.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                    }
                    tally.done.lock().unwrap().push(Instant::now());
                }
            })
        })
        .collect()
}

fn refs(servers: &[Memcached]) -> Vec<&Memcached> {
    servers.iter().collect()
}

#[test]
fn a_stalled_server_costs_one_timeout_not_the_whole_proxy() {
    let _serial = common::serial();
    let servers = start_servers(3);
    let proxy = common::Proxy::start(&refs(&servers), &["-t", "16", "--server-timeout", "500"]);
    assert_eq!(proxy.client().set("k", "v"), "STORED\r\n");
    let (tally, stop) = (Arc::new(Tally::default()), Arc::new(AtomicBool::new(false)));
    let threads = load(&proxy, 8, 0, &tally, &stop);
    // The phases are the measurement: a second of load before the stall, three
    // seconds of stall (six server timeouts).
    thread::sleep(Duration::from_secs(1));
    let stalled_at = Instant::now();
    servers[1].signal(libc::SIGSTOP);
    thread::sleep(Duration::from_secs(3));
    servers[1].signal(libc::SIGCONT);
    let resumed_at = Instant::now();
    tally.wait_for(tally.completed(), 500);
    stop.store(true, Ordering::Relaxed);
    threads.into_iter().for_each(|t| t.join().unwrap());

    let before = tally.between(stalled_at - Duration::from_secs(1), stalled_at);
    let during = tally.between(stalled_at, resumed_at);
    assert_eq!(
        tally.failed_reads.load(Ordering::Relaxed),
        0,
        "reads failed"
    );
    assert_eq!(
        tally.missed_reads.load(Ordering::Relaxed),
        0,
        "reads missed"
    );
    assert!(
        during >= 0.5 * before,
        "throughput during the stall {during:.0}/s, before {before:.0}/s"
    );
    let log = proxy.wait_for_log("server ejected", 1);
    assert_eq!(log.matches("server ejected:").count(), 1, "{log}");
}

#[test]
fn a_server_killed_and_restarted_under_load_costs_no_read_and_no_later_write() {
    let _serial = common::serial();
    let mut servers = start_servers(3);
    let proxy = common::Proxy::start(
        &refs(&servers),
        &["-t", "8", "--server-timeout", "500", "--backoff-max", "100"],
    );
    assert_eq!(proxy.client().set("k", "v"), "STORED\r\n");
    let (tally, stop) = (Arc::new(Tally::default()), Arc::new(AtomicBool::new(false)));
    let threads = load(&proxy, 4, 4, &tally, &stop);
    tally.wait_for(0, 500);
    servers[2].stop(); // SIGKILL
                       // Down until writes have seen it (they answer SERVER_ERROR) and reads went on.
    let down = tally.completed();
    assert!(
        common::wait_until(Duration::from_secs(10), || {
            tally.failed_writes.load(Ordering::Relaxed) > 0
        }),
        "no write failed while the server was down"
    );
    tally.wait_for(down, 200);
    proxy.wait_for_log("server ejected", 1);
    servers[2].restart();
    // The restarted server is empty: the proxy's next sets fill it. Once the probe has
    // seen it (within --backoff-max), every write must succeed again.
    proxy.wait_for_log("restored", 1);
    tally.writes_must_succeed.store(true, Ordering::Relaxed);
    // Enough load afterwards that every server has had writes again.
    tally.wait_for(tally.completed(), 2000);
    stop.store(true, Ordering::Relaxed);
    threads.into_iter().for_each(|t| t.join().unwrap());
    // Reads fail over while it is down; after the restart it is empty until the next
    // set, so a read there may miss, but none is an error.
    assert_eq!(
        tally.failed_reads.load(Ordering::Relaxed),
        0,
        "reads failed"
    );
    assert_eq!(tally.late_failed_writes.load(Ordering::Relaxed), 0);
    assert!(
        tally.failed_writes.load(Ordering::Relaxed) > 0,
        "writes while it was down answer SERVER_ERROR"
    );
}

#[test]
fn a_server_restarted_while_the_proxy_is_idle_costs_nothing() {
    let _serial = common::serial();
    let mut servers = start_servers(3);
    let proxy = common::Proxy::start(&refs(&servers), &["-t", "8"]);
    let mut client = proxy.client();
    for i in 0..50 {
        assert_eq!(client.set(&format!("k{i}"), "v"), "STORED\r\n");
    }
    servers[0].stop();
    servers[0].restart();
    // Every worker's idle connection to it closed; the proxy notices now, not later.
    proxy.wait_for_log("server closed the idle connection", 1);
    for i in 0..200 {
        assert_eq!(client.set(&format!("k{i}"), "v"), "STORED\r\n", "set {i}");
        assert_eq!(
            client.get(&[&format!("k{i}")]),
            values_reply(&[(&format!("k{i}"), "v")]),
            "get {i}"
        );
    }
    assert!(!proxy.log().contains("server ejected"), "{}", proxy.log());
}
