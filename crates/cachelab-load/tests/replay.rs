//! Against a real memcached started by the test: `--trace` (a trace of known requests and
//! times arrives whole, with its mix, at its own pace) and `--lookaside` (a client that
//! sets after a miss warms the cache).

mod common;

use std::io::Write;

use common::*;

/// A trace of `n` requests `gap_us` apart over 5 clients, in twitter/cache-trace's CSV
/// with fractional seconds: 1 in 5 a set, 1 in 20 a delete, 1 in 20 an add, the rest
/// gets, over 100 keys. Returns the file and the counts of (sets and adds, gets,
/// deletes).
fn trace(n: u64, gap_us: u64) -> (tempfile::NamedTempFile, [u64; 3]) {
    let mut file = tempfile::Builder::new()
        .prefix("cachelab-trace-")
        .suffix(".csv")
        .tempfile()
        .unwrap();
    let mut counts = [0u64; 3];
    for i in 0..n {
        let (op, value, index) = match i % 20 {
            0..=3 => ("set", 100, 0),
            4 => ("add", 100, 0),
            5 => ("delete", 0, 2),
            _ => ("get", 0, 1),
        };
        counts[index] += 1;
        let t = (i * gap_us) as f64 / 1e6;
        writeln!(file, "{t:.6},key{},8,{value},{},{op},0", i * 7 % 100, i % 5).unwrap();
    }
    file.flush().unwrap();
    (file, counts)
}

fn replay(server: &Memcached, path: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["-P", "memcache_text", "-t", "1", "-c", "5", "--trace", path];
    args.extend_from_slice(extra);
    load(server.addr, &args).ok().clone()
}

/// The mean gap between sends, over the report's send intervals.
fn mean_send_gap_ns(report: &serde_json::Value) -> f64 {
    let gaps = report["send_intervals_ns"].as_array().unwrap();
    let sum: u64 = gaps.iter().map(|g| g.as_u64().unwrap()).sum();
    sum as f64 / gaps.len() as f64
}

#[test]
fn a_replay_at_the_traces_own_pace_sends_every_record_with_its_mix_and_gaps() {
    let server = Memcached::start();
    let (file, [writes, gets, deletes]) = trace(2000, 1000);
    let report = replay(&server, file.path().to_str().unwrap(), &[]);
    assert_valid_report(&report);
    assert_eq!(report["configuration"]["mode"], "replay");
    assert_eq!(u(&report, "/totals/sent"), 2000);
    assert_eq!(u(&report, "/totals/completed"), 2000);
    assert_eq!(u(&report, "/totals/errors"), 0);
    assert_eq!(server.stat("cmd_get"), gets);
    assert_eq!(server.stat("cmd_set"), writes);
    assert_eq!(
        server.stat("delete_hits") + server.stat("delete_misses"),
        deletes
    );
    // Gets are gets; writes and deletes are counted as sets.
    assert_eq!(u(&report, "/summary/get/ops"), gets);
    assert_eq!(u(&report, "/summary/set/ops"), writes + deletes);
    // What was sent, counted: 100 keys; 8-byte keys; the 100-byte values of the writes.
    let sent = &report["sent"];
    assert_eq!(sent["keys"]["distinct"], 100);
    assert_eq!(sent["keys"]["top"].as_array().unwrap().len(), 100);
    assert_eq!(
        sent["key_bytes"],
        serde_json::json!([{"from": 8, "to": 15, "count": 2000}])
    );
    assert_eq!(
        sent["value_bytes"],
        serde_json::json!([{"from": 64, "to": 127, "count": writes}])
    );
    // Each send at its recorded time: the mean gap within 1% of the trace's 1 ms.
    let gap = mean_send_gap_ns(&report);
    assert!((gap / 1e6 - 1.0).abs() < 0.01, "mean send gap {gap} ns");
    // And the run as long as the trace, within 1% (and the last reply).
    let duration = f(&report, "/run/duration_s");
    assert!((duration / 1.999 - 1.0).abs() < 0.01, "{duration} s");
}

#[test]
fn a_faster_replay_keeps_the_traces_shape_at_its_speed() {
    let server = Memcached::start();
    // 4 s of trace, a request every 500 us, replayed 4 times faster: 125 us gaps.
    let (file, _) = trace(8000, 500);
    let report = replay(
        &server,
        file.path().to_str().unwrap(),
        &["--trace-speed", "4"],
    );
    assert_eq!(u(&report, "/totals/completed"), 8000);
    let gap = mean_send_gap_ns(&report);
    assert!(
        (gap / 125_000.0 - 1.0).abs() < 0.01,
        "mean send gap {gap} ns"
    );
}

