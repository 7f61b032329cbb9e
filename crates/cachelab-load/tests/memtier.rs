//! memtier_benchmark's options against real memcached and Redis started by the tests:
//! `--multi-key-get` asks for exactly the keys memtier would, `--expiry-range` and the
//! size options reach the stored items, `--reconnect-interval` opens the connections
//! memtier would, `--run-count` makes its runs and their aggregate, and a refused option
//! is named in one line.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cachelab_protocol::{Expect, RespValue};
use common::*;

const KEYS: &str = "--key-maximum=999";

/// `lru_crawler metadump all`: every item's key, expiry (Unix time, -1 for none) and so on.
fn metadump(server: &Memcached) -> Vec<String> {
    let mut stream = TcpStream::connect(server.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(b"lru_crawler metadump all\r\n").unwrap();
    let mut text = Vec::new();
    let mut chunk = [0u8; 65536];
    while !text.ends_with(b"END\r\n") {
        let n = stream.read(&mut chunk).expect("metadump timed out");
        assert!(n > 0, "memcached closed the metadump");
        text.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8(text)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("key="))
        .map(str::to_owned)
        .collect()
}

fn field<'a>(line: &'a str, name: &str) -> &'a str {
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}

/// The length of the value memcached holds for `key`.
fn value_len(server: &Memcached, key: &str) -> usize {
    let mut client = Client::connect(server.addr);
    let reply = client.request(format!("get {key}\r\n").as_bytes(), Expect::Values);
    let header = String::from_utf8_lossy(&reply);
    let first = header.lines().next().unwrap();
    assert!(first.starts_with("VALUE "), "{key}: {first}");
    first.rsplit(' ').next().unwrap().parse().unwrap()
}

fn now_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[test]
fn multi_key_get_asks_for_the_keys_memtier_would_in_every_memcached_protocol() {
    // Per client, 50 requests are 10 cycles of SET, then GETs of 3, 3, 3 and 1 keys:
    // 10 SETs and 100 keys, the 1:10 ratio counted in keys.
    for protocol in ["memcache_text", "memcache_binary"] {
        let server = Memcached::start();
        let run = load(
            server.addr,
            &[
                "-P",
                protocol,
                "-t",
                "1",
                "-c",
                "2",
                KEYS,
                "--ratio=1:10",
                "--multi-key-get=3",
                "--requests=50",
            ],
        );
        let report = run.ok();
        assert_eq!(server.stat("cmd_set"), 20, "{protocol}");
        assert_eq!(server.stat("cmd_get"), 200, "{protocol}");
        assert_eq!(u(report, "/summary/set/ops"), 20);
        assert_eq!(u(report, "/summary/multiget/ops"), 60, "3-key GETs");
        assert_eq!(u(report, "/summary/get/ops"), 20, "1-key GETs");
        let keys = |op: &str| {
            u(report, &format!("/summary/{op}/hits")) + u(report, &format!("/summary/{op}/misses"))
        };
        assert_eq!((keys("multiget"), keys("get")), (180, 20));
        assert_eq!(u(report, "/totals/errors"), 0);
        assert!(report
            .pointer("/configuration/multi_key_get")
            .unwrap()
            .as_bool()
            .unwrap());
        assert_valid_report(report);
    }
}

#[test]
fn multi_key_get_on_redis_sends_mget_for_several_keys_and_get_for_one() {
    let redis = Redis::start();
    let run = load(
        redis.addr,
        &[
            "-P",
            "redis",
            "-t",
            "1",
            "-c",
            "2",
            KEYS,
            "--ratio=1:10",
            "--multi-key-get=3",
            "--requests=50",
        ],
    );
    run.ok();
    assert_eq!(redis.calls("set"), 20);
    assert_eq!(redis.calls("mget"), 60);
    assert_eq!(redis.calls("get"), 20);
}

#[test]
fn a_get_only_ratio_with_multi_key_get_sends_one_key_gets_as_memtier() {
    let server = Memcached::start();
    let report = load(
        server.addr,
        &[
            "-P",
            "memcache_text",
            "-t",
            "1",
            "-c",
            "1",
            KEYS,
            "--ratio=0:1",
            "--multi-key-get=3",
            "--requests=30",
        ],
    );
    let report = report.ok();
    assert_eq!(u(report, "/summary/get/ops"), 30);
    assert_eq!(u(report, "/summary/multiget/ops"), 0);
    assert_eq!(server.stat("cmd_get"), 30);
}

