//! Graceful shutdown under load, and the stats file's accounting.

mod common;

use std::io::Read;
use std::thread;
use std::time::Duration;

use cachelab_protocol::{parse_reply, Expect, ReplyError};
use common::{start_servers, values_reply, Proxy, Spawned};
use serde_json::Value;

fn count(v: &Value) -> u64 {
    v["count"].as_u64().unwrap()
}

fn op_counts(line: &Value) -> (u64, u64, u64) {
    let c = |op: &str| line["ops"].get(op).map_or(0, count);
    (c("get"), c("multiget"), c("set"))
}

#[test]
fn sigterm_during_load_answers_every_received_request_and_flushes_the_stats() {
    let servers = start_servers(3);
    let proxy = Spawned::start(
        &servers.iter().collect::<Vec<_>>(),
        &["-t", "2", "--stats-window", "0.2"],
    );
    proxy.client().set("k", "v");
    const CLIENTS: usize = 6;
    const PER_CLIENT: usize = 3000;
    let addr = proxy.addr;
    // Each client is served once before the SIGTERM: a connection still in the listen
    // backlog when the listener closes is reset by the kernel, which is not what this
    // test is about.
    let (served_tx, served_rx) = std::sync::mpsc::channel();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let served = served_tx.clone();
            thread::spawn(move || {
                let mut client = common::Client::connect(addr);
                client.send(b"get k\r\n");
                let first = client.read_reply(Expect::Values);
                assert_eq!(first, values_reply(&[("k", "v")]).as_bytes());
                served.send(()).unwrap();
                let batch = b"get k\r\n".repeat(PER_CLIENT);
                client.send(&batch);
                // Read replies until the proxy closes; every reply must be a full, correct
                // answer, and their number is what the proxy received from us.
                let mut buf = Vec::new();
                let mut chunk = [0u8; 65536];
                loop {
                    match client.stream.read(&mut chunk) {
                        Ok(0) => break,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        Err(e) => panic!("read failed: {e}"),
                    }
                }
                let mut replies = 1; // the first one
                let mut rest = &buf[..];
                while !rest.is_empty() {
                    match parse_reply(rest, Expect::Values) {
                        Ok((_, len)) => {
                            assert_eq!(&rest[..len], values_reply(&[("k", "v")]).as_bytes());
                            rest = &rest[len..];
                            replies += 1;
                        }
                        Err(ReplyError::Incomplete) => panic!("a torn reply before close"),
                        Err(e) => panic!("{e}"),
                    }
                }
                replies
            })
        })
        .collect();
    for _ in 0..CLIENTS {
        served_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("a client was never served");
    }
    // SIGTERM once the batches reach the servers (their counters, not the proxy's: a
    // stats request would be one more arrival).
    assert!(
        common::wait_until(Duration::from_secs(10), || servers
            .iter()
            .map(|s| s.stat("cmd_get"))
            .sum::<u64>()
            > CLIENTS as u64 + 100),
        "the load never reached the servers"
    );
    let mut proxy = proxy;
    let (code, summary_text) = proxy.terminate();
    assert_eq!(code, Some(0), "exit status");
    let answered: usize = clients.into_iter().map(|c| c.join().unwrap()).sum();
    assert!(answered > 0);
    assert!(
        summary_text.contains("cachelab-proxy summary"),
        "{summary_text}"
    );

    let lines = proxy.stats_lines();
    let summary = lines.last().unwrap();
    assert_eq!(summary["type"], "summary");
    // Every request received (one set + the gets) was answered and counted.
    let (gets, _, sets) = op_counts(summary);
    assert_eq!(sets, 1);
    assert_eq!(gets as usize, answered);
    assert_eq!(summary["arrivals"].as_u64().unwrap() as usize, answered + 1);
    let windows: u64 = lines
        .iter()
        .filter(|l| l["type"] == "window" && l["scope"] == "total")
        .map(|l| op_counts(l).0)
        .sum();
    assert_eq!(windows as usize, answered, "the last window was flushed");
}

