//! Optimistic concurrency through replicated pools: a key's `gets` and `cas` (and the
//! meta protocol's `mg c` and `ms C`) go to its primary, so a token is used where it was
//! issued, and a swap that succeeds there is written to the other replicas.

mod common;

use cachelab_protocol::Expect;
use common::{start_servers, Client, Memcached, Proxy};

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap()
}

/// The CAS unique of a `gets` reply's only value.
fn unique(reply: &str) -> String {
    reply
        .lines()
        .next()
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap()
        .to_string()
}

/// Makes the servers' CAS counters differ, as after a restart or a missed write.
fn skew_counters(servers: &[Memcached]) {
    for (i, server) in servers.iter().enumerate() {
        let mut direct = Client::connect(server.addr);
        for n in 0..(i * 3 + 1) {
            assert_eq!(direct.set(&format!("skew{n}"), "x"), "STORED\r\n");
        }
    }
}

fn values_everywhere(servers: &[Memcached], key: &str) -> Vec<String> {
    servers
        .iter()
        .map(|s| Client::connect(s.addr).get(&[key]))
        .collect()
}

#[test]
fn gets_then_cas_succeeds_through_replicas_whose_counters_differ_and_they_converge() {
    let servers = start_servers(3);
    skew_counters(&servers);
    let proxy = Proxy::start(&servers.iter().collect::<Vec<_>>(), &["-t", "4"]);
    let mut c = proxy.client();
    assert_eq!(c.set("a", "0"), "STORED\r\n");
    for round in 1..=6 {
        let gets = text(c.request(b"gets a\r\n", Expect::Values));
        let token = unique(&gets);
        let cas = format!("cas a 0 0 1 {token}\r\n{}\r\n", round % 10);
        assert_eq!(
            text(c.request(cas.as_bytes(), Expect::Store)),
            "STORED\r\n",
            "round {round}"
        );
        // A stale token is refused, as memcached refuses it.
        let stale = format!("cas a 0 0 1 {token}\r\nx\r\n");
        assert_eq!(
            text(c.request(stale.as_bytes(), Expect::Store)),
            "EXISTS\r\n"
        );
    }
    let expected = "VALUE a 0 1\r\n6\r\nEND\r\n";
    assert!(values_everywhere(&servers, "a")
        .iter()
        .all(|v| v == expected));
}

#[test]
fn meta_cas_goes_to_the_primary_too() {
    let servers = start_servers(2);
    skew_counters(&servers);
    let proxy = Proxy::start(&servers.iter().collect::<Vec<_>>(), &["-t", "2"]);
    let mut c = proxy.client();
    assert_eq!(text(c.request(b"ms m 1\r\n1\r\n", Expect::Meta)), "HD\r\n");
    for round in 0..4 {
        let got = text(c.request(b"mg m c\r\n", Expect::Meta));
        let token = got.trim_end().strip_prefix("HD c").expect(&got).to_string();
        let ms = format!("ms m 1 C{token}\r\n{round}\r\n");
        assert_eq!(
            text(c.request(ms.as_bytes(), Expect::Meta)),
            "HD\r\n",
            "round {round}"
        );
    }
    let expected = "VALUE m 0 1\r\n3\r\nEND\r\n";
    assert!(values_everywhere(&servers, "m")
        .iter()
        .all(|v| v == expected));
}

#[test]
fn when_the_primary_is_ejected_the_next_server_in_the_keys_order_takes_over() {
    let mut servers = start_servers(2);
    skew_counters(&servers);
    let proxy = Proxy::start(
        &servers.iter().collect::<Vec<_>>(),
        &["-t", "2", "--failure-limit", "1"],
    );
    let mut c = proxy.client();
    assert_eq!(c.set("p", "0"), "STORED\r\n");
    let token = unique(&text(c.request(b"gets p\r\n", Expect::Values)));
    // Which server issued it: the only one whose own gets shows that unique.
    let primary = servers
        .iter()
        .position(|s| {
            unique(
                &Client::connect(s.addr)
                    .request(b"gets p\r\n", Expect::Values)
                    .iter()
                    .map(|&b| b as char)
                    .collect::<String>(),
            ) == token
        })
        .expect("the token is one server's");
    servers[primary].stop();
    // Until the proxy has seen it fail, requests for it fail; then the other takes over.
    let mut new_gets = String::new();
    for _ in 0..20 {
        new_gets = text(c.request(b"gets p\r\n", Expect::Values));
        if new_gets.starts_with("VALUE") {
            break;
        }
    }
    assert!(new_gets.starts_with("VALUE p 0 1 "), "{new_gets}");
    let stale = format!("cas p 0 0 1 {token}\r\nx\r\n");
    assert_eq!(
        text(c.request(stale.as_bytes(), Expect::Store)),
        "EXISTS\r\n"
    );
    let fresh = format!("cas p 0 0 1 {}\r\ny\r\n", unique(&new_gets));
    assert_eq!(
        text(c.request(fresh.as_bytes(), Expect::Store)),
        "STORED\r\n"
    );
}