#[test]
fn expiry_range_sets_expire_within_the_range_in_every_protocol() {
    for protocol in ["memcache_text", "memcache_binary"] {
        let server = Memcached::start();
        let before = now_s();
        load(
            server.addr,
            &[
                "-P",
                protocol,
                "-t",
                "1",
                "-c",
                "2",
                "--key-maximum=199",
                "--populate",
                "--expiry-range=100-200",
            ],
        )
        .ok();
        let after = now_s();
        let items = metadump(&server);
        assert_eq!(items.len(), 200, "{protocol}");
        let mut expiries = std::collections::BTreeSet::new();
        for item in &items {
            let exp: i64 = field(item, "exp").parse().unwrap();
            // memcached's clock has whole seconds: allow one either side.
            assert!(
                exp >= before + 100 - 1 && exp <= after + 200 + 1,
                "{protocol}: {item} (run from {before} to {after})"
            );
            expiries.insert(exp - before);
        }
        assert!(
            expiries.len() > 20,
            "{protocol}: drawn, not constant: {expiries:?}"
        );
    }
    // Without --expiry-range, nothing expires.
    let server = Memcached::start();
    load(
        server.addr,
        &[
            "-P",
            "memcache_text",
            "-t",
            "1",
            "-c",
            "1",
            "--key-maximum=9",
            "--populate",
        ],
    )
    .ok();
    assert!(metadump(&server).iter().all(|i| field(i, "exp") == "-1"));
}

#[test]
fn expiry_range_on_redis_sends_setex() {
    let redis = Redis::start();
    load(
        redis.addr,
        &[
            "-P",
            "redis",
            "-t",
            "1",
            "-c",
            "1",
            "--key-maximum=49",
            "--populate",
            "--expiry-range=100-200",
        ],
    )
    .ok();
    assert_eq!(redis.calls("setex"), 50);
    assert_eq!(redis.calls("set"), 0);
    for key in ["memtier-0", "memtier-49"] {
        let RespValue::Integer(ttl) = redis.command(&["TTL", key]) else {
            panic!("TTL is not an integer")
        };
        assert!((99..=200).contains(&ttl), "{key}: {ttl}");
    }
}

#[test]
fn data_size_list_writes_each_size_its_weight_in_a_row() {
    let server = Memcached::start();
    // One client writes keys 0..39 in order; sizes go 10, 10, 10, 100, and round again.
    load(
        server.addr,
        &[
            "-P",
            "memcache_text",
            "-t",
            "1",
            "-c",
            "1",
            "--key-maximum=39",
            "--ratio=1:0",
            "--key-pattern=S:S",
            "--requests=40",
            "--data-size-list=10:3,100:1",
        ],
    )
    .ok();
    for k in 0..40 {
        let expected = if k % 4 == 3 { 100 } else { 10 };
        assert_eq!(
            value_len(&server, &format!("memtier-{k}")),
            expected,
            "key {k}"
        );
    }
}

#[test]
fn data_size_pattern_s_gives_each_key_its_size() {
    let server = Memcached::start();
    load(
        server.addr,
        &[
            "-P",
            "memcache_binary",
            "-t",
            "1",
            "-c",
            "3",
            "--key-minimum=0",
            "--key-maximum=90",
            "--populate",
            "--data-size-range=10-100",
            "--data-size-pattern=S",
        ],
    )
    .ok();
    // size = 10 + (100 - 10) x k / 90 = 10 + k, whichever client wrote the key.
    for k in [0, 1, 29, 30, 31, 60, 61, 89, 90] {
        assert_eq!(
            value_len(&server, &format!("memtier-{k}")),
            10 + k,
            "key {k}"
        );
    }
}

#[test]
fn reconnect_interval_opens_a_connection_per_interval() {
    // 2 clients x 100 requests, re-opened every 10 answers: 10 connections each (the last
    // interval ends the run, as memtier's does).
    for (pipeline, protocol) in [("1", "memcache_text"), ("4", "memcache_binary")] {
        let server = Memcached::start();
        let before = server.stat("total_connections");
        let run = load(
            server.addr,
            &[
                "-P",
                protocol,
                "-t",
                "1",
                "-c",
                "2",
                KEYS,
                "--requests=100",
                "--pipeline",
                pipeline,
                "--reconnect-interval=10",
            ],
        );
        let report = run.ok();
        // The second `stats` connection counts itself.
        let opened = server.stat("total_connections") - before - 1;
        assert_eq!(opened, 20, "pipeline {pipeline}");
        assert_eq!(u(report, "/totals/completed"), 200);
        assert_eq!(u(report, "/totals/errors"), 0);
        assert_eq!(u(report, "/totals/connection_errors"), 0);
        assert_eq!(server.stat("cmd_get") + server.stat("cmd_set"), 200);
    }
}

