//! `--merge-gets` against real memcached: the `get`s a worker has for one server in a
//! batch go out as one line, and every client still gets exactly its own values (CAS
//! tokens included), byte for byte, after the writes it sent before them: what
//! memcached itself gives a client that sends the same pipelined stream.

mod common;

use std::thread;

use cachelab_protocol::Expect;
use common::{start_servers, values_reply, Client, Memcached, Proxy};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use common::stat_number as stat;

const MERGING: &[&str] = &["-t", "2", "--pipeline", "16", "--merge-gets"];

/// Each of 8 clients pipelines, on its own keys, a set, a get of the value just set, a
/// get of a key nobody set, and a multi-get of both.
fn clients_get_their_own_values(proxy: &Proxy) {
    let addr = proxy.addr;
    let clients: Vec<_> = (0..8)
        .map(|c| {
            thread::spawn(move || {
                let mut client = Client::connect(addr);
                let (mut batch, mut expected) = (Vec::new(), Vec::new());
                for i in 0..150 {
                    let key = format!("c{c}-k{}", i % 7);
                    let value = format!("value-{c}-{i}");
                    batch.extend(format!("set {key} 0 0 {}\r\n{value}\r\n", value.len()).bytes());
                    expected.push((Expect::Store, "STORED\r\n".to_string()));
                    let hit = values_reply(&[(&key, &value)]);
                    batch.extend(format!("get {key}\r\n").bytes());
                    expected.push((Expect::Values, hit.clone()));
                    batch.extend(format!("get c{c}-never\r\n").bytes());
                    expected.push((Expect::Values, "END\r\n".to_string()));
                    batch.extend(format!("get c{c}-never {key}\r\n").bytes());
                    expected.push((Expect::Values, hit));
                }
                client.send(&batch);
                for (i, (expect, want)) in expected.iter().enumerate() {
                    let got = String::from_utf8(client.read_reply(*expect)).unwrap();
                    assert_eq!(&got, want, "client {c}, reply {i}");
                }
            })
        })
        .collect();
    for client in clients {
        client.join().unwrap();
    }
}

#[test]
fn merged_lines_answer_each_client_with_its_own_values() {
    let servers = start_servers(2);
    let servers: Vec<_> = servers.iter().collect();
    for shared in [false, true] {
        let mut args = MERGING.to_vec();
        if shared {
            args.push("--share-connections");
        }
        let proxy = Proxy::start(&servers, &args);
        clients_get_their_own_values(&proxy);
        let mut client = proxy.client();
        assert_eq!(stat(&mut client, "merge_gets"), 1);
        let merged = stat(&mut client, "merged_gets");
        assert!(
            merged > 0,
            "no get joined another's line (shared: {shared})"
        );
    }
}

#[test]
fn a_cas_token_from_a_merged_gets_is_its_own_keys() {
    let servers = start_servers(1);
    let proxy = Proxy::start(&[&servers[0]], MERGING);
    let mut client = proxy.client();
    let keys: Vec<String> = (0..12).map(|i| format!("cas{i}")).collect();
    for key in &keys {
        assert_eq!(client.set(key, "old"), "STORED\r\n");
    }
    let batch: String = keys.iter().map(|k| format!("gets {k}\r\n")).collect();
    client.send(batch.as_bytes());
    let tokens: Vec<String> = keys
        .iter()
        .map(|key| {
            let reply = String::from_utf8(client.read_reply(Expect::Values)).unwrap();
            let header = reply.lines().next().unwrap().to_owned();
            let fields: Vec<&str> = header.split(' ').collect();
            assert_eq!(fields[..4], ["VALUE", key.as_str(), "0", "3"], "{reply}");
            fields[4].to_owned()
        })
        .collect();
    // Each token swaps its own key's value, and no other's.
    for (key, token) in keys.iter().zip(&tokens) {
        let cas = format!("cas {key} 0 0 3 {token}\r\nnew\r\n");
        assert_eq!(client.request(cas.as_bytes(), Expect::Store), b"STORED\r\n");
    }
    assert!(stat(&mut client, "merged_gets") > 0);
}

#[test]
fn large_values_in_a_merged_reply_come_back_byte_for_byte() {
    let servers = start_servers(1);
    let args = ["-t", "1", "--pipeline", "32", "--merge-gets"];
    let proxy = Proxy::start(&[&servers[0]], &args);
    common::large_values_come_back_whole(&proxy, 4, " gone");
    assert!(stat(&mut proxy.client(), "merged_gets") > 0);
}

/// A request for the differential run, and the kind of reply it gets.
fn random_request(rng: &mut Xoshiro256PlusPlus) -> (Vec<u8>, Expect) {
    let key = |rng: &mut Xoshiro256PlusPlus| format!("k{}", rng.random_range(0..12));
    match rng.random_range(0..10) {
        0..=4 => {
            let cmd = if rng.random_range(0..4) == 0 {
                "gets"
            } else {
                "get"
            };
            let keys: Vec<String> = (0..rng.random_range(1..5)).map(|_| key(rng)).collect();
            (
                format!("{cmd} {}\r\n", keys.join(" ")).into_bytes(),
                Expect::Values,
            )
        }
        5 | 6 => {
            let value = "v".repeat(rng.random_range(0..3000));
            let cmd = ["set", "add", "append"][rng.random_range(0..3)];
            let k = key(rng);
            let request = format!("{cmd} {k} 7 0 {}\r\n{value}\r\n", value.len());
            (request.into_bytes(), Expect::Store)
        }
        7 => (
            format!("delete {}\r\n", key(rng)).into_bytes(),
            Expect::Delete,
        ),
        8 => (
            format!("touch {} 0\r\n", key(rng)).into_bytes(),
            Expect::Touch,
        ),
        _ => (b"get \r\n".to_vec(), Expect::Values),
    }
}

#[test]
fn pipelined_streams_get_what_memcached_gives_them_directly() {
    // Two fresh servers: the same stores in the same order give the same CAS tokens.
    let (direct, behind) = (Memcached::start(), Memcached::start());
    let proxy = Proxy::start(&[&behind], &["-t", "2", "--pipeline", "16", "--merge-gets"]);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(34);
    let (mut to_direct, mut to_proxy) = (Client::connect(direct.addr), proxy.client());
    for burst in 0..60 {
        let requests: Vec<_> = (0..rng.random_range(1..40))
            .map(|_| random_request(&mut rng))
            .collect();
        let bytes: Vec<u8> = requests.iter().flat_map(|(r, _)| r.clone()).collect();
        to_direct.send(&bytes);
        to_proxy.send(&bytes);
        for (i, (request, expect)) in requests.iter().enumerate() {
            let want = to_direct.read_reply(*expect);
            let got = to_proxy.read_reply(*expect);
            assert!(
                want == got,
                "burst {burst}, request {i} {:?}: memcached {:?}, proxy {:?}",
                String::from_utf8_lossy(request),
                String::from_utf8_lossy(&want),
                String::from_utf8_lossy(&got)
            );
        }
    }
    assert!(stat(&mut to_proxy, "merged_gets") > 0);
}
