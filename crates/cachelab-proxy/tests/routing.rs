//! Routing against three real memcached servers: replication, round-robin balance,
//! sharded and non-sharded multi-GETs, misses, and pipelining.

mod common;

use cachelab_protocol::Expect;
use common::{start_servers, values_reply, Client, Memcached, Proxy};

fn cmd_gets(servers: &[Memcached]) -> Vec<u64> {
    servers.iter().map(|s| s.stat("cmd_get")).collect()
}

fn delta(after: &[u64], before: &[u64]) -> Vec<u64> {
    after.iter().zip(before).map(|(a, b)| a - b).collect()
}

#[test]
fn a_set_through_the_proxy_is_readable_from_every_server() {
    let servers = start_servers(3);
    let proxy = Proxy::start(&servers.iter().collect::<Vec<_>>(), &["-t", "4"]);
    let mut client = proxy.client();
    assert_eq!(client.set("greeting", "hello"), "STORED\r\n");
    for server in &servers {
        let mut direct = Client::connect(server.addr);
        assert_eq!(
            direct.get(&["greeting"]),
            values_reply(&[("greeting", "hello")])
        );
    }
}

#[test]
fn storage_and_other_writes_are_replicated_with_the_reply_rule() {
    let servers = start_servers(3);
    let proxy = Proxy::start(&servers.iter().collect::<Vec<_>>(), &["-t", "4"]);
    let mut c = proxy.client();
    let mut req = |bytes: &[u8], expect| String::from_utf8(c.request(bytes, expect)).unwrap();
    assert_eq!(req(b"add n 0 0 1\r\n5\r\n", Expect::Store), "STORED\r\n");
    assert_eq!(
        req(b"add n 0 0 1\r\n6\r\n", Expect::Store),
        "NOT_STORED\r\n"
    );
    assert_eq!(req(b"append n 0 0 1\r\n0\r\n", Expect::Store), "STORED\r\n");
    assert_eq!(req(b"incr n 7\r\n", Expect::Arith), "57\r\n");
    assert_eq!(req(b"decr n 50\r\n", Expect::Arith), "7\r\n");
    assert_eq!(req(b"touch n 100\r\n", Expect::Touch), "TOUCHED\r\n");
    assert_eq!(req(b"delete n\r\n", Expect::Delete), "DELETED\r\n");
    assert_eq!(req(b"delete n\r\n", Expect::Delete), "NOT_FOUND\r\n");
    assert_eq!(
        req(b"set q 0 0 1 noreply\r\nx\r\nget q\r\n", Expect::Values),
        values_reply(&[("q", "x")])
    );
    for server in &servers {
        let mut direct = Client::connect(server.addr);
        assert_eq!(direct.get(&["n"]), "END\r\n");
        assert_eq!(direct.get(&["q"]), values_reply(&[("q", "x")]));
    }
}

#[test]
fn three_hundred_gets_land_one_hundred_on_each_server() {
    gets_balanced(&["-t", "8"]);
}

#[test]
fn with_pipelining_three_hundred_gets_land_one_hundred_on_each_server() {
    gets_balanced(&["-t", "2", "--pipeline", "8"]);
}

fn gets_balanced(args: &[&str]) {
    let servers = start_servers(3);
    let proxy = Proxy::start(&servers.iter().collect::<Vec<_>>(), args);
    let mut client = proxy.client();
    client.set("k", "v");
    let before = cmd_gets(&servers);
    for _ in 0..300 {
        assert_eq!(client.get(&["k"]), values_reply(&[("k", "v")]));
    }
    assert_eq!(delta(&cmd_gets(&servers), &before), vec![100, 100, 100]);
}

/// The extension `--pipeline` must route exactly like the default mode.
const PIPELINED: &[&str] = &["--pipeline", "8"];

#[test]
fn sharded_multi_gets_split_over_the_servers_and_keep_the_key_order() {
    sharded_split_and_order(&[]);
}

#[test]
fn with_pipelining_sharded_multi_gets_split_and_keep_the_key_order() {
    sharded_split_and_order(PIPELINED);
}

