//! The workspace test harness, with this crate's binary filled in.

#![allow(dead_code)] // each test file uses a different part of the harness

pub use cachelab_testkit::*;

use std::thread;
use std::time::{Duration, Instant};

pub mod inproc;
pub mod resp;

#[allow(unused_imports)] // not every test file serves in process
pub use inproc::Proxy;

/// The binary, for tests whose subject is the process (its CPU time and memory, its
/// signals, its exit and its summary).
pub struct Spawned;

impl Spawned {
    pub fn start(servers: &[&Memcached], extra: &[&str]) -> cachelab_testkit::Proxy {
        cachelab_testkit::Proxy::start(env!("CARGO_BIN_EXE_cachelab-proxy"), servers, extra)
    }

    pub fn start_args(args: &[String]) -> cachelab_testkit::Proxy {
        cachelab_testkit::Proxy::start_args(env!("CARGO_BIN_EXE_cachelab-proxy"), args)
    }
}

/// A value of the proxy's `stats`, asked on `client` (a connection of its own counts in
/// `curr_connections`); panics if there is none.
pub fn stat_text(client: &mut Client, name: &str) -> String {
    let reply = client.request(b"stats\r\n", cachelab_protocol::Expect::Stats);
    let text = String::from_utf8(reply).unwrap();
    let prefix = format!("STAT {name} ");
    text.lines()
        .find_map(|l| Some(l.strip_prefix(&prefix)?.trim().to_owned()))
        .unwrap_or_else(|| panic!("no {name} in stats: {text}"))
}

/// A numeric value of the proxy's `stats` ([`stat_text`]).
pub fn stat_number(client: &mut Client, name: &str) -> u64 {
    stat_text(client, name)
        .parse()
        .unwrap_or_else(|_| panic!("{name} is not a number"))
}

/// Waits until `done` holds, asking again every few milliseconds for at most `within`;
/// false if it never did. For conditions only a poll can see (a server's counters, a
/// load thread's tally).
pub fn wait_until(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Values of many sizes (so that replies straddle the proxy's read buffer boundaries),
/// stored through `proxy`, then asked for in `rounds` rounds of pipelined `get`s, each
/// `get big<k>` followed by `extra_keys` (keys nobody stored): every reply must be the
/// value byte for byte.
pub fn large_values_come_back_whole(proxy: &Proxy, rounds: usize, extra_keys: &str) {
    use cachelab_protocol::{parse_reply, Expect};
    let mut setup = proxy.client();
    let sizes = [0usize, 1, 100, 4095, 4096, 16_000, 70_000, 300_000];
    for (i, size) in sizes.iter().enumerate() {
        let value = "x".repeat(*size);
        assert_eq!(setup.set(&format!("big{i}"), &value), "STORED\r\n");
    }
    let mut client = proxy.client();
    let mut batch = Vec::new();
    for round in 0..rounds {
        for i in 0..sizes.len() {
            let k = (i + round) % sizes.len();
            batch.extend(format!("get big{k}{extra_keys}\r\n").bytes());
        }
    }
    client.send(&batch);
    for round in 0..rounds {
        for i in 0..sizes.len() {
            let k = (i + round) % sizes.len();
            let reply = client.read_reply(Expect::Values);
            assert!(parse_reply(&reply, Expect::Values).is_ok());
            let want = values_reply(&[(&format!("big{k}"), &"x".repeat(sizes[k]))]);
            assert!(reply == want.as_bytes(), "round {round}, key big{k}");
        }
    }
}