#[test]
fn the_stats_file_counts_every_request_and_the_components_add_up() {
    let servers = start_servers(3);
    let mut proxy = Proxy::start(
        &servers.iter().collect::<Vec<_>>(),
        &["-t", "4", "-s", "--stats-window", "0.3"],
    );
    let mut client = proxy.client();
    for i in 0..200 {
        client.set(&format!("k{i}"), "value");
    }
    for i in 0..300 {
        client.get(&[&format!("k{}", i % 200)]);
    }
    for i in 0..50 {
        let keys: Vec<String> = (0..6).map(|j| format!("k{}", (i * 6 + j) % 250)).collect();
        client.get(&keys.iter().map(String::as_str).collect::<Vec<_>>());
    }
    drop(client);
    // Stopped in process: the summary returned is the binary's exit summary.
    let run = proxy.stop();
    assert_eq!(run.arrivals, 550, "every request received");

    let lines = proxy.stats_lines();
    // Every line is one of the typed records (unknown fields refused): the same types
    // the golden file and the JSON Schema describe.
    let text = std::fs::read_to_string(proxy.stats_path()).unwrap();
    for line in text.lines() {
        if let Err(e) = serde_json::from_str::<cachelab_proxy::stats_file::Line>(line) {
            panic!("{e}: {line}");
        }
    }
    assert_eq!(lines[0]["type"], "start");
    assert_eq!(lines[0]["workers"], 4);
    let summary = lines.last().unwrap();
    assert_eq!(op_counts(summary), (300, 50, 200));
    let multiget = &summary["ops"]["multiget"];
    assert_eq!(multiget["keys"]["mean"].as_f64().unwrap(), 6.0);
    // Keys k200..k249 were never set: 50 requests x 6 keys, of which these miss.
    let missing = (0..50)
        .flat_map(|i| (0..6).map(move |j| (i * 6 + j) % 250))
        .filter(|k| *k >= 200)
        .count() as u64;
    assert_eq!(multiget["misses"].as_u64().unwrap(), missing);
    assert_eq!(multiget["hits"].as_u64().unwrap(), 300 - missing);
    assert_eq!(summary["ops"]["get"]["hits"].as_u64().unwrap(), 300);

    let totals: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "window" && l["scope"] == "total")
        .collect();
    let summed = totals.iter().fold((0, 0, 0), |acc, l| {
        let (g, m, s) = op_counts(l);
        (acc.0 + g, acc.1 + m, acc.2 + s)
    });
    assert_eq!(summed, (300, 50, 200), "windows add up to the summary");
    // Per-worker lines of a window add up to its total line.
    for total in &totals {
        let window = &total["window"];
        let per_worker: u64 = lines
            .iter()
            .filter(|l| l["scope"] == "worker" && &l["window"] == window)
            .map(|l| op_counts(l).0 + op_counts(l).1 + op_counts(l).2)
            .sum();
        let (g, m, s) = op_counts(total);
        assert_eq!(per_worker, g + m + s);
    }

    for op in ["get", "multiget", "set"] {
        let o = &summary["ops"][op];
        let mean = |m: &str| o[m]["mean"].as_f64().unwrap();
        for metric in [
            "response_us",
            "decode_us",
            "queue_wait_us",
            "worker_service_us",
            "server_service_us",
            "worker_processing_us",
        ] {
            assert!(mean(metric) >= 0.0, "{op} {metric}");
            assert!(o[metric]["m2"].as_f64().unwrap() >= 0.0);
            assert_eq!(count(&o[metric]), count(o));
        }
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-6 * a.abs().max(1.0);
        assert!(close(
            mean("response_us"),
            mean("decode_us") + mean("queue_wait_us") + mean("worker_service_us")
        ));
        assert!(close(
            mean("worker_service_us"),
            mean("server_service_us") + mean("worker_processing_us")
        ));
        assert!(mean("server_service_us") > 0.0, "{op} reached the servers");
        let hist: u64 = o["rt_hist_100us"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_u64().unwrap())
            .sum::<u64>()
            + o["rt_overflow"].as_u64().unwrap();
        assert_eq!(hist, count(o), "{op} histogram holds every request");
        let p = &o["rt_percentiles_us"];
        assert!(p["p50"].as_u64() <= p["p99"].as_u64() && p["p99"].as_u64() <= p["max"].as_u64());
    }
    // Sets go to all 3 servers, a sharded 6-key multi-GET to 3; single GETs to one each.
    let by_server = |op: &str| -> Vec<u64> {
        summary["ops"][op]["server_service_us_by_server"]
            .as_array()
            .unwrap()
            .iter()
            .map(count)
            .collect()
    };
    assert_eq!(by_server("set"), vec![200, 200, 200]);
    assert_eq!(by_server("get"), vec![100, 100, 100]);
    assert_eq!(by_server("multiget"), vec![50, 50, 50]);
}