fn sharded_split_and_order(mode: &[&str]) {
    let servers = start_servers(3);
    let mut args = vec!["-t", "4", "-s"];
    args.extend_from_slice(mode);
    let proxy = Proxy::start(&servers.iter().collect::<Vec<_>>(), &args);
    let mut client = proxy.client();
    let keys: Vec<String> = (0..9).map(|i| format!("key{i}")).collect();
    for k in &keys {
        client.set(k, &format!("value-of-{k}"));
    }
    // Expected keys per server for each multi-GET, given the round-robin position:
    // 1 key: server 0; 3 keys: 1,1,1 starting at server 1 (position 1 -> 1,2,0);
    // 6: 2,2,2; 7: 3,2,2 starting where the rotation is; 9: 3,3,3.
    let mut position = 0usize;
    for (n, sizes) in [
        (1, vec![1]),
        (3, vec![1, 1, 1]),
        (6, vec![2, 2, 2]),
        (7, vec![3, 2, 2]),
        (9, vec![3, 3, 3]),
    ] {
        // Ask in reverse order, to prove the reply follows the client's order.
        let asked: Vec<&str> = keys[..n].iter().rev().map(String::as_str).collect();
        let before = cmd_gets(&servers);
        let reply = client.get(&asked);
        let expected: Vec<(&str, String)> = asked
            .iter()
            .map(|k| (*k, format!("value-of-{k}")))
            .collect();
        let expected: Vec<(&str, &str)> = expected.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(reply, values_reply(&expected), "{n} keys");
        let mut want = vec![0u64; 3];
        for (i, size) in sizes.iter().enumerate() {
            want[(position + i) % 3] += *size as u64;
        }
        assert_eq!(
            delta(&cmd_gets(&servers), &before),
            want,
            "split of {n} keys"
        );
        position += sizes.len();
    }
}

#[test]
fn non_sharded_multi_gets_go_to_one_server_each_round_robin() {
    let servers = start_servers(3);
    let proxy = Proxy::start(&servers.iter().collect::<Vec<_>>(), &["-t", "4"]);
    let mut client = proxy.client();
    for k in ["a", "b", "c"] {
        client.set(k, k);
    }
    for round in 0..6 {
        let before = cmd_gets(&servers);
        let reply = client.get(&["c", "a", "b"]);
        assert_eq!(reply, values_reply(&[("c", "c"), ("a", "a"), ("b", "b")]));
        let mut want = vec![0; 3];
        want[round % 3] = 3;
        assert_eq!(delta(&cmd_gets(&servers), &before), want, "request {round}");
    }
}

#[test]
fn misses_are_reported_as_misses() {
    let servers = start_servers(3);
    for sharded in [false, true] {
        let mut args = vec!["-t", "2"];
        if sharded {
            args.push("-s");
        }
        let proxy = Proxy::start(&servers.iter().collect::<Vec<_>>(), &args);
        let mut client = proxy.client();
        client.set("present", "yes");
        assert_eq!(client.get(&["absent"]), "END\r\n");
        assert_eq!(
            client.get(&["absent", "present", "gone", "nope"]),
            values_reply(&[("present", "yes")])
        );
        let stats = String::from_utf8(client.request(b"stats\r\n", Expect::Stats)).unwrap();
        assert!(stats.contains("STAT get_hits 1\r\n"), "{stats}");
        assert!(stats.contains("STAT get_misses 4\r\n"), "{stats}");
    }
}

#[test]
fn pipelined_requests_on_one_connection_are_answered_in_order() {
    requests_answered_in_order(&["-t", "16"]);
}

#[test]
fn with_pipelining_pipelined_requests_are_answered_in_order() {
    requests_answered_in_order(&["-t", "2", "--pipeline", "16"]);
}

fn requests_answered_in_order(mode: &[&str]) {
    let servers = start_servers(3);
    let mut args = vec!["-s"];
    args.extend_from_slice(mode);
    let proxy = Proxy::start(&servers.iter().collect::<Vec<_>>(), &args);
    let mut client = proxy.client();
    let mut batch = Vec::new();
    let mut expected = String::new();
    for i in 0..60 {
        let key = format!("p{}", i % 7);
        match i % 4 {
            0 => {
                let value = format!("v{i}");
                batch.extend(format!("set {key} 0 0 {}\r\n{value}\r\n", value.len()).bytes());
                expected.push_str("STORED\r\n");
            }
            1 => {
                batch.extend(b"version\r\n");
                expected.push_str("VERSION cachelab-proxy-0.1.0\r\n");
            }
            _ => {
                batch.extend(format!("get {key} nothing\r\n").bytes());
                // The latest value set for this key, if any (sets take effect in order).
                let last_set = (0..i).rev().find(|j| j % 4 == 0 && j % 7 == i % 7);
                match last_set {
                    Some(j) => expected.push_str(&values_reply(&[(&key, &format!("v{j}"))])),
                    None => expected.push_str("END\r\n"),
                }
            }
        }
    }
    client.send(&batch);
    let mut got = Vec::new();
    while got.len() < expected.len() {
        let mut chunk = [0u8; 65536];
        let n = std::io::Read::read(&mut client.stream, &mut chunk).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&chunk[..n]);
    }
    assert_eq!(String::from_utf8(got).unwrap(), expected);
}
