//! Differential fuzz for Redis pools: seeded streams of RESP requests, valid and
//! malformed (`diff/resp_gen.rs`, `diff/resp_frames.rs`), sent over several connections
//! both to one redis-server directly and through the proxy, in front of one
//! redis-server or of three (a sharded pool, compared with the one server holding
//! everything). Every reply the proxy gives a connection must be the one Redis gives
//! that connection, byte for byte, but for the documented differences of
//! `diff/resp_rules.rs`; a reply that crossed to another connection (each request is
//! followed by an `ECHO` of a number unique to its connection), a connection closed
//! where Redis kept it or kept where Redis closed it, a server ejected by a client's
//! bytes, or a server connection out of step fails the test.
//!
//! A seed is a run of steps: most send one request on one connection (keys shared by
//! every connection, so requests meet each other's data); the others pipeline a burst
//! of requests on several connections at once, each on keys of its own (so the replies
//! do not depend on the order the connections reached the servers), which is what puts
//! different clients' requests in one batch with `--pipeline` above 1.
//!
//! `make test` runs a bounded number of seeds; `make fuzz` sets `CACHELAB_DIFF_SECONDS`
//! and runs fresh seeds for that long. `CACHELAB_DIFF_SEED=<n>` starts at seed n.

mod common;
#[allow(dead_code)] // the memcached fuzz uses the rest
mod diff;

use std::net::SocketAddr;

use cachelab_testkit::Redis;
use common::resp::{redis_proxy, redis_shard_pool, start_redis};
use common::Proxy;
use diff::resp_gen::{RespGen, RespRequest};
use diff::resp_rules::normalize;
use diff::{Answer, Seeds, Sync, SyncedConn};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const CONNECTIONS: usize = 4;
const STEPS_PER_SEED: usize = 300;
/// Percent of steps that are a pipelined burst over several connections.
const BURST_PERCENT: u32 = 30;
const MOST_PER_BURST: usize = 6;
/// The namespace of requests sent alone.
const SHARED: &str = "";

/// One client's connection to Redis directly and through the proxy.
struct Pair {
    direct: SyncedConn,
    proxied: SyncedConn,
}

impl Pair {
    fn connect(direct: SocketAddr, proxied: SocketAddr) -> Pair {
        Pair {
            direct: SyncedConn::with_sync(direct, 0, Sync::Resp),
            proxied: SyncedConn::with_sync(proxied, 0, Sync::Resp),
        }
    }

    /// Sends `request` both ways; a documented difference is not sent to Redis. A
    /// request after which the connection ends is sent when its answer is read, after
    /// every earlier one: Redis drops the replies it has not written yet when it reads
    /// the end of its input or closes with input unread, so with replies still owed the
    /// outcome would depend on timing.
    fn send(&mut self, request: &RespRequest) {
        if request.last || request.closes {
            return;
        }
        if request.known.is_none() {
            self.direct.send(&request.wire);
        }
        self.proxied.send(&request.wire);
    }

    /// The answers to the oldest request sent: Redis's (None: the rule's) and the
    /// proxy's, or a description of how they differ.
    fn receive(&mut self, request: &RespRequest) -> Result<Answer, String> {
        if request.last {
            self.direct.send_last(&request.wire);
            self.proxied.send_last(&request.wire);
        } else if request.closes {
            self.direct.send(&request.wire);
            self.proxied.send(&request.wire);
        }
        let got = self.proxied.receive();
        let expected = match (&request.known, self.direct.is_closed()) {
            (None, _) => self.direct.receive(),
            (Some(_), true) => Answer {
                bytes: Vec::new(),
                synced: false,
            },
            (Some(known), false) => {
                if got.synced && known.accepts(&got.bytes) {
                    return Ok(got);
                }
                return Err(format!(
                    "  redis: {}\n  proxy: {} (synced: {})",
                    known.describe(),
                    shown(&got.bytes),
                    got.synced
                ));
            }
        };
        let same = |a: &Answer| (normalize(&a.bytes, request.clock), a.synced);
        if same(&expected) == same(&got) {
            return Ok(expected);
        }
        Err(format!(
            "  redis: {} (synced: {})\n  proxy: {} (synced: {})",
            shown(&expected.bytes),
            expected.synced,
            shown(&got.bytes),
            got.synced
        ))
    }

