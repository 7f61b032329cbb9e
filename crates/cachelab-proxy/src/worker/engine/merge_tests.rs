//! `--merge-gets`: a batch's retrievals for one server go out as one line, and each
//! request still gets exactly its own values, in its own order, after every write its
//! client sent before it. The property: against the same simulated servers, clients
//! see the same replies and statistics outcomes with lines merged as without.

use std::time::Duration;

use proptest::prelude::*;

use super::sim::{pool, request, Behaviour, Harness, SimServer};
use super::tests::{check_one_reply_each_in_order, seeded};
use super::EngineSettings;
use crate::routing::Protocol;

fn merging(pipeline: usize, max_reply_bytes: usize) -> EngineSettings {
    EngineSettings {
        pipeline,
        max_reply_bytes,
        merge_gets: true,
    }
}

fn server_with(values: &[(&str, &str)]) -> SimServer {
    let mut s = SimServer::new(Duration::from_micros(50), Behaviour::Normal);
    for (k, v) in values {
        s.data.insert(k.as_bytes().to_vec(), v.as_bytes().to_vec());
    }
    s
}

/// Serves `requests` as one batch against `servers` (sharded, one replica).
fn batch(servers: Vec<SimServer>, s: EngineSettings, requests: &[&str]) -> Harness {
    let p = pool(servers.len(), Some(1), Protocol::Memcached);
    let mut h = Harness::new(servers, false, s);
    let reqs = requests
        .iter()
        .map(|r| request(&p, r.as_bytes(), h.now))
        .collect();
    h.serve(reqs);
    check_one_reply_each_in_order(&h, requests.len());
    h
}

fn replies(h: &Harness) -> Vec<String> {
    h.replies
        .iter()
        .map(|r| String::from_utf8_lossy(&r.bytes).into_owned())
        .collect()
}

/// What each server was sent, one entry per line (its command and first key).
fn lines(h: &Harness, server: usize) -> Vec<String> {
    h.servers[server]
        .log
        .iter()
        .map(|(cmd, key)| format!("{cmd} {}", String::from_utf8_lossy(key)))
        .collect()
}

#[test]
fn a_batchs_gets_go_out_in_one_line_and_each_gets_its_own_values() {
    let server = server_with(&[("a", "1"), ("c", "333")]);
    let h = batch(
        vec![server],
        merging(8, 1 << 20),
        &[
            "get a\r\n",
            "get b\r\n",
            "get a c\r\n",
            "get  c \r\n",
            "get b a\r\n",
        ],
    );
    assert_eq!(lines(&h, 0), ["get a"]);
    assert_eq!(h.merged, 4);
    assert_eq!(
        replies(&h),
        [
            "VALUE a 0 1\r\n1\r\nEND\r\n",
            "END\r\n",
            "VALUE a 0 1\r\n1\r\nVALUE c 0 3\r\n333\r\nEND\r\n",
            "VALUE c 0 3\r\n333\r\nEND\r\n",
            "VALUE a 0 1\r\n1\r\nEND\r\n",
        ]
    );
    let hits: Vec<u32> = h.samples.iter().map(|s| s.outcome.hits).collect();
    assert_eq!(hits, [1, 0, 2, 1, 1]);
}

#[test]
fn a_write_between_two_gets_keeps_its_place() {
    // The third get may not join the first line: it would read before the set.
    let h = batch(
        vec![server_with(&[])],
        merging(8, 1 << 20),
        &[
            "get k\r\n",
            "set k 0 0 2\r\nhi\r\n",
            "get k\r\n",
            "get j\r\n",
        ],
    );
    assert_eq!(lines(&h, 0), ["get k", "set k", "get k"]);
    assert_eq!(
        replies(&h),
        [
            "END\r\n",
            "STORED\r\n",
            "VALUE k 0 2\r\nhi\r\nEND\r\n",
            "END\r\n"
        ]
    );
}

#[test]
fn gets_joins_only_gets() {
    let h = batch(
        vec![server_with(&[("a", "1")])],
        merging(8, 1 << 20),
        &["get a\r\n", "gets a\r\n", "gets a\r\n", "get a\r\n"],
    );
    assert_eq!(lines(&h, 0), ["get a", "get a", "get a"]);
    assert_eq!(h.replies.len(), 4);
}

#[test]
fn each_server_gets_one_line_of_its_own_keys() {
    let servers = (0..3).map(|_| server_with(&[])).collect();
    let requests: Vec<String> = (0..12).map(|i| format!("get key{i}\r\n")).collect();
    let requests: Vec<&str> = requests.iter().map(String::as_str).collect();
    let h = batch(servers, merging(12, 1 << 20), &requests);
    for server in 0..3 {
        assert!(lines(&h, server).len() <= 1, "{:?}", lines(&h, server));
    }
    assert!(replies(&h).iter().all(|r| r == "END\r\n"));
}

#[test]
fn a_line_stops_growing_at_its_bound() {
    let key = |i: usize| format!("{i:0>200}");
    let values: Vec<(String, String)> = (0..30).map(|i| (key(i), format!("v{i}"))).collect();
    let pairs: Vec<(&str, &str)> = values
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let requests: Vec<String> = (0..30).map(|i| format!("get {}\r\n", key(i))).collect();
    let requests: Vec<&str> = requests.iter().map(String::as_str).collect();
    let h = batch(vec![server_with(&pairs)], merging(30, 1 << 20), &requests);
    // 201 bytes a key: 10 fit in a line of at most 2,048 bytes.
    assert_eq!(lines(&h, 0).len(), 3);
    for (i, reply) in replies(&h).iter().enumerate() {
        let value = format!("v{i}");
        let expected = format!("VALUE {} 0 {}\r\n{value}\r\nEND\r\n", key(i), value.len());
        assert_eq!(reply, &expected);
    }
}

