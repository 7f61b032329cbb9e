//! Against a real memcached started by the test: populate, hits, the set:get ratio,
//! multi-gets, exact request counts, and the JSON report against its schema.

mod common;

use common::*;

const KEYS: &str = "--key-maximum=1999";

#[test]
fn populate_writes_every_key_once_and_a_get_only_run_then_has_no_misses() {
    let server = Memcached::start();
    let populate = load(
        server.addr,
        &[
            "-P",
            "memcache_text",
            "-t",
            "2",
            "-c",
            "3",
            KEYS,
            "--populate",
        ],
    );
    let report = populate.ok();
    assert_eq!(u(report, "/totals/sent"), 2000);
    assert_eq!(u(report, "/summary/set/ops"), 2000);
    assert_eq!(server.stat("cmd_set"), 2000);
    assert_eq!(
        server.stat("curr_items"),
        2000,
        "every key of the range, each once"
    );

    let gets = load(
        server.addr,
        &[
            "-P",
            "memcache_text",
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
    assert_eq!(u(report, "/totals/errors"), 0);
}

#[test]
fn the_memtier_populate_idiom_is_the_same_as_populate() {
    let server = Memcached::start();
    let run = load(
        server.addr,
        &[
            "-P",
            "memcache_text",
            "-t",
            "1",
            "-c",
            "7",
            KEYS,
            "--ratio=1:0",
            "--key-pattern=P:P",
            "--requests=allkeys",
        ],
    );
    assert_eq!(u(run.ok(), "/totals/sent"), 2000);
    assert_eq!(server.stat("curr_items"), 2000);
}

#[test]
fn a_set_get_1_to_10_run_sends_sets_and_gets_in_that_ratio() {
    let server = Memcached::start();
    // 4 clients x 220 requests: each client sends 20 cycles of 1 set then 10 gets.
    let run = load(
        server.addr,
        &[
            "-P",
            "memcache_text",
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
    assert_eq!(server.stat("cmd_set"), 80);
    assert_eq!(server.stat("cmd_get"), 800);
}

#[test]
fn a_requests_run_sends_exactly_that_many_per_client() {
    let server = Memcached::start();
    let run = load(
        server.addr,
        &[
            "-P",
            "memcache_text",
            "-t",
            "3",
            "-c",
            "5",
            KEYS,
            "--requests=333",
            "--pipeline=4",
        ],
    );
    let report = run.ok();
    let expected = 3 * 5 * 333;
    assert_eq!(u(report, "/totals/sent"), expected);
    assert_eq!(u(report, "/totals/completed"), expected);
    assert_eq!(u(report, "/summary/total/ops"), expected);
    assert_eq!(server.stat("cmd_get") + server.stat("cmd_set"), expected);
}

#[test]
fn a_busy_polling_closed_loop_sends_and_times_the_same_requests() {
    // Spinning for replies changes how a wait ends, never what is sent: exact counts over
    // pipelined connections that are closed and re-opened along the way.
    let server = Memcached::start();
    let run = load(
        server.addr,
        &[
            "-P",
            "memcache_text",
            "-t",
            "2",
            "-c",
            "3",
            KEYS,
            "--requests=400",
            "--pipeline=2",
            "--reconnect-interval=150",
            "--busy-poll-us=50",
        ],
    );
    let report = run.ok();
    let expected = 2 * 3 * 400;
    assert_eq!(u(report, "/configuration/busy_poll_us"), 50);
    assert_eq!(u(report, "/totals/sent"), expected);
    assert_eq!(u(report, "/totals/completed"), expected);
    assert_eq!(u(report, "/totals/errors"), 0);
    assert_eq!(server.stat("cmd_get") + server.stat("cmd_set"), expected);
    // every measured request was timed: the histogram holds as many as the summary
    let total = report["histograms"]["total"].as_str().unwrap();
    let hist = cachelab_stats::LatencyHistogram::decode_base64(total).unwrap();
    assert_eq!(hist.len(), u(report, "/summary/total/ops"));
}

#[test]
fn multi_gets_of_3_and_9_keys_ask_for_that_many_keys() {
    let server = Memcached::start();
    load(
        server.addr,
        &[
            "-P",
            "memcache_text",
            "-t",
            "1",
            "-c",
            "4",
            KEYS,
            "--populate",
        ],
    )
    .ok();
    for keys in [3u64, 9] {
        let before = server.stat("cmd_get");
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
                "--ratio=0:1",
                "--requests=100",
                &format!("--multiget-keys={keys}"),
            ],
        );
        let report = run.ok();
        assert_eq!(u(report, "/summary/multiget/ops"), 200);
        assert_eq!(u(report, "/summary/get/ops"), 0);
        assert_eq!(u(report, "/summary/multiget/hits"), 200 * keys);
        assert_eq!(u(report, "/summary/multiget/misses"), 0);
        // memcached counts every key of a multi-get as one get.
        assert_eq!(server.stat("cmd_get") - before, 200 * keys);
    }
}

#[test]
fn misses_are_counted_per_key_on_an_empty_server() {
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
            "--ratio=0:1",
            "--requests=50",
            "--multiget-keys=3",
        ],
    );
    let report = run.ok();
    assert_eq!(u(report, "/summary/multiget/misses"), 150);
    assert_eq!(u(report, "/summary/multiget/hits"), 0);
}

#[test]
fn the_json_report_follows_its_schema_and_its_histograms_hold_every_request() {
    let server = Memcached::start();
    let closed = load(
        server.addr,
        &[
            "-P",
            "memcache_text",
            "-t",
            "2",
            "-c",
            "2",
            KEYS,
            "--test-time=2",
            "--warmup=0.5",
            "--cooldown=0.5",
            "--multiget-keys=2",
            "--ratio=1:3",
        ],
    );
    let report = closed.ok();
    assert_valid_report(report);
    assert_eq!(f(report, "/run/window_s"), 1.0);
    assert!(report["series"].as_array().unwrap().len() >= 2);
    for (op, name) in [("set", "set"), ("multiget", "multiget"), ("total", "total")] {
        let encoded = report["histograms"][name].as_str().unwrap();
        let histogram =
            cachelab_stats::LatencyHistogram::decode_base64(encoded).expect("HDR decodes");
        assert_eq!(
            histogram.len(),
            u(report, &format!("/summary/{op}/ops")),
            "{op}"
        );
    }
    let series_ops: u64 = report["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["ops"].as_u64().unwrap())
        .sum();
    assert_eq!(series_ops, u(report, "/totals/completed"));

    let open = load(
        server.addr,
        &[
            "-P",
            "memcache_text",
            "-t",
            "1",
            "-c",
            "2",
            KEYS,
            "--test-time=1",
            "--rate=500",
        ],
    );
    assert_valid_report(open.ok());
    assert_eq!(open.ok()["open_loop"]["target_rate"], 500.0);
}

#[test]
fn the_human_summary_names_every_operation_type_and_percentile() {
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
        ],
    );
    run.ok();
    for word in [
        "Sets",
        "Gets",
        "MultiGets",
        "Totals",
        "Ops/sec",
        "Hits",
        "Misses",
        "Avg(ms)",
        "p50(ms)",
        "p99(ms)",
        "p99.9(ms)",
        "Max(ms)",
    ] {
        assert!(
            run.stdout.contains(word),
            "{word} missing from\n{}",
            run.stdout
        );
    }
}