#[test]
fn run_count_makes_each_run_and_prints_best_worst_and_the_aggregate() {
    let server = Memcached::start();
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("lat");
    let run = load(
        server.addr,
        &[
            "-P",
            "memcache_text",
            "-t",
            "1",
            "-c",
            "2",
            KEYS,
            "--requests=100",
            "--run-count=2",
            "--print-all-runs",
            "--hdr-file-prefix",
            prefix.to_str().unwrap(),
        ],
    );
    let report = run.ok();
    for line in [
        "2 runs, one second apart",
        "run 1: ",
        "run 2: ",
        "RUN #1 RESULTS",
        "RUN #2 RESULTS",
        "BEST RUN RESULTS (run ",
        "WORST RUN RESULTS (run ",
        "AGGREGATED AVERAGE RESULTS (2 runs)",
    ] {
        assert!(
            run.stdout.contains(line),
            "{line} missing from\n{}",
            run.stdout
        );
    }
    assert_eq!(server.stat("cmd_get") + server.stat("cmd_set"), 400);
    assert_eq!(u(report, "/summary/total/ops"), 400);
    assert_eq!(u(report, "/totals/completed"), 400);
    let runs = report.pointer("/runs").unwrap().as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for (i, r) in runs.iter().enumerate() {
        assert_eq!(u(r, "/index"), i as u64 + 1);
        assert_eq!(u(r, "/summary/total/ops"), 200);
        let log = std::fs::read_to_string(format!("{}_FULL_RUN_{}.txt", prefix.display(), i + 1))
            .unwrap();
        assert!(log.contains("Tag=total,"), "{log}");
    }
    let mean = (f(&runs[0], "/summary/total/ops_per_sec")
        + f(&runs[1], "/summary/total/ops_per_sec"))
        / 2.0;
    assert!((f(report, "/summary/total/ops_per_sec") - mean).abs() < 1e-6);
    assert!(!prefix.with_file_name("lat_FULL_RUN_3.txt").exists());
    assert!(
        run.elapsed >= Duration::from_secs(1),
        "runs are a second apart"
    );
    assert_valid_report(report);
}

#[test]
fn print_percentiles_chooses_the_summarys_columns() {
    let server = Memcached::start();
    let run = load(
        server.addr,
        &[
            "-P",
            "memcache_text",
            "-t",
            "1",
            "-c",
            "1",
            KEYS,
            "--requests=10",
            "--print-percentiles=50,99.99",
        ],
    );
    let report = run.ok();
    assert!(run.stdout.contains("p50(ms)") && run.stdout.contains("p99.99(ms)"));
    assert!(!run.stdout.contains("p99(ms)") && !run.stdout.contains("p90(ms)"));
    // The JSON report keeps every percentile.
    assert!(report.pointer("/summary/total/latency_ms/p90").is_some());
}

#[test]
fn a_refused_memtier_option_is_named_in_one_line_and_nothing_runs() {
    let server = Memcached::start();
    for (option, named) in [
        (&["--cluster-mode"][..], "--cluster-mode"),
        (&["--select-db=2"][..], "--select-db"),
        (&["--authenticate", "x"][..], "--authenticate"),
        (&["-a", "x"][..], "-a"),
        (&["--wait-ratio=1:1"][..], "--wait-ratio"),
        (&["--cluster-mode", "--tls"][..], "--cluster-mode"),
    ] {
        let run = load(server.addr, option);
        assert_eq!(run.code, Some(2), "{option:?}");
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
        assert!(
            run.stderr.starts_with(&format!("cachelab-load: {named}: "))
                && run.stderr.contains("not supported"),
            "{}",
            run.stderr
        );
        assert!(run.report.is_none());
    }
    assert_eq!(server.stat("cmd_get") + server.stat("cmd_set"), 0);
}

#[test]
fn ipv4_and_ipv6_choose_the_servers_addresses() {
    let server = Memcached::start();
    let v4 = load(
        server.addr,
        &[
            "-P",
            "memcache_text",
            "-t",
            "1",
            "-c",
            "1",
            "--requests=5",
            "-4",
        ],
    );
    assert_eq!(u(v4.ok(), "/totals/completed"), 5);
    let v6 = load(
        server.addr,
        &[
            "-P",
            "memcache_text",
            "-t",
            "1",
            "-c",
            "1",
            "--requests=5",
            "-6",
        ],
    );
    assert_eq!(v6.code, Some(1));
    assert!(
        v6.stderr.contains("no address of the family asked for"),
        "{}",
        v6.stderr
    );
}