#[test]
fn a_value_too_large_for_its_request_refuses_only_it() {
    let big = "x".repeat(1500);
    let server = server_with(&[("a", "1"), ("big", &big)]);
    let h = batch(
        vec![server],
        merging(4, 1000),
        &["get a\r\n", "get big\r\n", "get a\r\n"],
    );
    assert_eq!(lines(&h, 0), ["get a"]);
    assert_eq!(
        replies(&h),
        [
            "VALUE a 0 1\r\n1\r\nEND\r\n",
            "SERVER_ERROR reply too large\r\n",
            "VALUE a 0 1\r\n1\r\nEND\r\n",
        ]
    );
}

#[test]
fn a_line_through_a_shared_connection_is_one_reply_to_its_demux() {
    for read_size in [1, 5, 64, 4096] {
        let p = pool(1, Some(1), Protocol::Memcached);
        let mut h = Harness::new(vec![server_with(&[("a", "1")])], false, merging(4, 1 << 20))
            .through_demux(true, read_size);
        let reqs = ["get a\r\n", "get b\r\n", "delete b\r\n", "get a\r\n"]
            .iter()
            .map(|r| request(&p, r.as_bytes(), h.now))
            .collect();
        h.serve(reqs);
        check_one_reply_each_in_order(&h, 4);
        assert_eq!(
            replies(&h),
            [
                "VALUE a 0 1\r\n1\r\nEND\r\n",
                "END\r\n",
                "NOT_FOUND\r\n",
                "VALUE a 0 1\r\n1\r\nEND\r\n"
            ]
        );
    }
}

/// A request for the property: retrievals of one or more keys (`get` and `gets`),
/// writes and deletes of the same few keys.
fn retrieval_heavy_request() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => (0u8..6).prop_map(|k| format!("get k{k}\r\n").into_bytes()),
        1 => (0u8..6).prop_map(|k| format!("gets k{k}\r\n").into_bytes()),
        2 => (0u8..6, 1usize..4).prop_map(|(k, n)| {
            let keys: Vec<String> = (0..n).map(|i| format!("k{}", (k as usize + i) % 6)).collect();
            format!("get {}\r\n", keys.join(" ")).into_bytes()
        }),
        1 => (0u8..6).prop_map(|k| format!("set k{k} 0 0 2\r\nv{k}\r\n").into_bytes()),
        1 => (0u8..6).prop_map(|k| format!("delete k{k}\r\n").into_bytes()),
    ]
}

/// Server behaviours that do not count requests: one line for several requests is
/// still answered the same way.
fn behaviour() -> impl Strategy<Value = Behaviour> {
    prop_oneof![
        4 => Just(Behaviour::Normal),
        1 => Just(Behaviour::Refuses),
        1 => Just(Behaviour::Silent),
        1 => Just(Behaviour::Garbage),
        1 => Just(Behaviour::RefusesWrites),
    ]
}

/// Replies, failovers and outcomes: what a client and the statistics see.
fn seen(h: &Harness) -> String {
    let outcomes: Vec<String> = h
        .samples
        .iter()
        .map(|s| format!("{:?} {}", s.outcome, s.failovers))
        .collect();
    let replies: Vec<_> = h
        .replies
        .iter()
        .map(|r| (r.job, &r.bytes, r.failovers))
        .collect();
    format!("{replies:?}\n{outcomes:?}\n{:?}", h.failures)
}

fn served(
    merge_gets: bool,
    replicas: Option<usize>,
    pipeline: usize,
    behaviours: &[(Behaviour, u64)],
    batches: &[Vec<Vec<u8>>],
    read_size: Option<usize>,
) -> (Harness, usize) {
    let s = EngineSettings {
        pipeline,
        max_reply_bytes: 1 << 20,
        merge_gets,
    };
    let mut h = Harness::new(Harness::servers_of(behaviours), false, s);
    if let Some(read_size) = read_size {
        h = h.through_demux(true, read_size);
    }
    let taken = h.serve_batches(replicas, pipeline, batches);
    (h, taken)
}

proptest! {
    #![proptest_config(seeded())]

    #[test]
    fn merged_lines_answer_every_request_as_separate_ones_do(
        replicas in prop::option::of(1usize..3),
        pipeline in 1usize..8,
        behaviours in prop::collection::vec((behaviour(), 0u64..200_000), 1..4),
        batches in prop::collection::vec(
            prop::collection::vec(retrieval_heavy_request(), 1..8), 1..5),
        read_size in prop::option::of(1usize..600),
    ) {
        let args = (replicas, pipeline, &behaviours[..], &batches[..], read_size);
        let (apart, taken) = served(false, args.0, args.1, args.2, args.3, args.4);
        let (merged, _) = served(true, args.0, args.1, args.2, args.3, args.4);
        check_one_reply_each_in_order(&merged, taken);
        prop_assert_eq!(seen(&apart), seen(&merged));
    }
}
