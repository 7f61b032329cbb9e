//! Differential fuzz: seeded streams of text and meta commands, valid and mutated, sent
//! over several connections both to memcached directly and through the proxy (one
//! server, one worker, so every client shares one server connection). Every reply the
//! proxy gives a connection must be the one memcached gives that connection, byte for
//! byte; a reply that crossed to another connection, a server ejected by a client's
//! bytes, or a server connection closed out of step fails the test.
//!
//! `make test` runs a bounded number of seeds; `make fuzz` sets
//! `CACHELAB_DIFF_SECONDS` and runs fresh seeds for that long.

mod common;
#[allow(dead_code)] // the RESP fuzz uses the rest
mod diff;

use std::net::SocketAddr;

use common::{Memcached, Proxy};
use diff::gen::Gen;
use diff::{normalize, stat, Seeds, SyncedConn};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const CONNECTIONS: usize = 4;
const REQUESTS_PER_SEED: usize = 400;
const BOUNDED_SEEDS: u64 = 6;

/// Runs one seed's stream; returns the requests sent, or the first difference.
fn run_seed(seed: u64, direct: SocketAddr, proxied: SocketAddr) -> Result<usize, String> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut gen = Gen::new(Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x5eed));
    let sync_base = 1_000_000 * (seed % 1000 + 1);
    let mut direct_conns: Vec<SyncedConn> = (0..CONNECTIONS)
        .map(|i| SyncedConn::connect(direct, sync_base + i as u64 * 10_000))
        .collect();
    let mut proxied_conns: Vec<SyncedConn> = (0..CONNECTIONS)
        .map(|i| SyncedConn::connect(proxied, sync_base + i as u64 * 10_000))
        .collect();
    // Both servers start each seed empty.
    direct_conns[0].exchange(b"flush_all\r\n");
    proxied_conns[0].exchange(b"flush_all\r\n");
    let mut history: Vec<String> = Vec::new();
    for step in 0..REQUESTS_PER_SEED {
        let conn = rng.random_range(0..CONNECTIONS);
        let request = gen.request();
        let expected = direct_conns[conn].exchange(&request);
        let got = proxied_conns[conn].exchange(&request);
        history.push(format!(
            "    {step} on {conn}: {:?} -> {:?}",
            String::from_utf8_lossy(&request),
            String::from_utf8_lossy(&expected.bytes)
        ));
        if probe_each_step() {
            // Debugging aid: memcached's CAS counter counts every store, so a store one
            // side did and the other did not shows up here at once.
            let probe = b"ms __cachelab_probe 1\r\nx\r\nmg __cachelab_probe c\r\n";
            let direct_cas = direct_conns[conn].exchange(probe);
            let proxied_cas = proxied_conns[conn].exchange(probe);
            if direct_cas != proxied_cas {
                return Err(format!(
                    "seed {seed} step {step}: the servers' CAS counters diverged after {:?} ({:?} vs {:?})\n{}",
                    String::from_utf8_lossy(&request),
                    String::from_utf8_lossy(&direct_cas.bytes),
                    String::from_utf8_lossy(&proxied_cas.bytes),
                    history[history.len().saturating_sub(4)..].join("\n"),
                ));
            }
        }
        if !expected.synced {
            // memcached itself did not answer in time (e.g. it is still reading a
            // block): this stream cannot be compared further.
            return Ok(step);
        }
        if normalize(&expected.bytes) != normalize(&got.bytes) || !got.synced {
            return Err(format!(
                "seed {seed} step {step} connection {conn}\n  request: {:?}\n  memcached: {:?}\n  proxy:     {:?} (synced: {})\n  the requests before it:\n{}",
                String::from_utf8_lossy(&request),
                String::from_utf8_lossy(&expected.bytes),
                String::from_utf8_lossy(&got.bytes),
                got.synced,
                history[history.len().saturating_sub(12)..history.len() - 1].join("\n"),
            ));
        }
    }
    Ok(REQUESTS_PER_SEED)
}

/// `CACHELAB_DIFF_PROBE=1`: check after every request that both servers stored alike.
fn probe_each_step() -> bool {
    std::env::var_os("CACHELAB_DIFF_PROBE").is_some()
}

#[test]
fn through_the_proxy_every_connection_gets_what_memcached_gives_it() {
    let direct = Memcached::start();
    let behind = Memcached::start();
    let proxy = Proxy::start(&[&behind], &["-t", "1"]);
    let seeds = Seeds::from_env(BOUNDED_SEEDS);
    let (mut done, mut requests, mut failures) = (0u64, 0usize, Vec::new());
    for seed in seeds.first.. {
        match run_seed(seed, direct.addr, proxy.addr) {
            Ok(sent) => requests += sent,
            Err(difference) => failures.push(difference),
        }
        done += 1;
        if seeds.finished(done, failures.len()) {
            break;
        }
    }
    eprintln!(
        "differential fuzz: {done} seeds from {}, {requests} requests over {CONNECTIONS} connections in {:.1} s",
        seeds.first,
        seeds.started.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "differences:\n{}", failures.join("\n"));
    assert_eq!(
        stat(proxy.addr, "server_ejections"),
        0,
        "a client's bytes ejected the server"
    );
    assert_eq!(
        stat(proxy.addr, "out_of_step"),
        0,
        "a server connection went out of step"
    );
}
