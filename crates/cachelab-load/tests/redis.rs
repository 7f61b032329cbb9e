//! Against a real Redis started by the test: populate, hits, the set:get ratio, MGET of
//! 3 and 9 keys, exact request counts.

mod common;

use common::*;

const KEYS: &str = "--key-maximum=1999";

#[test]
fn populate_writes_every_key_once_and_a_get_only_run_then_has_no_misses() {
    let redis = Redis::start();
    let populate = load(
        redis.addr,
        &["-P", "redis", "-t", "2", "-c", "3", KEYS, "--populate"],
    );
    assert_eq!(u(populate.ok(), "/totals/sent"), 2000);
    assert_eq!(redis.calls("set"), 2000);
    assert_eq!(redis.dbsize(), 2000);

    let gets = load(
        redis.addr,
        &[
            "-P",
            "redis",
            "-t",
            "2",
            "-c",
            "2",
            KEYS,
            "--ratio=0:1",
            "--test-time=1",
        ],
    );
    let report = gets.ok();
    assert!(u(report, "/summary/get/ops") > 100);
    assert_eq!(u(report, "/summary/get/misses"), 0);
    assert_eq!(
        u(report, "/summary/get/hits"),
        u(report, "/summary/get/ops")
    );
    assert_eq!(redis.info("stats", "keyspace_misses"), "0");
}

#[test]
fn a_set_get_1_to_10_run_sends_sets_and_gets_in_that_ratio() {
    let redis = Redis::start();
    let run = load(
        redis.addr,
        &[
            "-P",
            "redis",
            "-t",
            "2",
            "-c",
            "2",
            KEYS,
            "--ratio=1:10",
            "--requests=220",
        ],
    );
    let report = run.ok();
    assert_eq!(u(report, "/summary/set/ops"), 80);
    assert_eq!(u(report, "/summary/get/ops"), 800);
    assert_eq!(redis.calls("set"), 80);
    assert_eq!(redis.calls("get"), 800);
}

#[test]
fn a_requests_run_sends_exactly_that_many_per_client() {
    let redis = Redis::start();
    let run = load(
        redis.addr,
        &[
            "-P",
            "redis",
            "-t",
            "2",
            "-c",
            "4",
            KEYS,
            "--requests=250",
            "--pipeline=8",
        ],
    );
    let report = run.ok();
    assert_eq!(u(report, "/totals/sent"), 2000);
    assert_eq!(u(report, "/totals/completed"), 2000);
    assert_eq!(redis.calls("set") + redis.calls("get"), 2000);
}

#[test]
fn mget_of_3_and_9_keys_asks_for_that_many_keys() {
    let redis = Redis::start();
    load(
        redis.addr,
        &["-P", "redis", "-t", "1", "-c", "4", KEYS, "--populate"],
    )
    .ok();
    for (round, keys) in [3u64, 9].into_iter().enumerate() {
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
                "--ratio=0:1",
                "--requests=100",
                &format!("--multiget-keys={keys}"),
            ],
        );
        let report = run.ok();
        assert_eq!(u(report, "/summary/multiget/ops"), 200);
        assert_eq!(u(report, "/summary/multiget/hits"), 200 * keys);
        assert_eq!(u(report, "/summary/multiget/misses"), 0);
        assert_eq!(redis.calls("mget"), 200 * (round as u64 + 1));
    }
    assert_eq!(
        redis.info("stats", "keyspace_hits"),
        (200 * 3 + 200 * 9).to_string()
    );
}

#[test]
fn redis_misses_are_counted_per_key() {
    let redis = Redis::start();
    let run = load(
        redis.addr,
        &[
            "-P",
            "redis",
            "-t",
            "1",
            "-c",
            "1",
            KEYS,
            "--ratio=0:1",
            "--requests=40",
            "--multiget-keys=3",
        ],
    );
    let report = run.ok();
    assert_eq!(u(report, "/summary/multiget/misses"), 120);
    assert_valid_report(report);
}