    /// Reads what is still owed (at most `most` answers each way) and closes both.
    fn drain(&mut self, most: usize) {
        for conn in [&mut self.direct, &mut self.proxied] {
            for _ in 0..most {
                if conn.is_closed() || !conn.owes() {
                    break;
                }
                conn.receive();
            }
        }
    }

    fn closed(&self) -> bool {
        self.direct.is_closed() || self.proxied.is_closed()
    }
}

/// The volume of one run.
#[derive(Default)]
struct Volume {
    seeds: u64,
    requests: usize,
    bursts: usize,
}

struct Target {
    direct: Redis,
    behind: Vec<Redis>,
    proxy: Proxy,
}

/// Runs one seed's stream; adds what it sent to `volume`, or returns the first
/// difference.
fn run_seed(seed: u64, t: &Target, volume: &mut Volume) -> Result<(), String> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut gen = RespGen::new(Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x5eed));
    // Both sides start each seed empty (FLUSHALL through the proxy is refused).
    t.direct.command(&["FLUSHALL"]);
    for server in &t.behind {
        server.command(&["FLUSHALL"]);
    }
    let (direct, proxied) = (t.direct.addr, t.proxy.addr);
    let mut pairs: Vec<Pair> = (0..CONNECTIONS)
        .map(|_| Pair::connect(direct, proxied))
        .collect();
    let mut history: Vec<(usize, String)> = Vec::new();
    let fail = |step: usize,
                conn: usize,
                request: &RespRequest,
                diff: String,
                history: &[(usize, String)]| {
        let tail = |lines: Vec<&String>, n: usize| {
            let from = lines.len().saturating_sub(n);
            lines[from..]
                .iter()
                .map(|l| l.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        };
        format!(
            "seed {seed} step {step} connection {conn}\n  request: {}\n{diff}\n  \
             the requests before it:\n{}\n  and before it on connection {conn}:\n{}",
            shown(&request.wire),
            tail(history.iter().map(|h| &h.1).collect(), 8),
            tail(
                history
                    .iter()
                    .filter(|h| h.0 == conn)
                    .map(|h| &h.1)
                    .collect(),
                16
            ),
        )
    };
    for step in 0..STEPS_PER_SEED {
        let mut plan: Vec<(usize, Vec<RespRequest>)> = Vec::new();
        if rng.random_range(0..100) < BURST_PERCENT {
            volume.bursts += 1;
            for conn in 0..CONNECTIONS {
                if rng.random_range(0..100) < 70 {
                    let ns = format!("c{conn}:");
                    let mut burst = Vec::new();
                    for _ in 0..rng.random_range(1..=MOST_PER_BURST) {
                        let request = gen.request(&ns);
                        let ends = request.last || request.closes;
                        burst.push(request);
                        if ends {
                            break; // nothing goes behind it (see `Pair::send`)
                        }
                    }
                    plan.push((conn, burst));
                }
            }
        } else {
            plan.push((rng.random_range(0..CONNECTIONS), vec![gen.request(SHARED)]));
        }
        for (conn, burst) in &plan {
            for request in burst {
                pairs[*conn].send(request);
            }
        }
        // Every answer of the step is read even after a difference, so that no request
        // is still on its way to a server when the next seed empties them.
        let mut difference = None;
        for (conn, burst) in &plan {
            for request in burst {
                volume.requests += 1;
                let answer = match pairs[*conn].receive(request) {
                    Ok(answer) => answer,
                    Err(d) => {
                        difference.get_or_insert_with(|| fail(step, *conn, request, d, &history));
                        pairs[*conn].drain(burst.len());
                        break;
                    }
                };
                history.push((
                    *conn,
                    format!(
                        "    {step} on {conn}: {} -> {}",
                        shown(&request.wire),
                        shown(&answer.bytes)
                    ),
                ));
                if !answer.synced {
                    break; // both closed: the rest of the burst went nowhere
                }
            }
            if pairs[*conn].closed() {
                pairs[*conn] = Pair::connect(direct, proxied);
            }
        }
        if let Some(difference) = difference {
            return Err(difference);
        }
    }
    volume.seeds += 1;
    Ok(())
}