/// The exposition text of the metrics endpoint at `addr`.
fn scrape(addr: &str) -> String {
    use std::io::Write;
    let mut http = std::net::TcpStream::connect(addr).unwrap();
    http.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    http.read_to_string(&mut text).unwrap();
    text
}

/// The value of the metric line named `name` (labels included) in `text`.
fn metric(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// Clients that each send `gets` GETs, one at a time, and read every reply.
fn gets_from(proxy: &Proxy, clients: usize, gets: usize) {
    let mut handles = Vec::new();
    for _ in 0..clients {
        let mut client = proxy.client();
        handles.push(thread::spawn(move || {
            for _ in 0..gets {
                client.get(&["k"]);
            }
        }));
    }
    handles.into_iter().for_each(|h| h.join().unwrap());
}

// The workers record their latencies in their loop's thread without a lock; `stats` and
// a scrape must still count every request answered before they were asked.
#[test]
fn stats_counts_every_answer_its_client_has_seen() {
    let servers = start_servers(1);
    let proxy = Proxy::start(&[&servers[0]], &["-t", "4"]);
    proxy.client().set("k", "v");
    gets_from(&proxy, 4, 25);
    let mut client = proxy.client();
    // The set and 100 gets, no sooner and no later than the client saw them.
    assert_eq!(common::stat_number(&mut client, "server_0_answers"), 101);
}

#[test]
fn a_scrape_counts_every_answer_of_every_loop() {
    let servers = start_servers(1);
    let metrics_addr = format!("127.0.0.1:{}", common::free_port());
    let args = ["--loops", "2", "-t", "2", "--metrics-addr", &metrics_addr];
    let proxy = Proxy::start(&[&servers[0]], &args);
    proxy.client().set("k", "v");
    gets_from(&proxy, 6, 20);
    let text = scrape(&metrics_addr);
    let gets = metric(&text, "cachelab_proxy_response_seconds_count{op=\"get\"}");
    assert_eq!(gets, Some(120), "{text}");
    // One server: one line of its count.
    let server = text
        .lines()
        .find(|l| l.starts_with("cachelab_proxy_server_seconds_count{"))
        .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok());
    assert_eq!(server, Some(121), "{text}");
    // After the scrape every loop has published: `stats`, on either loop, agrees.
    let mut client = proxy.client();
    assert_eq!(common::stat_number(&mut client, "server_0_answers"), 121);
}

#[test]
fn the_metrics_endpoint_serves_the_counters_in_prometheus_format() {
    let servers = start_servers(1);
    let metrics_addr = format!("127.0.0.1:{}", common::free_port());
    let proxy = Proxy::start(&[&servers[0]], &["--metrics-addr", &metrics_addr]);
    let mut client = proxy.client();
    client.set("k", "v");
    client.get(&["k"]);
    client.get(&["k", "missing"]);
    let text = scrape(&metrics_addr);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    for line in [
        "cachelab_proxy_requests_total{op=\"get\"} 1",
        "cachelab_proxy_requests_total{op=\"multiget\"} 1",
        "cachelab_proxy_requests_total{op=\"set\"} 1",
        "cachelab_proxy_get_hits_total 2",
        "cachelab_proxy_get_misses_total 1",
        "cachelab_proxy_open_connections 1",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line}: {text}");
    }
    assert!(scrape(&metrics_addr).contains("cachelab_proxy_received_total 3"));
}