#[test]
fn an_untimed_replay_sends_the_trace_as_fast_as_its_pipelines_go() {
    let server = Memcached::start();
    let (file, [writes, gets, _]) = trace(3000, 1000);
    let path = file.path().to_str().unwrap();
    let report = replay(&server, path, &["--trace-speed", "0", "--pipeline", "8"]);
    assert_eq!(report["configuration"]["mode"], "closed");
    assert_eq!(u(&report, "/totals/completed"), 3000);
    assert_eq!(server.stat("cmd_get"), gets);
    assert_eq!(server.stat("cmd_set"), writes);
    // Far faster than the trace's 3 s.
    assert!(f(&report, "/run/duration_s") < 1.5);
}

#[test]
fn a_bad_trace_is_refused_in_one_line_naming_its_line() {
    let server = Memcached::start();
    let mut file = tempfile::Builder::new()
        .prefix("cachelab-trace-")
        .tempfile()
        .unwrap();
    writeln!(file, "0.1,k,1,0,0,get,0\n0.2,k,1,0,0,fetch,0").unwrap();
    let path = file.path().to_str().unwrap();
    let run = load(
        server.addr,
        &["-P", "memcache_text", "-t", "1", "-c", "1", "--trace", path],
    );
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert_eq!(run.stderr.trim_end().lines().count(), 1, "{}", run.stderr);
    assert!(run.stderr.contains("line 2"), "{}", run.stderr);
    assert!(run.stderr.contains("fetch"), "{}", run.stderr);
    // A trace that cannot be opened is refused before anything is sent.
    let missing = load(
        server.addr,
        &[
            "-P",
            "memcache_text",
            "--trace",
            "/nonexistent/cachelab.csv",
        ],
    );
    assert_eq!(missing.code, Some(1));
    assert!(missing.stderr.contains("/nonexistent/cachelab.csv"));
    assert_eq!(server.stat("cmd_get"), 1, "only the good line was sent");
}

#[test]
fn a_lookaside_clients_hit_ratio_rises_from_zero_to_its_steady_value() {
    // An empty memcached, gets only over 2000 keys: every first get of a key misses and
    // sets it, so the hit ratio climbs from 0 towards 1 as the keys fill in.
    let server = Memcached::start();
    let report = load(
        server.addr,
        &[
            "-P",
            "memcache_text",
            "-t",
            "1",
            "-c",
            "4",
            "--ratio=0:1",
            "--key-maximum=1999",
            "--key-pattern=R:R",
            "--lookaside",
            "--test-time=3",
        ],
    )
    .ok()
    .clone();
    let series = report["series"].as_array().unwrap();
    let ratio = |s: &serde_json::Value| {
        let (h, m) = (
            s["get"]["hits"].as_f64().unwrap(),
            s["get"]["misses"].as_f64().unwrap(),
        );
        h / (h + m)
    };
    let (first, last) = (ratio(&series[0]), ratio(&series[series.len() - 1]));
    assert!(first < last, "hit ratio {first} then {last}");
    assert!(last > 0.99, "the last second's hit ratio {last}");
    // Every miss was followed by its set (but for a miss answered after the last
    // request could start), and nothing else set anything.
    let (misses, sets) = (server.stat("get_misses"), server.stat("cmd_set"));
    assert!(
        sets <= misses && misses - sets <= 4,
        "{misses} misses, {sets} sets"
    );
    assert!((2000..2400).contains(&sets), "{sets} sets of 2000 keys");
}

#[test]
fn redis_monitor_output_replays_against_redis_with_its_commands() {
    // MONITOR lines as redis-cli prints them, 1 ms apart from two clients: SETs of 20
    // keys, then GETs of 40 (half of them never set), a DEL and an INCR.
    let redis = Redis::start();
    let mut file = tempfile::Builder::new()
        .prefix("cachelab-monitor-")
        .tempfile()
        .unwrap();
    writeln!(file, "OK").unwrap();
    let mut t = 1_700_000_000.0_f64;
    let mut line = |client: u32, args: &str| {
        t += 0.001;
        writeln!(file, "{t:.6} [0 127.0.0.1:{}] {args}", 50_000 + client).unwrap();
    };
    for i in 0..20 {
        line(i % 2, &format!("\"SET\" \"k{i}\" \"value\\x00{i}\""));
    }
    for i in 0..40 {
        line(i % 2, &format!("\"GET\" \"k{i}\""));
    }
    line(0, "\"DEL\" \"k0\"");
    line(1, "\"INCR\" \"counter\"");
    file.flush().unwrap();
    let path = file.path().to_str().unwrap();
    let run = load(
        redis.addr,
        &["-P", "redis", "-t", "1", "-c", "2", "--trace", path],
    );
    let report = run.ok();
    assert_eq!(u(report, "/totals/completed"), 62);
    assert_eq!(u(report, "/totals/errors"), 0);
    assert_eq!(u(report, "/summary/get/hits"), 20);
    assert_eq!(u(report, "/summary/get/misses"), 20);
    assert_eq!(redis.calls("set"), 20);
    assert_eq!(redis.calls("get"), 40);
    assert_eq!(redis.calls("del"), 1);
    assert_eq!(redis.calls("incr"), 1);
    assert_eq!(redis.dbsize(), 20, "19 keys left and the counter");
}