/// Bytes as a quoted string, the middle of a long one left out.
fn shown(bytes: &[u8]) -> String {
    if bytes.len() <= 600 {
        return format!("{:?}", String::from_utf8_lossy(bytes));
    }
    let (head, tail) = (&bytes[..300], &bytes[bytes.len() - 100..]);
    format!(
        "{:?} ... ({} bytes) ... {:?}",
        String::from_utf8_lossy(head),
        bytes.len(),
        String::from_utf8_lossy(tail)
    )
}

/// A counter of the proxy's `INFO`.
fn info_stat(proxy: &Proxy, name: &str) -> u64 {
    let mut conn = SyncedConn::with_sync(proxy.addr, 0, Sync::Resp);
    let answer = conn.exchange(b"INFO\r\n");
    let text = String::from_utf8_lossy(&answer.bytes).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

fn differential(name: &str, target: Target, bounded_seeds: u64) {
    let seeds = Seeds::from_env(bounded_seeds);
    let mut volume = Volume::default();
    let mut failures = Vec::new();
    for seed in seeds.first.. {
        if let Err(difference) = run_seed(seed, &target, &mut volume) {
            failures.push(difference);
        }
        if seeds.finished(seed + 1 - seeds.first, failures.len()) {
            break;
        }
    }
    eprintln!(
        "RESP differential fuzz ({name}): {} seeds from {} ({} failed), {} requests \
         ({} pipelined bursts) over {CONNECTIONS} connections in {:.1} s",
        volume.seeds + failures.len() as u64,
        seeds.first,
        failures.len(),
        volume.requests,
        volume.bursts,
        seeds.started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{name}: differences:\n{}",
        failures.join("\n")
    );
    let proxy = &target.proxy;
    assert_eq!(
        info_stat(proxy, "server_ejections"),
        0,
        "{name}: a client's bytes ejected a server"
    );
    assert_eq!(
        info_stat(proxy, "out_of_step"),
        0,
        "{name}: a server connection went out of step"
    );
}

/// The proxy in front of one redis-server with `extra` options.
fn one_server(extra: &[&str]) -> Target {
    let behind = start_redis(1);
    let proxy = redis_proxy(&behind, extra);
    Target {
        direct: Redis::start(),
        behind,
        proxy,
    }
}

/// A sharded pool of three redis-servers (murmur, ketama, hash tag `{}`), with `extra`.
fn three_shards(extra: &[&str]) -> (tempfile::TempDir, Target) {
    let behind = start_redis(3);
    let (dir, proxy) = redis_shard_pool(&behind, extra);
    let target = Target {
        direct: Redis::start(),
        behind,
        proxy,
    };
    (dir, target)
}

/// Seeds per test in `make test`: about 1,000 requests each, some 0.1 s.
const BOUNDED_SEEDS: u64 = 30;

/// One worker: every client shares one server connection, one request at a time.
#[test]
fn through_one_redis_server_every_connection_gets_what_redis_gives_it() {
    differential("1 server", one_server(&["-t", "1"]), BOUNDED_SEEDS);
}

/// One worker taking up to 8 requests at once: batch-mates from different clients.
#[test]
fn through_one_redis_server_pipelined_every_connection_gets_what_redis_gives_it() {
    let target = one_server(&["-t", "1", "--pipeline", "8"]);
    differential("1 server, --pipeline 8", target, BOUNDED_SEEDS);
}

/// Split commands over three shards, pipelined, against one Redis holding every key.
#[test]
fn through_three_shards_every_connection_gets_what_one_redis_gives_it() {
    let (_dir, target) = three_shards(&["-t", "2", "--pipeline", "8"]);
    differential("3 shards, --pipeline 8", target, BOUNDED_SEEDS);
}
