//! Client-side sharding held to twemproxy: with `--shard` given nutcracker.yml's server
//! lines, every key a sharded run writes straight to the servers is where Debian's
//! nutcracker, configured with the same lines, hash and distribution, looks for it; each
//! server's share in the report is what that server stored.

mod common;

use common::*;

const KEYS: u64 = 2000;

/// A nutcracker.yml pool over `lines`.
fn nutcracker_yml(
    listen: u16,
    hash: &str,
    distribution: &str,
    redis: bool,
    lines: &[String],
) -> String {
    let mut yml = format!(
        "pool:\n  listen: 127.0.0.1:{listen}\n  redis: {redis}\n  hash: {hash}\n  \
         hash_tag: \"{{}}\"\n  distribution: {distribution}\n  timeout: 2000\n  \
         auto_eject_hosts: false\n  servers:\n"
    );
    for line in lines {
        yml.push_str(&format!("   - {line}\n"));
    }
    yml
}

fn start_nutcracker(
    hash: &str,
    distribution: &str,
    redis: bool,
    lines: &[String],
) -> (Nutcracker, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("nutcracker.yml");
    std::fs::write(
        &conf,
        nutcracker_yml(free_port(), hash, distribution, redis, lines),
    )
    .unwrap();
    (Nutcracker::start(&conf), dir)
}

fn server_sent(report: &serde_json::Value) -> Vec<u64> {
    report["servers"]
        .as_array()
        .expect("a sharded report lists its servers")
        .iter()
        .map(|s| s["sent"].as_u64().unwrap())
        .collect()
}

/// Writes every key through `--shard`, then reads every key back through nutcracker:
/// none may miss.
fn held_to_nutcracker(
    protocol: &str,
    lines: &[String],
    options: &[&str],
    redis: bool,
    stored: &dyn Fn(usize) -> u64,
) {
    let list = lines.join(",");
    let max = format!("--key-maximum={}", KEYS - 1);
    let mut args = vec![
        "--shard",
        &list,
        "-P",
        protocol,
        "-t",
        "2",
        "-c",
        "2",
        &max,
        "--populate",
    ];
    args.extend_from_slice(options);
    let populate = load_with(&args);
    let report = populate.ok();
    assert_eq!(u(report, "/totals/sent"), KEYS);
    assert_eq!(u(report, "/totals/errors"), 0);
    let sent = server_sent(report);
    assert_eq!(sent.iter().sum::<u64>(), KEYS);
    for (index, n) in sent.iter().enumerate() {
        assert_eq!(
            *n,
            stored(index),
            "server {index} holds what the report says it was sent"
        );
    }

    let hash = options
        .windows(2)
        .find(|w| w[0] == "--shard-hash")
        .map_or("fnv1a_64", |w| w[1]);
    let distribution = options
        .windows(2)
        .find(|w| w[0] == "--shard-distribution")
        .map_or("ketama", |w| w[1]);
    let (nutcracker, _dir) = start_nutcracker(hash, distribution, redis, lines);
    let prefix: Vec<&str> = options
        .windows(2)
        .find(|w| w[0] == "--key-prefix")
        .map_or(vec![], |w| vec![w[0], w[1]]);
    let mut args = vec![
        "-P",
        protocol,
        "-t",
        "1",
        "-c",
        "2",
        &max,
        "--ratio=0:1",
        "--key-pattern=P:P",
        "--requests=allkeys",
    ];
    args.extend_from_slice(&prefix);
    let reads = load(nutcracker.addr, &args);
    let report = reads.ok();
    assert_eq!(u(report, "/summary/get/ops"), KEYS);
    assert_eq!(
        u(report, "/summary/get/misses"),
        0,
        "every key is where nutcracker looks for it"
    );
    assert_eq!(u(report, "/summary/get/hits"), KEYS);
}

/// Three memcached servers as nutcracker.yml lines, with names and weights.
fn memcached_pool() -> (Vec<Memcached>, Vec<String>) {
    let servers = start_servers(3);
    let lines = servers
        .iter()
        .zip(["1 alpha", "2 beta", "1"])
        .map(|(s, w)| format!("{}:{w}", s.addr))
        .collect();
    (servers, lines)
}

#[test]
fn memcached_keys_land_where_nutcracker_looks_for_them() {
    let (servers, lines) = memcached_pool();
    let stored = |i: usize| servers[i].stat("curr_items");
    held_to_nutcracker("memcache_text", &lines, &[], false, &stored);
    assert!((0..3).all(|i| stored(i) > 0), "ketama spreads the keys");
}

#[test]
fn modula_over_md5_lands_where_nutcracker_looks_too() {
    let (servers, lines) = memcached_pool();
    let stored = |i: usize| servers[i].stat("curr_items");
    let options = ["--shard-hash", "md5", "--shard-distribution", "modula"];
    held_to_nutcracker("memcache_text", &lines, &options, false, &stored);
}

#[test]
fn a_hash_tag_keeps_every_key_on_its_tags_server() {
    let servers = start_servers(3);
    let lines: Vec<String> = servers.iter().map(|s| format!("{}:1", s.addr)).collect();
    let stored = |i: usize| servers[i].stat("curr_items");
    held_to_nutcracker(
        "memcache_text",
        &lines,
        &["--shard-hash-tag", "{}", "--key-prefix", "user:{42}:"],
        false,
        &stored,
    );
    let on: Vec<u64> = (0..3).map(stored).collect();
    assert_eq!(on.iter().filter(|n| **n > 0).count(), 1, "{on:?}");
}

#[test]
fn redis_keys_land_where_nutcracker_looks_for_them() {
    let servers = [Redis::start(), Redis::start()];
    let lines: Vec<String> = servers.iter().map(|s| format!("{}:1", s.addr)).collect();
    let stored = |i: usize| servers[i].dbsize() as u64;
    held_to_nutcracker("redis", &lines, &["--shard-hash", "murmur"], true, &stored);
}

#[test]
fn a_server_of_the_pool_that_refuses_is_named_once() {
    let server = Memcached::start();
    let dead = free_port();
    let list = format!("{}:1,127.0.0.1:{dead}:1", server.addr);
    let run = load_with(&["--shard", &list, "--test-time=1"]);
    assert_ne!(run.code, Some(0));
    let line = format!("cannot connect to 127.0.0.1:{dead}");
    assert_eq!(run.stderr.matches(&line).count(), 1, "{}", run.stderr);
}
